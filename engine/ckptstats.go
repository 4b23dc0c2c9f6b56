package engine

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// CheckpointStats count this DB's checkpoints since Open.
type CheckpointStats struct {
	// Completed counts the Checkpoint calls that wrote a checkpoint and
	// returned nil; Failed those that returned an error (the checkpointer
	// retries them), including one whose checkpoint was recorded but whose
	// log truncation or removal of old files failed. A call counts once.
	Completed uint64
	Failed    uint64
	// Deltas counts the completed checkpoints that were deltas
	// (ckptchain.go); the others rewrote the whole store.
	Deltas uint64
	// Merges counts the chains merged into a new base from their own files
	// in the background (merge.go); not counted in Completed.
	Merges uint64
	// BytesWritten are the bytes of the checkpoint parts made durable,
	// those of checkpoints that later failed or were resumed included.
	BytesWritten uint64
	// Bytes is the size of the newest complete checkpoint, written or
	// loaded at open (0: none): its base and every delta on it.
	Bytes int64
	// Duration: nanoseconds per completed Checkpoint call, from taking the
	// checkpoint lock to the old files' removal.
	Duration wal.HistogramSnapshot
}

// ckptDurationBounds are the buckets of CheckpointStats.Duration: from 5ms,
// a store of a few thousand keys, to 10 minutes, a store of tens of
// gigabytes on a slow disk (anything slower is +Inf).
var ckptDurationBounds = wal.DurationBounds(
	5*time.Millisecond, 10*time.Millisecond, 25*time.Millisecond, 50*time.Millisecond,
	100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond,
	time.Second, 2500*time.Millisecond, 5*time.Second, 10*time.Second, 30*time.Second,
	time.Minute, 2*time.Minute, 5*time.Minute, 10*time.Minute,
)

// ckptStats are the counters behind CheckpointStats.
type ckptStats struct {
	completed, failed, bytes, deltas, merges atomic.Uint64
	duration                                 *wal.Histogram
}

func newCkptStats() *ckptStats { return &ckptStats{duration: wal.NewHistogram(ckptDurationBounds)} }

// observeCheckpoint records one Checkpoint call that began at start, when
// the newest checkpoint was prev; errp points to its result. It is deferred
// by Checkpoint, under ckptMu.
func (db *DB) observeCheckpoint(start time.Time, prev uint64, errp *error) {
	switch err := *errp; {
	case errors.Is(err, errCheckpointStopped), errors.Is(err, store.ErrClosed):
		// Interrupted by Close, as the checkpointer sees it: not a failure,
		// and the next open resumes it.
	case err != nil:
		db.ckpt.failed.Add(1)
	case db.lastCkptIndex.Load() != prev:
		db.ckpt.completed.Add(1)
		db.ckpt.duration.ObserveDuration(time.Since(start))
	}
	// Otherwise nothing was new since the last checkpoint: no checkpoint.
}

func (db *DB) checkpointStats() CheckpointStats {
	return CheckpointStats{Completed: db.ckpt.completed.Load(), Failed: db.ckpt.failed.Load(), Deltas: db.ckpt.deltas.Load(), Merges: db.ckpt.merges.Load(),
		BytesWritten: db.ckpt.bytes.Load(), Bytes: db.ckptSize.Load(), Duration: db.ckpt.duration.Snapshot()}
}
