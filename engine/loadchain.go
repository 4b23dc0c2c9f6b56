package engine

import (
	"bytes"

	"github.com/idemdb/idem/index"
)

// Loading a checkpoint chain as one sorted build (recover.go).
//
// A chain is a base (its parts in key order) and deltas (each in key order,
// newest last). Instead of inserting each record into the tree — a descent
// with a binary search per record, and nodes left half full — the base's
// records and every delta's are merged in order, newest winning, and the
// tree is built from the result at once with full nodes
// (index.NewSortedKeySpace). The merge is pairwise over the deltas (adjacent
// runs, so precedence holds), then once with the base; a tombstone survives
// the deltas' merges, to delete what an older run holds, and is dropped in
// the last. Memory: the records of the chain once more, as 24-byte items,
// until the build is done.

// chainRec is one record of a delta: an item, or a tombstone for its key.
type chainRec struct {
	kv        index.KV
	tombstone bool
}

// chainLoad is a chain being loaded: the base's records, and the deltas'
// in order.
type chainLoad struct {
	base   []index.KV
	sorted bool // the base's records strictly increase (always, from our writer)
	deltas [][]chainRec
}

// build returns the tree the chain holds, its live-bytes estimate and the
// value log's live bytes by segment.
func (l *chainLoad) build() (*index.Ordered[index.KV], int64, map[uint32]int64) {
	var items []index.KV
	if l.sorted {
		items = mergeBase(l.base, mergeDeltas(l.deltas))
	} else {
		items = l.byInserts()
	}
	var live int64
	vlive := map[uint32]int64{}
	for _, it := range items {
		live += recordBytes(len(it.Key()), len(it.Value()))
		relive(vlive, it)
	}
	return index.NewSortedKeySpace(items), live, vlive
}

// byInserts applies the chain record by record, as an open did before the
// sorted build, for a base whose records are out of order (overlapping
// parts, which no checkpoint writes): a later record wins. It returns the
// result in key order.
func (l *chainLoad) byInserts() []index.KV {
	tree := index.NewKeySpace()
	for _, it := range l.base {
		tree.Put(it)
	}
	for _, d := range l.deltas {
		for _, r := range d {
			if r.tombstone {
				tree.Delete(r.kv)
			} else {
				tree.Put(r.kv)
			}
		}
	}
	out := make([]index.KV, 0, tree.Len())
	tree.AscendAll(func(it index.KV) bool { out = append(out, it); return true })
	return out
}

// mergeDeltas merges the deltas' runs, oldest first, into one run in key
// order: the newest record of each key, tombstones included.
func mergeDeltas(runs [][]chainRec) []chainRec {
	if len(runs) == 0 {
		return nil
	}
	for len(runs) > 1 {
		next := make([][]chainRec, 0, (len(runs)+1)/2)
		for i := 0; i+1 < len(runs); i += 2 {
			next = append(next, mergeTwo(runs[i], runs[i+1]))
		}
		if len(runs)%2 == 1 {
			next = append(next, runs[len(runs)-1])
		}
		runs = next
	}
	return runs[0]
}

// mergeTwo merges two runs in key order, newer's record winning a key
// both hold.
func mergeTwo(older, newer []chainRec) []chainRec {
	out := make([]chainRec, 0, len(older)+len(newer))
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch c := bytes.Compare(older[i].kv.Key(), newer[j].kv.Key()); {
		case c < 0:
			out = append(out, older[i])
			i++
		case c > 0:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}

// mergeBase merges the base's items with the deltas' run: a delta's record
// replaces the base's, a tombstone removes it.
func mergeBase(base []index.KV, deltas []chainRec) []index.KV {
	if len(deltas) == 0 {
		return base
	}
	out := make([]index.KV, 0, len(base)+len(deltas))
	i, j := 0, 0
	for i < len(base) || j < len(deltas) {
		c := 0
		switch {
		case j == len(deltas):
			c = -1
		case i == len(base):
			c = 1
		default:
			c = bytes.Compare(base[i].Key(), deltas[j].kv.Key())
		}
		if c < 0 {
			out = append(out, base[i])
			i++
			continue
		}
		if !deltas[j].tombstone {
			out = append(out, deltas[j].kv)
		}
		if c == 0 {
			i++
		}
		j++
	}
	return out
}
