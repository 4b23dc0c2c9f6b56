package store

import (
	"bytes"
	"errors"
	"fmt"
)

// The contract's errors, grouped by when they happen (as bbolt keeps its
// own). Every store returns these, wrapped as it likes: callers test them
// with errors.Is, never by message.

// Any call.
var (
	// ErrClosed is returned by every call on a closed store.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable is returned by a remote store that could not be
	// reached within its bound: a read learned nothing, and changed
	// nothing. (A write that could not be reached is ErrAmbiguous: it may
	// have been sent.) Retry later.
	ErrUnavailable = errors.New("store: unavailable")
)

// Reads.
var (
	// ErrNotFound is returned by Get for a missing key.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalidScan is returned by Scan for a limit outside
	// 1..Limits().ScanItemsMax (CheckScan); nothing was read.
	ErrInvalidScan = errors.New("store: invalid scan")
)

// Apply, refused before anything was written.
var (
	// ErrInvalidBatch is returned for a batch that breaks a rule of Check
	// or a limit of the store; nothing was written.
	ErrInvalidBatch = errors.New("store: invalid batch")
	// ErrConditionFailed marks a batch rejected by one of its conditions;
	// nothing was written. The concrete error is a *ConditionError.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrFailStopped is returned by writes after the store hit an error it
	// cannot write past (the local log's I/O error); nothing was written.
	// Reopen the store to recover (but see ErrNoSpace).
	ErrFailStopped = errors.New("store: fail-stopped")
	// ErrNoSpace marks a write a remote store refused for want of space
	// (etcd's NOSPACE alarm). It comes wrapped in ErrFailStopped — nothing
	// was written, and writes stay refused until space is freed — but
	// unlike a fail-stop no restart is needed: writes resume once an
	// operator (or compaction) frees space.
	ErrNoSpace = errors.New("store: out of space")
)

// Apply, after submission.
var (
	// ErrAmbiguous means the batch may or may not have been applied (the
	// write or fsync failed after submission, or the context ended while
	// waiting). Callers must treat it as pending, never as failure. Every
	// "outcome unknown" of the layers below and above wraps it.
	ErrAmbiguous = errors.New("store: outcome unknown")
)

// Damage.
var (
	// ErrCorruption marks damaged data: a file found damaged on open, a
	// value that does not read back whole, a record that does not decode.
	ErrCorruption = errors.New("store: corruption")
)

// Bugs.
var (
	// ErrInvariant marks a write refused because a record it would store
	// breaks an invariant its reader checks (InvalidRecord): a bug in the
	// writer, not damage. Nothing was written; the reader would have
	// refused the same bytes as corruption (RecordError).
	ErrInvariant = errors.New("store: invariant broken")
)

// Kind returns a sentinel of another package that means what kind means:
// errors.Is(err, kind) holds for it, and it keeps its own identity and
// message, so that a caller that tells it apart still can (wal.ErrClosed,
// lease.ErrUncertain). One meaning, one contract sentinel to test for.
func Kind(msg string, kind error) error { return &kindError{msg: msg, kind: kind} }

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// ConditionError names the condition that failed and what was found.
type ConditionError struct {
	Cond  Condition
	Found Version // version found, 0 if the key was absent
	// Value is the value found at Cond.Key when the store read it with
	// the failure, at no cost of its own: the etcd store does for a failed
	// MustBeAbsent condition (its Else branch reads the key in the same
	// round trip), so that a create that finds its key learns what is
	// there without a second one. Nil otherwise: a caller that needs the
	// value reads the key.
	Value []byte
}

// Failed is the error of a batch whose condition c did not hold, its key
// found at version found. It copies c's key: the batch stays the caller's,
// free to reuse once Apply returns.
func Failed(c Condition, found Version) *ConditionError {
	return &ConditionError{Cond: Condition{Key: bytes.Clone(c.Key), Kind: c.Kind, Version: c.Version}, Found: found}
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("store: condition failed: key %q must be %s (want version %d, found %d)",
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
// version of Idem wrote there. Above the store every record decode fails
// so, never as a bare decoding error, so that a caller tells damage from a
// failure of its own (errors.Is(err, ErrCorruption)) and an operator gets
// the key. Like a ValueError from the store, it is that key's damage.
func RecordError(key []byte, what string, err error) error {
	return &ValueError{Key: bytes.Clone(key), Err: fmt.Errorf("%w: %s at %q does not decode: %v", ErrCorruption, what, key, err)}
}

// InvalidRecord reports a record (what) that a writer above the store was
// about to encode although it breaks an invariant (err): the write is
// refused, as ErrInvariant, before anything is written. It is the encoding
// half of a paired assertion whose decoding half is RecordError — the
// same check at write and at read-back.
func InvalidRecord(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrInvariant, what, err)
}

// DamagedKey returns the key whose value did not read, if err says so.
func DamagedKey(err error) ([]byte, bool) {
	var ve *ValueError
	if errors.As(err, &ve) {
		return ve.Key, true
	}
	return nil, false
}

// CorruptionError says which file (or stored key) is damaged and how: the
// local engine's files, the etcd store's values. It matches ErrCorruption.
type CorruptionError struct {
	File   string
	Reason string
	Err    error
}

func (e *CorruptionError) Error() string {
	switch {
	case e.Err != nil && e.Reason == "":
		return fmt.Sprintf("store: corruption in %s: %v", e.File, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("store: corruption in %s: %s: %v", e.File, e.Reason, e.Err)
	}
	return fmt.Sprintf("store: corruption in %s: %s", e.File, e.Reason)
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

func (e *CorruptionError) Unwrap() error { return e.Err }
