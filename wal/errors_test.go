package wal

import (
	"errors"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestErrors_MeanTheContractsOnesExceptAmbiguity: the log's closed,
// fail-stop and corruption errors are the contract's too, each keeping
// its own identity; its ambiguity is not (errors.go says why).
func TestErrors_MeanTheContractsOnesExceptAmbiguity(t *testing.T) {
	for _, c := range []struct {
		err, own, contract error
	}{
		{ErrClosed, ErrClosed, store.ErrClosed},
		{ErrFailStopped, ErrFailStopped, store.ErrFailStopped},
		{ErrCorruption, ErrCorruption, store.ErrCorruption},
		{&CorruptionError{Segment: "s"}, ErrCorruption, store.ErrCorruption},
		{&FrameError{Index: 1}, ErrCorruption, store.ErrCorruption},
	} {
		if !errors.Is(c.err, c.own) || !errors.Is(c.err, c.contract) {
			t.Errorf("%v: errors.Is own %v, contract's %v", c.err, errors.Is(c.err, c.own), errors.Is(c.err, c.contract))
		}
	}
	if errors.Is(ErrClosed, ErrFailStopped) || errors.Is(ErrFailStopped, store.ErrClosed) {
		t.Error("closed and fail-stopped match each other")
	}
	if errors.Is(ErrAmbiguous, store.ErrAmbiguous) {
		t.Error("wal.ErrAmbiguous matches store.ErrAmbiguous: a fail-stopped engine's refusals would read as unknown outcomes")
	}
}
