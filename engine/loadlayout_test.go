package engine

import (
	"bytes"
	"maps"
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
			if dst, _ := lay.part(i); len(dst) != len(piece) {
				t.Fatalf("round %d: part %d has a stretch of %d for %d records", round, i, len(dst), len(piece))
			}
		}
		decodeInto(lay, pieces)
		load := &chainLoad{deltas: c.deltas, layout: lay}
		tree, live, vlive := load.build()
		var items []index.KV
		tree.AscendAll(func(it index.KV) bool { items = append(items, it); return true })
		// The base was tallied as it was decoded and its blocks copied
		// unread: what the merge sums is still a pass over its result.
		wantLive, wantVlive := itemStatsOf(items)
		if got := holding(tree); !slices.Equal(got, want) || live != wantLive || !maps.Equal(vlive, wantVlive) {
			t.Fatalf("round %d, %d parts, %d deltas: the in-place merge holds %d items (live %d, value log %v), record by record %d (live %d, value log %v)\ngot  %v\nwant %v",
				round, len(parts), len(l.deltas), len(got), live, vlive, len(want), wantLive, wantVlive, got, want)
		}
	}
}

// decodeInto fills lay's parts with pieces as an open's decoders do: each
// record written and tallied.
func decodeInto(lay *baseLayout, pieces [][]index.KV) {
	for i, piece := range pieces {
		dst, tally := lay.part(i)
		for j, kv := range piece {
			dst[j] = kv
			tally.add(kv)
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
