package engine

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// TestReplayOverlay_LeavesWhatTreePutsLeave: over a chain's sorted records
// (every other key of forty), random batches of puts and deletes — keys
// the records hold and keys they do not, written several times in one
// batch and across batches, deleted and put back — applied through the
// overlay and folded at random points, into the array's spare room or a
// new array, and finished with the room for the added keys or without it
// (a new array), leave the tree, the live bytes, the applied version and the
// dirty set's first write of each key exactly as putting each op into a
// tree of the same records in log order does (applied: up to the last
// batch with ops, as the replay's end sets the rest).
func TestReplayOverlay_LeavesWhatTreePutsLeave(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 23))
	for round := range 200 {
		spare := []int{0, 3, 100}[round%3]
		base := make([]index.KV, 0, 20+spare)
		keyOf := overlayKeyForms[round%2]
		for i := 0; i < 40; i += 2 {
			base = append(base, imageItem([]byte(keyOf(i)), []byte("base")))
		}
		inOrder, overlaid := bareDB(), bareDB()
		inOrder.tree = index.NewSortedKeySpace(slices.Clone(base))
		inOrder.liveBytes, _ = itemStats(base)
		overlaid.liveBytes = inOrder.liveBytes
		// The log's writes as the replay sizes the overlay's arrays from
		// them: none known, fewer than the ops, far more.
		ov := &replayOverlay{base: base, logWrites: []int{0, 50, 1 << 20}[round%3]}
		var b replayBatch
		var lastWithOps store.Version
		for v := store.Version(1); v <= 150; v++ {
			ops := randomOps(rng, v, 40, keyOf)
			inOrder.applyToTree(v, ownOps(ops))
			if len(ops) > 0 {
				lastWithOps = v
			}
			owned := asReplayed(ops)
			if b.add(v, owned) || rng.IntN(20) == 0 {
				b.sort()
				b.apply(overlaid, ov)
			}
			forgetBodies(ops)
			if rng.IntN(40) == 0 {
				ov.fold()
			}
		}
		b.sort()
		b.apply(overlaid, ov)
		overlaid.tree = ov.finish()
		sameReplay(t, round, inOrder, overlaid, lastWithOps)
	}
}

// TestReplayOverlay_MergesAlternateBetweenTwoArrays: with the log's size
// known, the overlay's first two merges make its two arrays, as large as
// it grows before a fold, and every later merge writes into the other one
// of them instead of a new array of fresh memory.
func TestReplayOverlay_MergesAlternateBetweenTwoArrays(t *testing.T) {
	db := bareDB()
	ov := &replayOverlay{logWrites: 1 << 20}
	made := map[*overlayItem]bool{}
	for batch := range 12 {
		var b replayBatch
		for i := range 1000 {
			key := []byte(fmt.Sprintf("k%04d-%04d", i, batch))
			b.add(store.Version(batch*1000+i+1), asReplayed([]store.Op{{Key: key, Value: []byte("v")}}))
		}
		b.sort()
		b.apply(db, ov)
		made[unsafe.SliceData(ov.items)] = true
		if len(ov.items) != 1000*(batch+1) {
			t.Fatalf("batch %d: the overlay holds %d records, want %d", batch, len(ov.items), 1000*(batch+1))
		}
	}
	if len(made) != 2 {
		t.Fatalf("12 merges wrote into %d arrays, want the two made by the first two", len(made))
	}
}

// overlayKeyForms name key i of a round: short raw keys, and keys ending
// in 32 lowercase hex digits, which a checkpoint's image holds packed
// (the replay's ops stay raw, so every compare is a mixed one).
var overlayKeyForms = []func(int) string{
	shortKey,
	func(i int) string { return fmt.Sprintf("rcpt/v1/%030x%02d", 0xabc, i) },
}

// imageItem is key's record as a checkpoint's image holds it: its key
// packed when it can be, the version 0.
func imageItem(key, val []byte) index.KV {
	buf, packed := index.AppendStoredKey(nil, key)
	klen := len(buf)
	buf = binary.AppendUvarint(append(buf, val...), 0)
	kv := index.PackedKV(buf, klen, len(val))
	if packed {
		kv = kv.WithPackedKey()
	}
	return kv
}

// TestSeekFrom_FindsEveryKeyAndGap: from any start at or before a key's
// place, seekFrom finds the key, or where it would go, as a binary search
// of the whole array does.
func TestSeekFrom_FindsEveryKeyAndGap(t *testing.T) {
	var sorted []index.KV
	for i := 0; i < 100; i += 2 {
		key := fmt.Sprintf("k%03d", i)
		sorted = append(sorted, index.Probe([]byte(key)))
	}
	for i := -1; i <= 101; i++ {
		key := []byte(fmt.Sprintf("k%03d", i))
		if i < 0 {
			key = []byte("a")
		}
		want := min(max(i+1, 0)/2, len(sorted))
		for from := 0; from <= want; from++ {
			got, found := seekFrom(sorted, from, index.Probe(key))
			if got != want || found != (i >= 0 && i < 100 && i%2 == 0) {
				t.Fatalf("key %s from %d: %d %v, want %d", key, from, got, found, want)
			}
		}
	}
}
