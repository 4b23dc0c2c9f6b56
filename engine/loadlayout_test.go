package engine

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
)

// TestLayoutBase_TheInPlaceMergeEqualsApplyingEveryRecordInOrder: a base
// cut into parts at random keys — keys the base holds, keys only a delta
// holds, parts the deltas leave alone, parts a delta fills — decoded into
// its layout and merged in place with up to 70 deltas holds exactly what
// inserting and deleting record by record, oldest first, leaves.
func TestLayoutBase_TheInPlaceMergeEqualsApplyingEveryRecordInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 13))
	for round := range 300 {
		l := randomChain(rng, []int{0, 1, 9, 70}[round%4])
		want := holding(index.NewSortedKeySpace(cloned(l).byInserts()))
		parts, pieces := randomParts(rng, l)
		c := cloned(l)
		lay := layoutBase(parts, c.deltas, 0)
		for i, piece := range pieces {
			if n := copy(lay.part(i), piece); n != len(piece) || len(lay.part(i)) != len(piece) {
				t.Fatalf("round %d: part %d has a stretch of %d for %d records", round, i, len(lay.part(i)), len(piece))
			}
		}
		load := &chainLoad{deltas: c.deltas, layout: lay}
		tree, live, _ := load.build()
		var wantLive int64
		tree.AscendAll(func(it index.KV) bool { wantLive += recordBytes(len(it.Key()), len(it.Value())); return true })
		if got := holding(tree); !slices.Equal(got, want) || live != wantLive {
			t.Fatalf("round %d, %d parts, %d deltas: the in-place merge holds %d items (live %d), record by record %d\ngot  %v\nwant %v",
				round, len(parts), len(l.deltas), len(got), live, len(want), got, want)
		}
	}
}

// randomParts cuts l's base into up to five parts at keys drawn from every
// run, and returns their metas and records.
func randomParts(rng *rand.Rand, l *chainLoad) ([]partMeta, [][]index.KV) {
	var keys [][]byte
	for _, r := range loadRunsOf(l) {
		for _, kv := range r.kv {
			keys = append(keys, kv.Key())
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	var cuts [][]byte
	for range rng.IntN(5) {
		if len(keys) > 0 {
			cuts = append(cuts, keys[rng.IntN(len(keys))])
		}
	}
	slices.SortFunc(cuts, bytes.Compare)
	cuts = slices.CompactFunc(cuts, bytes.Equal)
	starts := append([][]byte{nil}, cuts...)
	parts := make([]partMeta, len(starts))
	pieces := make([][]index.KV, len(starts))
	for i, start := range starts {
		from, to := keyPos(l.base, start), len(l.base)
		if i+1 < len(starts) {
			to = keyPos(l.base, starts[i+1])
		}
		pieces[i] = l.base[from:to]
		parts[i] = partMeta{start: start, count: uint64(to - from)}
	}
	return parts, pieces
}
