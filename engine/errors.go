package engine

import (
	"errors"
)

// ErrLocked is returned by Open when another process holds the data dir.
// The contract's errors are package store's (store/errors.go).
var ErrLocked = errors.New("engine: data dir locked by another process")

// ErrBackupDest marks a backup destination that already holds files: a
// backup never writes over anything.
var ErrBackupDest = errors.New("engine: backup destination is not empty")

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
