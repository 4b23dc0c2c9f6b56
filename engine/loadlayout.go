package engine

import (
	"slices"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/hugepage"
)

// A chain whose deltas are large beside its base is merged (loadchain.go).
// Its base is then not decoded into an array of its own and merged into a
// second one: each part is decoded straight into the merge's output, after
// a gap as wide as the deltas' records in the part's key range, and merged
// there in place. The output grows into the gap and never overtakes the
// part's records not yet read: ahead of the write there is always at least
// as much gap left as the deltas still have records to give. The parts'
// stretches are disjoint, so they merge at once, a part to a processor.
// At 1 M receipts that spared an open 42 MB of allocation (24 bytes a base
// record then; 16 since) and a copy of every base record; the merge's share of the
// open's CPU profile fell from 0.39 s to 0.12 s (docs/engine.md, "Bounded
// recovery").

// baseSlot is where one part of a laid-out base goes.
type baseSlot struct {
	gap      int   // the deltas' records in the part's key range
	at, n    int   // the part's n records start at at; its output at at-gap
	from, to []int // each delta's records in the part's key range
}

// baseLayout is a base decoded part by part into the array the chain's
// merge writes.
type baseLayout struct {
	arr   []index.KV
	slots []baseSlot
	// tallies[i] sums part i's records, from its tally block
	// (tallyblock.go), or for a part without one as they are decoded,
	// while each is in the cache: the merge then copies the base's records
	// in blocks without reading them (mergeRange).
	tallies []itemTally
}

// layoutBase plans parts (a complete generation, in key order, with exact
// counts) in one array with room for the deltas' records, and allocates it
// with room spare capacity beyond them (replayRoom).
func layoutBase(parts []partMeta, deltas []loadRun, room int) *baseLayout {
	l := &baseLayout{slots: make([]baseSlot, len(parts)), tallies: make([]itemTally, len(parts))}
	at := 0
	for i, p := range parts {
		s := &l.slots[i]
		s.from, s.to = make([]int, len(deltas)), make([]int, len(deltas))
		for r, d := range deltas {
			s.from[r], s.to[r] = keyPos(d.kv, p.start), len(d.kv)
			if i+1 < len(parts) {
				s.to[r] = keyPos(d.kv, parts[i+1].start)
			}
			s.gap += s.to[r] - s.from[r]
		}
		s.at, s.n = at+s.gap, int(p.count)
		at = s.at + s.n
	}
	l.arr = make([]index.KV, at, at+room) // kept as the tree's items: no slack
	hugepage.AdviseSlice(l.arr)
	return l
}

// keyPos is the index of the first record of kv at or after key.
func keyPos(kv []index.KV, key []byte) int {
	i, _ := slices.BinarySearchFunc(kv, index.Probe(key), index.KV.CompareKey)
	return i
}

// part is the stretch part i's records are decoded into, in key order, and
// the tally each of them must be added to.
func (l *baseLayout) part(i int) ([]index.KV, *itemTally) {
	s := l.slots[i]
	return l.arr[s.at : s.at+s.n], &l.tallies[i]
}

// merge merges each part with the deltas (oldest first) in place, the
// parts at once, and returns the result in key order, in the layout's
// array, with its live bytes and the value log's by segment. Every run is
// in order — each delta's decoder proved it, each part's writer did and
// its CRC vouches for it (partload.go) — and every part was checked
// within its range, so a merge finding a record out of order is a bug;
// the parts were tallied as they were loaded (part).
func (l *baseLayout) merge(deltas []loadRun) ([]index.KV, int64, map[uint32]int64) {
	runs := make([]loadRun, 0, 1+len(deltas))
	runs = append(append(runs, loadRun{kv: l.arr}), deltas...)
	n := make([]int, len(l.slots))
	tallies := l.tallies
	_, _ = eachAtOnce(len(l.slots), func(i int) error {
		s := l.slots[i]
		from := append([]int{s.at}, s.from...)
		to := append([]int{s.at + s.n}, s.to...)
		w, ok := mergeRange(runs, from, to, l.arr[s.at-s.gap:s.at+s.n], &tallies[i], true)
		if !ok {
			panic("engine: invariant broken: a checkpoint's records, each file written in order, merged out of order")
		}
		n[i] = w
		return nil
	})
	w := 0
	for i, s := range l.slots {
		if w == s.at-s.gap { // in place already
			w += n[i]
			continue
		}
		w += copy(l.arr[w:], l.arr[s.at-s.gap:s.at-s.gap+n[i]])
	}
	clear(l.arr[w:]) // no stale pointers for the collector to keep
	live, vlive := tallySums(tallies)
	return l.arr[:w], live, vlive
}
