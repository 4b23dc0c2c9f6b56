package engine

import (
	"runtime"
	"sync"

	"github.com/idemdb/idem/index"
)

// A chain whose deltas are small beside its base — most of them: a chain
// is rebased once its files outgrow the live data, and each delta holds
// only what changed — is built without a merge. The base, already in key
// order, becomes the tree as it is (its leaves are windows of the array
// the parts were decoded into), and the deltas' records are applied to it
// one by one, oldest first. A merge would write every record of the base
// once more into a new array: at 20 M keys, 480 MB that a fresh process
// pays for in page faults and the collector in scanning, to place a few
// thousand records.

// loadInsertRatio: the deltas' records are applied one by one when they
// number at most the base's over it (an insert costs a descent, a merged
// record a copy: about this many times less).
const loadInsertRatio = 32

// smallDeltas reports whether l's deltas are small enough to apply one by
// one to its base.
func (l *chainLoad) smallDeltas() bool {
	n := 0
	for _, d := range l.deltas {
		n += len(d.kv)
	}
	return n <= len(l.base)/loadInsertRatio
}

// buildOnBase is build for a chain with small deltas. ok is false if the
// base is out of order (no checkpoint writer makes one): the caller then
// merges, which falls back to inserts.
func (l *chainLoad) buildOnBase(ranges int) (tree *index.Ordered[index.KV], live int64, vlive map[uint32]int64, ok bool) {
	if l.baseTallies != nil {
		// Each part's order and tally on its writer's word, which its CRC
		// vouches for (partload.go); their ranges were checked at their
		// two ends, and follow one another (generation.complete).
		live, vlive = tallySums(l.baseTallies)
	} else if live, vlive, ok = baseStats(l.base, ranges); !ok {
		return nil, 0, nil, false
	}
	tree = index.NewSortedKeySpace(l.base)
	l.base = nil // the tree's now
	for _, d := range l.deltas {
		for i, kv := range d.kv {
			var old index.KV
			var existed bool
			if d.tombstone(i) {
				old, existed = tree.Delete(kv)
			} else {
				old, existed = tree.Put(kv)
				live += recordBytes(kv.KeyLen(), len(kv.Value()))
				relive(vlive, kv)
			}
			if existed {
				live -= recordBytes(old.KeyLen(), len(old.Value()))
				unlive(vlive, old)
			}
		}
	}
	return tree, live, vlive, true
}

// baseStats checks that base is in strictly increasing key order and
// sums its live bytes and the value log's live bytes by segment, in up to
// ranges pieces at once.
func baseStats(base []index.KV, ranges int) (int64, map[uint32]int64, bool) {
	ranges = max(1, min(ranges, runtime.GOMAXPROCS(0), len(base)/loadRangeMin))
	lives := make([]int64, ranges)
	vlives := make([]map[uint32]int64, ranges)
	sorted := make([]bool, ranges)
	var wg sync.WaitGroup
	for j := range ranges {
		from, to := len(base)*j/ranges, len(base)*(j+1)/ranges
		wg.Go(func() {
			vl := map[uint32]int64{}
			var lv int64
			in := true
			for i := from; i < to; i++ {
				it := base[i]
				// Each piece checks its first item against the one before.
				if i > 0 && base[i-1].CompareKey(it) >= 0 {
					in = false
					break
				}
				lv += recordBytes(it.KeyLen(), len(it.Value()))
				relive(vl, it)
			}
			lives[j], vlives[j], sorted[j] = lv, vl, in
		})
	}
	wg.Wait()
	var live int64
	vlive := map[uint32]int64{}
	for j := range ranges {
		if !sorted[j] {
			return 0, nil, false
		}
		live += lives[j]
		for seg, n := range vlives[j] {
			vlive[seg] += n
		}
	}
	return live, vlive, true
}
