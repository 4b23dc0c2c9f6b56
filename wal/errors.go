package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrCorruption marks every corruption error; test with errors.Is.
	ErrCorruption = errors.New("wal: corruption")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("wal: closed")
	// ErrFailStopped is returned by every write after a write or fsync error.
	// The log must be closed and reopened (which runs repair) before it
	// accepts writes again; we never retry an fsync.
	ErrFailStopped = errors.New("wal: fail-stopped after an I/O error")
	// ErrAmbiguous is returned to appenders whose entry was handed to the
	// file system but whose durability is unknown because the write or the
	// fsync failed: after recovery the entry may or may not be present.
	ErrAmbiguous = errors.New("wal: outcome unknown")
	// ErrQueueFull is returned by TryReserve when the append queue is at its
	// bound.
	ErrQueueFull = errors.New("wal: append queue full")
)

// FrameError says why one frame failed to decode.
type FrameError struct {
	Index  uint64
	Reason string
}

func (e *FrameError) Error() string { return fmt.Sprintf("wal: frame %d: %s", e.Index, e.Reason) }

// Is makes every FrameError a corruption error.
func (e *FrameError) Is(target error) bool { return target == ErrCorruption }

// CorruptionError names the segment file and entry index where the log is
// damaged beyond the torn-tail repair allows.
type CorruptionError struct {
	Segment string // file name of the segment
	Index   uint64 // first entry index that failed, 0 if not known
	Offset  int64  // byte offset within the segment
	Reason  string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in segment %s at entry %d (offset %d): %s",
		e.Segment, e.Index, e.Offset, e.Reason)
}

// Is makes every CorruptionError match ErrCorruption.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }
