package engine

import (
	"errors"
	"fmt"

	"github.com/idemdb/idem/store"
)

// ErrLocked is returned by Open when another process holds the data dir.
// The contract's errors are package store's (store/errors.go).
var ErrLocked = errors.New("engine: data dir locked by another process")

// Internal sentinels: never returned by an exported call as themselves.
var (
	// errCheckpointDamaged marks a checkpoint that does not decode; recovery
	// falls back to an older one (recover.go).
	errCheckpointDamaged = errors.New("damaged checkpoint")
	// errCheckpointStopped reports a checkpoint paused by Close between
	// parts; its parts so far are kept and the next open resumes it.
	errCheckpointStopped = errors.New("engine: checkpoint stopped by close")
	// errBadBody marks a batch body in the log that does not decode
	// (codec.go); recovery reports it as a *CorruptionError.
	errBadBody = errors.New("malformed batch body")
)

// CorruptionError says which file is damaged and how.
type CorruptionError struct {
	File   string
	Reason string
	Err    error
}

func (e *CorruptionError) Error() string {
	switch {
	case e.Err != nil && e.Reason == "":
		return fmt.Sprintf("engine: corruption in %s: %v", e.File, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("engine: corruption in %s: %s: %v", e.File, e.Reason, e.Err)
	}
	return fmt.Sprintf("engine: corruption in %s: %s", e.File, e.Reason)
}

// Is makes errors.Is(err, store.ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == store.ErrCorruption }

func (e *CorruptionError) Unwrap() error { return e.Err }
