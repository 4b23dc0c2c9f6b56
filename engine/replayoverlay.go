package engine

import (
	"bytes"
	"slices"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/hugepage"
	"github.com/idemdb/idem/store"
)

// The replay's overlay: what an open's replayed batches wrote, kept beside
// the chain's records in key order and folded into them before they
// become the tree.
//
// Putting each replayed record into the tree was a quarter of an open's
// CPU at 1 M receipts: the tree built from the chain has full nodes, so
// nearly every new key reallocated its leaf and split it, a node
// allocated and half a leaf copied per key (at 10 M, 1.33 s of a 6.2 s
// open). A chain the load merged (loadchain.go) is a sorted array before
// it is a tree; the replay reads that array instead and merges each
// sorted batch into the overlay in one linear pass, finding in the array,
// by a search from where the batch's last key was found, only the keys the
// overlay does not hold. At the end the fold moves the array's records
// and the overlay's into their final places, in place — the load's merge
// leaves the slots of the records the deltas overrode, and spare capacity
// sized from the log (replayRoom), room for the keys the log added — and
// the result becomes the tree at once with full nodes, as it would have
// without a replay. Without enough room the fold writes a new array
// (finish).
//
// What each op finds — whether its key existed, the record it replaces —
// is what it would have found in the tree, so the live bytes, the value
// log's live bytes and the dirty set are noted exactly as applyOp notes
// them, in the same order (the batch's key order, replaybatch.go).

// replayOverlayMin is the fewest records the overlay holds before a batch
// folds it early. Past the larger of it and a quarter of the array, a
// batch's merge would copy more than a fold costs: the overlay grows with
// a store's log, not its size, when the store runs without checkpoints and
// an open replays all of its log.
const replayOverlayMin = 1 << 18

// replayAddBytes is the fewest log bytes per key the replay adds that the
// room a merged chain keeps for them assumes (replayRoom): a growing
// store's log added one per 184 bytes at 1 M receipts. Where the log adds
// more than the room holds, the fold writes a new array, as it did before
// the room.
const replayAddBytes = 64

// replayRoom is the spare capacity a chain with tip tip is merged into:
// room for the keys the log after it may add, so that the fold moves them
// into place instead of copying the chain's records into a new array — a
// copy into fresh memory of every record, 0.09 s of an open's CPU at 1 M
// receipts. Capacity never touched costs no memory, only address space;
// the loader caps it at the chain's records.
func (rc *recoverer) replayRoom(tip store.Version) int {
	if rc.logBytesFrom == nil {
		return 0
	}
	return int(rc.logBytesFrom(uint64(tip)+1) / replayAddBytes)
}

// overlayItem is the replay's newest record of a key: its record, or
// (tomb) a delete of a key the array holds, kv then naming only the key.
type overlayItem struct {
	kv     index.KV
	at     int  // where the key is or would go in the array
	inBase bool // the array holds the key
	tomb   bool
}

// replayOverlay is an open's replay over a chain's sorted records: base,
// the array, and items, the records replayed since the last fold, sorted
// by key, one per key. spare is the array the last merge read, reused.
type replayOverlay struct {
	base  []index.KV
	items []overlayItem
	spare []overlayItem
	// logWrites is how many writes the log may hold at most, from its
	// size (replayAddBytes); it bounds the arrays made (arraySize).
	logWrites int
}

// merge applies b's sorted ops over the overlay, noting each op on db as
// applyOp would have noted it on the tree.
func (ov *replayOverlay) merge(db *DB, b *replayBatch) {
	old, out := ov.items, ov.spare[:0]
	if need := len(old) + len(b.order); cap(out) < need {
		out = hugepage.Make[overlayItem](ov.arraySize(need))
	}
	i, pos := 0, 0 // pos: where the last key looked up in base was
	for order := b.order; len(order) > 0; {
		key := b.ops[order[0].seq].op.Key
		// Compared with the records' keys as they are stored: a packed
		// key is not made raw for it.
		probe := index.Probe(key)
		n := 1 // the key's ops; the heads, side by side, rule most out
		for n < len(order) && order[n].head == order[0].head && bytes.Equal(b.ops[order[n].seq].op.Key, key) {
			n++
		}
		// The overlay's records before the key go over as one copy: found
		// by a gallop, not compared and appended one by one, which was a
		// fifth of the merge's CPU at 1 M receipts.
		j := gallopItems(old, i, probe)
		out = append(out, old[i:j]...)
		i = j
		var below overlayItem // the key as its first op finds it
		if i < len(old) && old[i].kv.CompareKey(probe) == 0 {
			below = old[i]
			i++
		} else {
			pos, below.inBase = seekFrom(ov.base, pos, probe)
			below.at = pos
			if below.inBase {
				below.kv = ov.base[pos]
			}
		}
		if it, keep := applyKeyOps(db, b, order[:n], below); keep {
			out = append(out, it)
		}
		order = order[n:]
	}
	out = append(out, old[i:]...)
	clear(old)
	ov.items, ov.spare = out, old[:0]
}

// seekFrom finds key in sorted from position from on (every key before
// from is smaller): its position, or where it would go. It gallops, so
// a batch's keys, sorted, cost about the log of their distance apart.
func seekFrom(sorted []index.KV, from int, key index.KV) (int, bool) {
	lo, step := from, 1
	hi := from
	for hi < len(sorted) && sorted[hi].CompareKey(key) < 0 {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(sorted)-1) + 1
	i, found := slices.BinarySearchFunc(sorted[lo:hi], key, func(kv, k index.KV) int {
		return kv.CompareKey(k)
	})
	return lo + i, found
}

// gallopItems is the first position from from on in items, sorted by key,
// whose key is not before key (every item before from is).
func gallopItems(items []overlayItem, from int, key index.KV) int {
	lo, step := from, 1
	hi := from
	for hi < len(items) && items[hi].kv.CompareKey(key) < 0 {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(items)-1) + 1
	i, _ := slices.BinarySearchFunc(items[lo:hi], key, func(it overlayItem, k index.KV) int {
		return it.kv.CompareKey(k)
	})
	return lo + i
}

// applyKeyOps applies one key's ops (in log order) to below, the key's
// record before them (present unless zero or a tombstone). It returns the
// overlay's record of the key after them; keep is false when none is
// needed: the key ends deleted and the array does not hold it.
func applyKeyOps(db *DB, b *replayBatch, ops []replayKey, below overlayItem) (overlayItem, bool) {
	cur := below.kv
	present := !below.tomb && cur != (index.KV{})
	for _, k := range ops {
		o := b.ops[k.seq]
		existed := present
		if existed {
			db.liveBytes -= recordBytes(cur.KeyLen(), len(cur.Value()))
			unlive(db.vlogLive, cur)
		}
		if o.op.Delete {
			present = false
			db.dirty.note(o.op.Key, existed)
			continue
		}
		cur, present = versioned(o.op, o.version), true
		db.liveBytes += recordBytes(len(o.op.Key), len(o.op.Value))
		db.dirty.noteShared(o.op.Key, existed)
	}
	it := overlayItem{kv: cur, at: below.at, inBase: below.inBase}
	if !present {
		if !below.inBase {
			return overlayItem{}, false
		}
		// The key's bytes are the array's record's: the batch's own copy
		// of a deleted key is scratch.
		it.kv, it.tomb = index.StoredProbe(below.kv.StoredKey(), below.kv.KeyPacked()), true
	}
	return it, true
}

// large reports whether the overlay should be folded before the next
// batch (replayOverlayMin).
func (ov *replayOverlay) large() bool { return len(ov.items) > ov.foldAt() }

func (ov *replayOverlay) foldAt() int { return max(replayOverlayMin, len(ov.base)/4) }

// arraySize is the capacity to make an array the merges alternate
// between with, need at least: at once the most the overlay holds —
// folded past foldAt, it never holds more than that and a batch, nor more
// than the log's writes. Made by doubling from need, each merge found the
// other array too small and made a new one: 32 MB of fresh arrays for a
// 45 MB log, more than any other part of the replay but its arena.
func (ov *replayOverlay) arraySize(need int) int {
	return max(2*need, min(ov.foldAt()+replayBatchOps, ov.logWrites))
}

// counts is how many of the overlay's records add a key to the array and
// how many delete one of its keys.
func (ov *replayOverlay) counts() (adds, dels int) {
	for _, it := range ov.items {
		switch {
		case it.tomb:
			dels++
		case !it.inBase:
			adds++
		}
	}
	return adds, dels
}

// finish makes the tree of the array and the overlay at the replay's end:
// folded, into the array's spare room or, without enough, into a new
// array (fold), and built at once with full nodes. Putting the added keys
// into a tree of full nodes instead split a leaf per key: at 1 M receipts,
// where a growing store's log adds some 100 k keys and the deltas left few
// slots, that was a tenth of an open's CPU, against a copy of 16-byte
// items (the old array is garbage once the tree is built).
func (ov *replayOverlay) finish() *index.Ordered[index.KV] {
	ov.fold()
	return index.NewSortedKeySpace(ov.base)
}

// fold moves the array's records and the overlay's, the overlay's
// winning, into one sorted array, base, and empties the overlay.
func (ov *replayOverlay) fold() {
	if len(ov.items) == 0 {
		return
	}
	adds, dels := ov.counts()
	if cap(ov.base)-len(ov.base) >= adds {
		ov.base = ov.foldInPlace(adds, dels)
	} else {
		out := make([]index.KV, 0, len(ov.base)+adds-dels) // kept as the tree's items: no slack
		hugepage.AdviseSlice(out)
		ov.base = ov.foldInto(out)
	}
	clear(ov.items)
	ov.items = ov.items[:0]
}

// foldInto appends the fold's records to out, in key order.
func (ov *replayOverlay) foldInto(out []index.KV) []index.KV {
	c := 0 // the array's next record not yet moved
	for _, it := range ov.items {
		out = append(out, ov.base[c:it.at]...)
		c = it.at
		if it.inBase {
			c++ // replaced or deleted
		}
		if !it.tomb {
			out = append(out, it.kv)
		}
	}
	return append(out, ov.base[c:]...)
}

// foldInPlace folds into the array's own spare capacity, from the back:
// the write position stays at or after the read position (each added
// record widens the gap between them by one, before the merge reaches it,
// and a delete only widens it), so nothing is overwritten unread. The
// dels slots the deletes leave end up at the front and are cut off.
func (ov *replayOverlay) foldInPlace(adds, dels int) []index.KV {
	arr := ov.base[:len(ov.base)+adds]
	w, r := len(arr), len(ov.base) // write before w; records before r unmoved
	for j := len(ov.items) - 1; j >= 0; j-- {
		it := ov.items[j]
		end := it.at
		if it.inBase {
			end++
		}
		w -= r - end
		copy(arr[w:], arr[end:r])
		r = it.at
		if !it.tomb {
			w--
			arr[w] = it.kv
		}
	}
	copy(arr[dels:], arr[:r])
	clear(arr[:dels]) // no stale pointers for the collector to keep
	return arr[dels:]
}
