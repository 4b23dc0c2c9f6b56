package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
)

// TestChainLoad_TheSortedMergeEqualsApplyingEveryRecordInOrder: for random
// chains — a base and up to nine deltas of puts and tombstones, some over
// keys the base lacks — the merged build holds exactly what inserting and
// deleting record by record, oldest first, leaves: the same keys, each with
// the newest record's value and version.
func TestChainLoad_TheSortedMergeEqualsApplyingEveryRecordInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 7))
	kv := func(k string, ver uint64) index.KV {
		buf := []byte(k + fmt.Sprintf("=v%d", ver))
		return index.PackedKV(buf, len(k), ver)
	}
	for round := range 200 {
		keys := 1 + rng.IntN(300)
		var base []index.KV
		ver := uint64(1)
		for i := range keys {
			if rng.IntN(3) > 0 {
				base = append(base, kv(fmt.Sprintf("k%04d", i), ver))
				ver++
			}
		}
		var deltas [][]chainRec
		for range rng.IntN(10) {
			var run []chainRec
			for i := range keys + 20 {
				switch rng.IntN(6) {
				case 0:
					run = append(run, chainRec{kv: index.Probe([]byte(fmt.Sprintf("k%04d", i))), tombstone: true})
				case 1:
					run = append(run, chainRec{kv: kv(fmt.Sprintf("k%04d", i), ver)})
					ver++
				}
			}
			deltas = append(deltas, run)
		}
		sorted := &chainLoad{base: base, sorted: true, deltas: deltas}
		inserts := &chainLoad{base: base, sorted: false, deltas: deltas}
		got, gotLive, _ := sorted.build()
		want, wantLive, _ := inserts.build()
		var g, w []string
		got.AscendAll(func(it index.KV) bool { g = append(g, fmt.Sprintf("%s@%d", it.Value(), it.Version)); return true })
		want.AscendAll(func(it index.KV) bool { w = append(w, fmt.Sprintf("%s@%d", it.Value(), it.Version)); return true })
		if !slices.Equal(g, w) || gotLive != wantLive {
			t.Fatalf("round %d: the merged build holds %d items (live %d), record by record %d (live %d)\nmerged %v\nwant   %v",
				round, len(g), gotLive, len(w), wantLive, g, w)
		}
	}
}
