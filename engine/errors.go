package engine

import (
	"bytes"
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned by Get for a missing key.
	ErrNotFound = errors.New("engine: not found")
	// ErrConditionFailed marks a batch rejected by one of its conditions;
	// nothing was written. The concrete error is a *ConditionError.
	ErrConditionFailed = errors.New("engine: condition failed")
	// ErrAmbiguous means the batch may or may not have been applied (the
	// write or fsync failed after submission, or the context ended while
	// waiting). Callers must treat it as pending, never as failure.
	ErrAmbiguous = errors.New("engine: outcome unknown")
	// ErrFailStopped is returned by writes after the log hit an I/O error;
	// nothing was written. Reopen the store to recover.
	ErrFailStopped = errors.New("engine: fail-stopped")
	// ErrUnavailable is returned by a remote store that could not be
	// reached within its bound: a read learned nothing, and changed
	// nothing. (A write that could not be reached is ErrAmbiguous: it may
	// have been sent.) Retry later.
	ErrUnavailable = errors.New("engine: store unavailable")
	// ErrNoSpace marks a write a remote store refused for want of space
	// (etcd's NOSPACE alarm). It comes wrapped in ErrFailStopped — nothing
	// was written, and writes stay refused until space is freed — but
	// unlike a fail-stop no restart is needed: writes resume once an
	// operator (or compaction) frees space.
	ErrNoSpace = errors.New("engine: store out of space")
	// ErrClosed is returned by every call on a closed store.
	ErrClosed = errors.New("engine: closed")
	// ErrInvalidBatch is returned for a batch that breaks a limit or has no
	// ops; nothing was written.
	ErrInvalidBatch = errors.New("engine: invalid batch")
	// ErrInvalidScan is returned by Scan for a limit outside 1..ScanLimitMax.
	ErrInvalidScan = errors.New("engine: invalid scan")
	// ErrCorruption marks damaged files found on open.
	ErrCorruption = errors.New("engine: corruption")
	// ErrLocked is returned by Open when another process holds the data dir.
	ErrLocked = errors.New("engine: data dir locked by another process")
)

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

// ConditionError names the condition that failed and what was found.
type ConditionError struct {
	Cond  Condition
	Found Version // version found, 0 if the key was absent
	// Value is the value found at Cond.Key when the store read it with
	// the failure, at no cost of its own: etcdstore does for a failed
	// MustBeAbsent condition (its Else branch reads the key in the same
	// round trip), so that a create that finds its key learns what is
	// there without a second one. Nil otherwise: a caller that needs the
	// value reads the key.
	Value []byte
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("engine: condition failed: key %q must be %s (want version %d, found %d)",
		e.Cond.Key, e.Cond.Kind, e.Cond.Version, e.Found)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionError) Is(target error) bool { return target == ErrConditionFailed }

// FailedKey returns the key whose condition failed, if err is a condition
// failure. Callers classify by key (its namespace), never by message text.
func FailedKey(err error) ([]byte, bool) {
	var ce *ConditionError
	if errors.As(err, &ce) {
		return ce.Cond.Key, true
	}
	return nil, false
}

// ValueError reports one key whose stored value does not read: damaged on
// disk, or not one this store wrote. It is the key's failure, not the
// store's — every other key still reads — so a caller walking a range can
// step past it (DamagedKey) instead of stopping there. It matches
// ErrCorruption.
type ValueError struct {
	Key []byte
	Err error // says where and how; matches ErrCorruption
}

func (e *ValueError) Error() string { return e.Err.Error() }
func (e *ValueError) Unwrap() error { return e.Err }

// RecordError reports a stored value that the store read back intact but
// that does not decode as the record its key holds (what): bytes no
// version of Idem wrote there. Above the engine every record decode fails
// so, never as a bare decoding error, so that a caller tells damage from a
// failure of its own (errors.Is(err, ErrCorruption)) and an operator gets
// the key. Like a ValueError from the store, it is that key's damage.
func RecordError(key []byte, what string, err error) error {
	return &ValueError{Key: bytes.Clone(key), Err: fmt.Errorf("%w: %s at %q does not decode: %v", ErrCorruption, what, key, err)}
}

// DamagedKey returns the key whose value did not read, if err says so.
func DamagedKey(err error) ([]byte, bool) {
	var ve *ValueError
	if errors.As(err, &ve) {
		return ve.Key, true
	}
	return nil, false
}

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

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

func (e *CorruptionError) Unwrap() error { return e.Err }
