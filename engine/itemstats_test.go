package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/idemdb/idem/index"
)

// TestItemStatsOf_SumsAsReliveDoesRecordByRecord: the pass's sums by
// segment in a slice (and, past itemStatsSegsMax, in the map) are what
// noting each record with relive gives, segment 0 and segments no record
// points into included.
//
// Under -race (make test's go-race) 15 rounds, not 50: each still draws
// every segment of segs many times over, and the seed changes from run to
// run (the 50 took 5 s there).
func TestItemStatsOf_SumsAsReliveDoesRecordByRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 7))
	segs := []uint32{0, 1, 2, 9, itemStatsSegsMax - 1, itemStatsSegsMax, 1 << 30}
	rounds := 50
	if raceEnabled {
		rounds = 15
	}
	for round := range rounds {
		items := make([]index.KV, rng.IntN(400))
		wantVlive := map[uint32]int64{}
		var wantLive int64
		for i := range items {
			key := []byte(fmt.Sprintf("k%07d", i))
			if rng.IntN(2) == 0 {
				ptr := vlogPtr{seg: segs[rng.IntN(len(segs))], off: uint32(i), n: uint32(1 + rng.IntN(500))}.encode(nil)
				items[i] = index.IndirectKV(index.AppendKV(nil, key, ptr, 1), len(key), len(ptr))
			} else {
				v := make([]byte, rng.IntN(40))
				items[i] = index.PackedKV(index.AppendKV(nil, key, v, 1), len(key), len(v))
			}
			wantLive += recordBytes(items[i].KeyLen(), len(items[i].Value()))
			relive(wantVlive, items[i])
		}
		live, vlive := itemStatsOf(items)
		if live != wantLive || !maps.Equal(vlive, wantVlive) {
			t.Fatalf("round %d: live %d, value log %v; record by record %d, %v", round, live, vlive, wantLive, wantVlive)
		}
	}
}
