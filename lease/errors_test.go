package lease

import (
	"errors"
	"testing"

	"github.com/idemdb/idem/store"
)

// TestErrUncertain_IsAnUnknownOutcome: an unconfirmed lease is the
// contract's ErrAmbiguous, and still tells itself apart from a fence.
func TestErrUncertain_IsAnUnknownOutcome(t *testing.T) {
	if !errors.Is(ErrUncertain, store.ErrAmbiguous) || !errors.Is(ErrUncertain, ErrUncertain) || errors.Is(ErrUncertain, ErrFenced) {
		t.Fatal("ErrUncertain does not mean an unknown outcome alone")
	}
	if errors.Is(ErrFenced, store.ErrAmbiguous) {
		t.Fatal("ErrFenced reads as an unknown outcome")
	}
}
