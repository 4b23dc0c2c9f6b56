package engine

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/idemdb/idem/internal/hugepage"
	"github.com/idemdb/idem/store"
)

// Replayed ops reach the tree in batches sorted by key, not one entry at
// a time. A put or delete in log order lands anywhere in the tree: each
// descent is a binary search per node whose every step reads a key from a
// cold file image, and an open's replay spent most of its time there.
// Sorted, consecutive ops share their path and their neighbours, which
// are still in the cache. The order changes nothing: ops on different keys
// commute, and a key's own ops keep their log order (the sort breaks ties
// by it), so each one finds the tree — what existed before it, the bytes
// it frees, what the dirty set notes of it — as it would have in log order.

// replayBatchOps is how many ops a replay gathers before applying them:
// enough that a batch's keys cluster in the tree, few enough that the
// batch (about 100 B an op, and the deleted keys' bytes) stays small.
const replayBatchOps = 1 << 16

// replayBatchFull is how many ops fill a batch: replayBatchOps, but for
// tests of several batches (replaypipe_test.go), which set it lower rather
// than write a log of hundreds of thousands of ops. Nothing else sets it.
var replayBatchFull = replayBatchOps

// replayOp is a replayed op and the batch it belongs to.
type replayOp struct {
	op      store.Op
	version store.Version
}

// replayKey is what the batch sorts: a replayed op's place in log order
// within the batch and its key's first bytes as integers (loadchain.go's
// head), which decide most comparisons without reading the key.
type replayKey struct {
	head [headWords]uint64
	seq  int
}

// replayBatch gathers replayed ops. Puts are owned (their keys and values
// sit in the replay's arena); a delete's key is copied into dels, reused
// from batch to batch: applying a delete keeps nothing of its key.
type replayBatch struct {
	ops     []replayOp
	order   []replayKey
	scratch []replayKey // the sort's (replaysort.go)
	dels    []byte
}

// newReplayBatch is an empty batch with room for n ops, in memory placed
// for huge pages. A replay's first batch is made full-sized at once: grown
// from nothing by doubling, it was allocated about twice over and copied
// once (a sixth of an open's page faults at 1 M receipts), and the pages
// a short replay never reaches are never touched. Later batches are made
// as large as the one before became.
func newReplayBatch(n int) *replayBatch {
	keys := hugepage.Make[replayKey](2 * n)
	return &replayBatch{ops: hugepage.Make[replayOp](n), order: keys[:0:n], scratch: keys[n : n : 2*n]}
}

// add gathers the ops of batch v; it reports whether the batch is full.
func (b *replayBatch) add(v store.Version, ops []store.Op) bool {
	for _, op := range ops {
		if op.Delete {
			at := len(b.dels)
			b.dels = append(b.dels, op.Key...)
			op.Key = b.dels[at:len(b.dels):len(b.dels)]
		}
		if len(b.ops) == cap(b.ops) {
			// Doubling, as append does not for large slices: a batch
			// made empty (tests make them so) is grown from nothing. Not
			// past a full batch by more than a step: an entry's last ops
			// can overrun it, and the batches made after it are made as
			// large.
			b.ops = slices.Grow(b.ops, max(min(len(b.ops), replayBatchOps-len(b.ops)), 1<<10))
			b.order = slices.Grow(b.order, cap(b.ops)-len(b.order))
		}
		b.order = append(b.order, replayKey{head: headOf(op.Key).w, seq: len(b.ops)})
		b.ops = append(b.ops, replayOp{op: op, version: v})
	}
	return len(b.ops) >= replayBatchFull
}

// flush applies the gathered ops to db's tree in key order, then marks
// batches up to the newest gathered as applied (a replayer driven entry by
// entry, as tests drive it).
func (b *replayBatch) flush(db *DB) {
	b.sort()
	b.apply(db, nil)
}

// sort puts the gathered ops in the order they reach the tree. It needs
// nothing of the tree: the replay's reader does it (replaypipe.go).
//
// It sorts by the keys' first 24 bytes, then sorts each run of keys that
// share them by their next 24, read once per key, and only the keys that
// share those too by their whole bytes. Keys sharing a long prefix are
// common — every document of a table shares its first 24 bytes — and
// compared byte by byte at every step of one sort, the keys, scattered in
// the arena, were a third of the sort's time at 1 M receipts. A key's ops
// still sort together (equal keys have equal heads at every depth) and in
// log order.
func (b *replayBatch) sort() {
	b.scratch = slices.Grow(b.scratch[:0], len(b.order))
	sortReplayKeys(b.order, b.scratch[:len(b.order)])
	eachTiedRun(b.order, b.sortTied)
}

// eachTiedRun calls fn with each run of two or more adjacent keys of
// sorted that share their head.
func eachTiedRun(sorted []replayKey, fn func(run []replayKey)) {
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].head == sorted[i].head {
			j++
		}
		if j-i > 1 {
			fn(sorted[i:j])
		}
		i = j
	}
}

// sortTied sorts run, ops whose keys share their first 8·headWords bytes,
// by the bytes after them, and keys that share those as well by their
// whole bytes; each key's ops stay in log order. It leaves the heads of
// run its keys' next words, which equal keys still share.
func (b *replayBatch) sortTied(run []replayKey) {
	for i := range run {
		run[i].head = headOf(keyAfter(b.ops[run[i].seq].op.Key, 8*headWords)).w
	}
	slices.SortFunc(run, compareReplayKeys)
	eachTiedRun(run, func(tied []replayKey) {
		slices.SortFunc(tied, func(x, y replayKey) int {
			if c := bytes.Compare(b.ops[x.seq].op.Key, b.ops[y.seq].op.Key); c != 0 {
				return c
			}
			return cmp.Compare(x.seq, y.seq)
		})
	})
}

// keyAfter is key past its first n bytes (empty if it has no more).
func keyAfter(key []byte, n int) []byte { return key[min(n, len(key)):] }

// compareReplayKeys orders by head, then by log order.
func compareReplayKeys(x, y replayKey) int {
	for i := range x.head {
		if c := cmp.Compare(x.head[i], y.head[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(x.seq, y.seq)
}

// apply applies the sorted ops — over the chain's sorted records through
// ov (replayoverlay.go), or, ov nil, to db's tree —, marks batches up to
// the newest gathered as applied and empties b for the next.
func (b *replayBatch) apply(db *DB, ov *replayOverlay) {
	if len(b.ops) == 0 {
		return
	}
	db.checkNewer(b.ops[0].version)
	newest := b.ops[len(b.ops)-1].version
	if ov != nil {
		ov.merge(db, b)
	} else {
		for _, k := range b.order {
			o := b.ops[k.seq]
			db.applyOp(o.version, o.op, true)
		}
	}
	db.applied = newest
	clear(b.ops) // the arena's chunks are the tree's to keep, not the batch's
	b.ops, b.order, b.dels = b.ops[:0], b.order[:0], b.dels[:0]
}
