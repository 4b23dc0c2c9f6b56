package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
)

// chainKV is a record of k at ver, its value in the value log one time in
// three.
func chainKV(k string, ver uint64) index.KV {
	if ver%3 == 0 { // in the value log: its segment's live bytes are tallied
		return vlogPtr{seg: uint32(ver % 5), off: uint32(ver), n: uint32(1 + ver%97)}.item([]byte(k), ver)
	}
	v := fmt.Sprintf("=v%d", ver)
	return index.PackedKV(index.AppendKV(nil, []byte(k), []byte(v), ver), len(k), len(v))
}

// keyPrefixes make keys that differ in the first, second and third word
// of the merge's heads (head), beyond them, and around zero bytes.
var keyPrefixes = []string{"k", "rcpt/v1/", "exp/v1/0000000000000000176", "exp/v1/00000000000000001764000/", "x\x00", "\x00\x00"}

// randomChain is a base and up to maxDeltas deltas of puts and tombstones
// over keys <prefix>0000…, some of them keys the base lacks, and the same
// keys with a zero byte or a one appended.
//
// One round in four makes its deltas few and small beside the base, so
// that the build applies them to the base instead of merging.
func randomChain(rng *rand.Rand, maxDeltas int) *chainLoad {
	small := rng.IntN(4) == 0
	prefix := keyPrefixes[rng.IntN(len(keyPrefixes))]
	key := func(i int) string {
		k := fmt.Sprintf("%s%04d", prefix, i/3)
		return k + []string{"", "\x00", "\x01"}[i%3]
	}
	keys := 1 + rng.IntN(300)
	var base []index.KV
	ver := uint64(1)
	for i := range keys {
		if rng.IntN(3) > 0 {
			base = append(base, chainKV(key(i), ver))
			ver++
		}
	}
	l := &chainLoad{base: base}
	for range rng.IntN(maxDeltas + 1) {
		var run loadRun
		for i := range keys + 20 {
			if small && rng.IntN(200) > 0 {
				continue
			}
			switch rng.IntN(6) {
			case 0:
				run.add(index.Probe([]byte(key(i))), true)
			case 1:
				run.add(chainKV(key(i), ver), false)
				ver++
			}
		}
		l.deltas = append(l.deltas, run)
	}
	return l
}

func holding(tree *index.Ordered[index.KV]) []string {
	var out []string
	tree.AscendAll(func(it index.KV) bool {
		out = append(out, fmt.Sprintf("%s@%d", it.Value(), it.Version()))
		return true
	})
	return out
}

// TestChainLoad_TheSortedMergeEqualsApplyingEveryRecordInOrder: for random
// chains — a base and up to 70 deltas (more than CheckpointDeltasMax) of
// puts and tombstones — the merged build, in any number of ranges at once,
// holds exactly what inserting and deleting record by record, oldest first,
// leaves: the same keys, each with the newest record's value and version.
// So does the build that applies small deltas to the base.
func TestChainLoad_TheSortedMergeEqualsApplyingEveryRecordInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 7))
	onBase := 0
	defer func() {
		if onBase < 10 {
			t.Errorf("only %d chains had deltas small enough to apply to the base", onBase)
		}
	}()
	for round := range 300 {
		l := randomChain(rng, []int{0, 1, 9, 70}[round%4])
		if l.smallDeltas() && len(l.deltas) > 0 {
			onBase++
		}
		want := cloned(l).byInserts()
		var wantLive int64
		for _, it := range want {
			wantLive += recordBytes(len(it.Key()), len(it.Value()))
		}
		w := holding(index.NewSortedKeySpace(want))
		for _, ranges := range []int{1, 2, 3, 8} {
			if _, _, _, ok := mergeRanges(loadRunsOf(cloned(l)), ranges, 0); !ok {
				t.Fatalf("round %d, %d ranges: a chain in order refused as out of order", round, ranges)
			}
			got, gotLive, _ := cloned(l).buildIn(ranges)
			if g := holding(got); !slices.Equal(g, w) || gotLive != wantLive {
				t.Fatalf("round %d, %d ranges, %d deltas: the merged build holds %d items (live %d), record by record %d (live %d)\nmerged %v\nwant   %v",
					round, ranges, len(l.deltas), len(g), gotLive, len(w), wantLive, g, w)
			}
		}
	}
}

// TestChainLoad_ARunOutOfOrderFallsBackToInserts: a run whose keys do not
// increase is no input for a sorted build. A descent is always noticed, in
// any range, and the build applies the records one by one instead, a later
// record winning. A key twice in one run is noticed too, unless a newer
// run's record of the key decides it anyway: either way the build holds
// what applying every record in order leaves.
func TestChainLoad_ARunOutOfOrderFallsBackToInserts(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 11))
	for round := range 200 {
		l := randomChain(rng, 4)
		// Swap two records of one run, or repeat one.
		runs := append([]*[]index.KV{&l.base}, nil)
		for i := range l.deltas {
			runs = append(runs, &l.deltas[i].kv)
		}
		runs = slices.DeleteFunc(runs, func(r *[]index.KV) bool { return r == nil || len(*r) < 2 })
		if len(runs) == 0 {
			continue
		}
		r := *runs[rng.IntN(len(runs))]
		i := rng.IntN(len(r) - 1)
		j := i + 1 + rng.IntN(len(r)-i-1)
		descent := rng.IntN(2) == 0
		if descent {
			r[i], r[j] = r[j], r[i]
		} else {
			r[j] = chainKV(string(r[i].Key()), r[j].Version())
		}
		w := holding(index.NewSortedKeySpace(cloned(l).byInserts()))
		for _, ranges := range []int{1, 2, 5} {
			run := loadRunsOf(cloned(l))
			if _, _, _, ok := mergeRanges(run, ranges, 0); ok && descent {
				t.Fatalf("round %d, %d ranges: a run out of order was merged as if sorted", round, ranges)
			}
			got, _, _ := cloned(l).buildIn(ranges)
			if g := holding(got); !slices.Equal(g, w) {
				t.Fatalf("round %d, %d ranges: the fallback holds %v, record by record %v", round, ranges, g, w)
			}
		}
	}
}

// cloned is a copy of l for one build, which takes its slices.
func cloned(l *chainLoad) *chainLoad {
	c := &chainLoad{base: slices.Clone(l.base)}
	for _, d := range l.deltas {
		c.deltas = append(c.deltas, loadRun{kv: slices.Clone(d.kv), tombs: d.tombs})
	}
	return c
}

func loadRunsOf(l *chainLoad) []loadRun {
	return append([]loadRun{{kv: l.base}}, l.deltas...)
}

// TestItemStats_StretchesSumAsOnePass: the live bytes and the value log's
// live bytes by segment that itemStats sums a stretch to a processor are
// those of one pass over the items, records in the value log and not.
func TestItemStats_StretchesSumAsOnePass(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	rng := rand.New(rand.NewPCG(seedFor(t), 5))
	items := make([]index.KV, 5*itemStatsMin+17)
	for i := range items {
		key := []byte(fmt.Sprintf("k%07d", i))
		if rng.IntN(2) == 0 {
			ptr := vlogPtr{seg: uint32(rng.IntN(7)), off: uint32(i), n: uint32(1 + rng.IntN(500))}.encode(nil)
			items[i] = index.IndirectKV(index.AppendKV(nil, key, ptr, 1), len(key), len(ptr))
		} else {
			v := make([]byte, rng.IntN(40))
			items[i] = index.PackedKV(index.AppendKV(nil, key, v, 1), len(key), len(v))
		}
	}
	live, vlive := itemStats(items)
	wantLive, wantVlive := itemStatsOf(items)
	if live != wantLive || !maps.Equal(vlive, wantVlive) || len(vlive) == 0 {
		t.Fatalf("in stretches: live %d, value log %v; in one pass: %d, %v", live, vlive, wantLive, wantVlive)
	}
}
