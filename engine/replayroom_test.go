package engine

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// The room a merged chain keeps for the keys the replay adds
// (replayoverlay.go, replayRoom): both merges leave it after the records,
// the records unchanged, and the fold then moves the replay's keys into the
// chain's own array.

func TestChainMerges_LeaveTheReplaysRoomAfterTheSameRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 31))
	for round := range 60 {
		l := randomChain(rng, []int{1, 9}[round%2])
		want, live, vlive, ok := mergeRanges(loadRunsOf(cloned(l)), 2, 0)
		if !ok {
			t.Fatalf("round %d: a chain in order refused", round)
		}
		// The merge's tally is what a pass over its result sums.
		wantLive, wantVlive := itemStatsOf(want)
		if live != wantLive || !maps.Equal(vlive, wantVlive) {
			t.Fatalf("round %d: merged live %d %v, its items sum to %d %v", round, live, vlive, wantLive, wantVlive)
		}
		room := rng.IntN(50)
		got, _, _, _ := mergeRanges(loadRunsOf(cloned(l)), 2, room)
		if !slices.Equal(holdingItems(got), holdingItems(want)) || cap(got)-len(got) < room {
			t.Fatalf("round %d: merged with room %d: %d records, %d spare; without: %d records", round, room, len(got), cap(got)-len(got), len(want))
		}
		parts, pieces := randomParts(rng, l)
		c := cloned(l)
		lay := layoutBase(parts, c.deltas, room)
		decodeInto(lay, pieces)
		laid, laidLive, laidVlive := lay.merge(c.deltas)
		if laidLive != wantLive || !maps.Equal(laidVlive, wantVlive) {
			t.Fatalf("round %d: laid out live %d %v, the items sum to %d %v", round, laidLive, laidVlive, wantLive, wantVlive)
		}
		if !slices.Equal(holdingItems(laid), holdingItems(want)) || cap(laid)-len(laid) < room {
			t.Fatalf("round %d: laid out with room %d: %d records, %d spare; merged: %d records", round, room, len(laid), cap(laid)-len(laid), len(want))
		}
	}
}

// holdingItems is items as holding reports a tree's.
func holdingItems(items []index.KV) []string {
	return holding(index.NewSortedKeySpace(slices.Clone(items)))
}

func TestReplayOverlay_FoldsTheAddedKeysIntoTheChainsRoom(t *testing.T) {
	const room = 10
	base := make([]index.KV, 0, 20+room)
	for i := 0; i < 40; i += 2 {
		base = append(base, imageItem([]byte(shortKey(i)), []byte("base")))
	}
	db := bareDB()
	db.liveBytes, _ = itemStats(base)
	ov := &replayOverlay{base: base}
	var b replayBatch
	for i := 1; i < 2*room; i += 2 { // room keys the chain does not hold
		b.add(store.Version(i), asReplayed([]store.Op{{Key: []byte(shortKey(i)), Value: []byte("log")}}))
	}
	b.sort()
	b.apply(db, ov)
	ov.fold()
	if len(ov.base) != 20+room || unsafe.SliceData(ov.base) != unsafe.SliceData(base) {
		t.Fatalf("fold into room for %d keys: %d records, in the chain's array: %v", room, len(ov.base), unsafe.SliceData(ov.base) == unsafe.SliceData(base))
	}
}

func TestReplayRoom_IsTheLogAfterTheTipAtReplayAddBytesAKey(t *testing.T) {
	var asked uint64
	rc := &recoverer{logBytesFrom: func(i uint64) int64 { asked = i; return 100 * replayAddBytes }}
	if got := rc.replayRoom(store.Version(41)); got != 100 || asked != 42 {
		t.Fatalf("room after tip 41 of a log of 100 keys' bytes: %d (asked from %d), want 100 (from 42)", got, asked)
	}
	if got := (&recoverer{}).replayRoom(7); got != 0 {
		t.Fatalf("room without a log: %d, want 0", got)
	}
}

func TestDirtySet_ReserveStaysWithinTheBound(t *testing.T) {
	d := &dirtySet{max: 100 * dirtyHeaderBytes}
	d.reserve(1 << 20)
	if c := cap(d.keys); c < 100 || c > 2*100 {
		t.Fatalf("reserve past the bound of 100 writes: capacity %d", c)
	}
	d.note([]byte("k"), false)
	if len(d.keys) != 1 || d.lost {
		t.Fatalf("a write after reserve: %d noted, lost %v", len(d.keys), d.lost)
	}
	lost := &dirtySet{max: 1, lost: true}
	if lost.reserve(10); lost.keys != nil {
		t.Fatal("reserve on a lost set made a list")
	}
}
