package engine

import (
	"errors"

	"github.com/idemdb/idem/wal"
)

// An open's replay on two goroutines. Reading the log — each segment read,
// its entries' checksums checked, their ops decoded, every put copied into
// the arena, each batch sorted (replaybatch.go) — needs nothing of the
// tree; only applying a sorted batch does. So a reader goroutine does the
// first while the recovery's own goroutine applies the batch before, and
// the two halves of the replay's CPU overlap on a machine with a core to
// spare (docs/engine.md, "Restart of a growing store").
//
// Nothing changes in what reaches the tree: batches are applied one at a
// time, in the order they were read. An error the reader meets — a
// corrupt entry, a gap, a failed read — is returned once the batches read
// before it are applied, as a replay on one goroutine returns it, and
// nothing after it is applied. A broken invariant panics on the recovery's
// goroutine, as before; the reader then stops at its next batch.

// replayPipe carries gathered batches from the replay's reader to its
// applier, and the applied ones back to be gathered into again.
type replayPipe struct {
	full chan *replayBatch // gathered and sorted, in log order
	free chan *replayBatch // applied and emptied
	stop chan struct{}     // closed when the applier stops early
}

// replayPipeDepth is how many sorted batches may wait for the applier:
// one lets the reader gather the next while a batch is applied. At most
// depth + 2 batches exist (gathering, waiting, applying), about 10 MB.
const replayPipeDepth = 1

// errReplayStopped ends the reader when the applier stopped early (it
// panicked): nobody is left to read the error.
var errReplayStopped = errors.New("engine: replay stopped")

// replay replays log from r.next on, reading on a goroutine of its own and
// applying here, and checks that it reached the log's end.
func (r *replayer) replay(log *wal.Log) error {
	p := &replayPipe{
		full: make(chan *replayBatch, replayPipeDepth),
		free: make(chan *replayBatch, replayPipeDepth+2),
		stop: make(chan struct{}),
	}
	r.pipe = p
	defer close(p.stop)
	// The dirty set notes every write replayed: its list is made at once
	// as large as the log allows at replayAddBytes a write (at 1 M
	// receipts a write per 184 bytes).
	writes := int(log.BytesFrom(r.next) / replayAddBytes)
	r.db.dirty.reserve(writes)
	if r.over != nil {
		r.over.logWrites = writes
	}
	var readErr error
	go func() {
		defer close(p.full)
		readErr = log.Replay(r.next, r.entry)
		if readErr == nil {
			readErr = r.handOff() // the last batch, not full
		}
	}()
	for b := range p.full {
		b.apply(r.db, r.over)
		p.free <- b
		if r.over != nil && r.over.large() {
			r.over.fold()
		}
	}
	if r.over != nil {
		// What was applied becomes the tree even when the reader failed:
		// the tree is then as a replay on one goroutine leaves it.
		r.db.tree = r.over.finish()
		r.over = nil
	}
	// The reader's fields (next, bytes, entries, newest, merged) are
	// final: it closed full after its last write.
	if readErr != nil {
		return readErr
	}
	return r.reachedEnd(log.NextIndex())
}

// handOff passes the gathered batch on, sorted, and starts another: to the
// applier's goroutine when there is one, else applied here (a replayer
// driven entry by entry, as tests drive it).
func (r *replayer) handOff() error {
	b := r.batch
	if b == nil || len(b.ops) == 0 {
		return nil
	}
	if r.pipe == nil {
		b.flush(r.db)
		return nil
	}
	b.sort()
	size := cap(b.ops) // b is the applier's once sent
	select {
	case <-r.pipe.stop: // first: once stopped, send nothing more
		return errReplayStopped
	default:
	}
	select {
	case r.pipe.full <- b:
	case <-r.pipe.stop:
		return errReplayStopped
	}
	select {
	case r.batch = <-r.pipe.free:
	default:
		r.batch = newReplayBatch(size)
	}
	return nil
}
