package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/idemdb/idem/internal/hugepage"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// replayer applies the log after a checkpoint to the tree, checking what it
// reads back on the way: the entries must be contiguous, from the first
// one after the checkpoint to the last one in the log. The WAL promises
// that; a gap or a repeat would silently drop a batch or put an older
// value over a newer one, so either is reported as corruption.
type replayer struct {
	db      *DB
	next    uint64          // the index the next entry must have
	entries int64           // entries replayed
	bytes   int64           // their body bytes
	newest  uint64          // the newest checkpoint the log says was written
	merged  []store.Version // the merged bases the log says were linked

	ops   []store.Op   // scratch: the entry's ops as decoded, then as owned
	slab  []byte       // the arena puts are copied into (own)
	batch *replayBatch // ops gathered to reach the tree sorted (replaybatch.go)
	pipe  *replayPipe  // set: full batches go to the applier (replaypipe.go)
	// over, if set, holds the chain's records as a sorted array that the
	// batches are applied over, the tree being made of the result at the
	// end (replayoverlay.go); nil: they are applied to the tree.
	over *replayOverlay

	// resumeGC, if set, is called once the replay has read
	// gcPauseLogBytes (opengc.go).
	resumeGC func()
}

// The arena replayed puts are copied into comes in chunks: one allocation
// per chunk instead of one per put (replay ran at 6.5 MB/s, 27 µs a key,
// in its allocations). A record overwritten later keeps its chunk alive;
// all of them together are at most the log one open replays, about two
// checkpoint intervals, as a checkpoint's records keep their part's image.
// The chunks double from replaySlabBytes to replaySlabMaxBytes: a short
// replay holds kilobytes, a long one gets chunks large enough to be backed
// by huge pages (internal/hugepage) — the arena's first touch was a
// page fault per 4 KiB, a seventh of an open's faults at 1 M receipts.
const (
	replaySlabBytes    = 64 << 10
	replaySlabMaxBytes = 8 << 20
)

// entry is the wal.Log.Replay callback.
func (r *replayer) entry(index uint64, kind wal.Kind, body []byte) error {
	if index != r.next {
		return &store.CorruptionError{File: walDirName, Reason: fmt.Sprintf(
			"replayed entries are not contiguous: entry %d where entry %d was due", index, r.next)}
	}
	r.next++
	r.bytes += int64(len(body))
	r.entries++
	if r.resumeGC != nil && r.bytes > gcPauseLogBytes {
		r.resumeGC()
		r.resumeGC = nil
	}
	if n, k := binary.Uvarint(body); kind == wal.KindCheckpoint && k > 0 {
		r.newest = max(r.newest, n)
		if v, ok := mergeRecord(body); ok {
			r.merged = append(r.merged, store.Version(v))
		}
	}
	if kind != wal.KindBatch {
		return nil
	}
	r.ops = r.ops[:0]
	if err := decodeBody(body, func(op store.Op) { r.ops = append(r.ops, op) }); err != nil {
		return &store.CorruptionError{File: walDirName, Reason: fmt.Sprintf("entry %d", index), Err: err}
	}
	// Bodies are only valid during the callback; the tree keeps copies,
	// and the batch a copy of each deleted key.
	if r.batch == nil {
		r.batch = newReplayBatch(replayBatchOps)
	}
	if r.batch.add(store.Version(index), r.own(r.ops)) {
		return r.handOff()
	}
	return nil
}

// own makes ops' puts engine-owned in place, each key ‖ value copied into
// the arena with room for the version after it (the layout of index.KV, as
// ownOps makes it). A delete's key is needed only until its batch is
// applied: the replay's batch copies it into scratch of its own
// (replaybatch.go).
func (r *replayer) own(ops []store.Op) []store.Op {
	for i, op := range ops {
		if op.Delete {
			continue
		}
		n := len(op.Key) + len(op.Value) + binary.MaxVarintLen64
		if n > cap(r.slab)-len(r.slab) {
			r.slab = hugepage.Make[byte](max(min(2*cap(r.slab), replaySlabMaxBytes), replaySlabBytes, n))
		}
		at := len(r.slab)
		r.slab = append(append(r.slab, op.Key...), op.Value...)
		buf := r.slab[at : len(r.slab) : len(r.slab)+binary.MaxVarintLen64]
		r.slab = r.slab[:len(r.slab)+binary.MaxVarintLen64]
		k := len(op.Key)
		ops[i] = store.Op{Key: buf[:k:k], Value: buf[k:]}
	}
	return ops
}

// reachedEnd checks that the replay delivered every entry up to the log's
// end (next is the index the log assigns next).
func (r *replayer) reachedEnd(next uint64) error {
	if r.next != next {
		return &store.CorruptionError{File: walDirName, Reason: fmt.Sprintf(
			"replayed entries are not contiguous: replay ended before entry %d, but the log ends at entry %d", r.next, next-1)}
	}
	return nil
}
