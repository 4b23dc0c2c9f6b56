package wal

import (
	"errors"
	"fmt"

	"github.com/idemdb/idem/store"
)

// The log's errors. Those that mean what one of the contract's means are
// that one too (store.Kind): errors.Is(err, store.ErrClosed) holds for
// ErrClosed, store.ErrFailStopped for ErrFailStopped, store.ErrCorruption
// for ErrCorruption, CorruptionError and FrameError.
var (
	// ErrCorruption marks every corruption error; test with errors.Is.
	ErrCorruption = store.Kind("wal: corruption", store.ErrCorruption)
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = store.Kind("wal: closed", store.ErrClosed)
	// ErrFailStopped is returned by every write after a write or fsync error.
	// The log must be closed and reopened (which runs repair) before it
	// accepts writes again; we never retry an fsync.
	ErrFailStopped = store.Kind("wal: fail-stopped after an I/O error", store.ErrFailStopped)
	// ErrAmbiguous is returned to appenders whose entry was handed to the
	// file system but whose durability is unknown because the write or the
	// fsync failed: after recovery the entry may or may not be present.
	//
	// It is not store.ErrAmbiguous, though it means the same to the
	// appender: the engine keeps the error that fail-stopped it and wraps
	// it into every later refusal (store.ErrFailStopped, nothing written),
	// which must not read as an unknown outcome. The engine answers
	// store.ErrAmbiguous for it (engine/apply.go).
	ErrAmbiguous = errors.New("wal: outcome unknown")
)

// errSpareStopped: Close stopped the spare segment's preparation
// (prealloc.go); it stays inside the package.
var errSpareStopped = errors.New("wal: spare preparation stopped by Close")

// FrameError says why one frame failed to decode.
type FrameError struct {
	Index  uint64
	Reason string
}

func (e *FrameError) Error() string { return fmt.Sprintf("wal: frame %d: %s", e.Index, e.Reason) }

// Is makes every FrameError a corruption error, the log's and the
// contract's.
func (e *FrameError) Is(target error) bool {
	return target == ErrCorruption || target == store.ErrCorruption
}

// CorruptionError names the segment file, byte offset and entry index
// where the log is damaged beyond what torn-write repair may cut, and says
// what an operator can do. Nothing was changed on disk.
type CorruptionError struct {
	Segment string // file name of the segment
	Path    string // the segment's path, if known
	Index   uint64 // first entry index that failed, 0 if not known
	Offset  int64  // byte offset within the segment
	Reason  string
}

func (e *CorruptionError) Error() string {
	file := e.Path
	if file == "" {
		file = e.Segment
	}
	return fmt.Sprintf("wal: corruption in segment %s at entry %d (offset %d): %s. Nothing was changed. "+
		"Restore the data directory from a backup; or, to give up every entry from %d on (acknowledged writes "+
		"among them are lost), stop the server, cut the segment to %d bytes (truncate -s %d %s), delete any later "+
		"segment and the log's %s file, and start again",
		file, e.Index, e.Offset, e.Reason, e.Index, e.Offset, e.Offset, file, markerName)
}

// Is makes every CorruptionError match ErrCorruption and the contract's
// store.ErrCorruption.
func (e *CorruptionError) Is(target error) bool {
	return target == ErrCorruption || target == store.ErrCorruption
}
