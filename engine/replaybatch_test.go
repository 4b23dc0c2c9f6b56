package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
)

// TestReplayBatch_SortedBatchesLeaveWhatLogOrderLeaves: random batches of
// puts and deletes over a few keys — a key written several times in one
// batch and across batches, deleted and put back — applied through the
// replay's sorted batches, flushed at random points, leave the tree, the
// live bytes, the applied version and the dirty set's first write of each
// key (and whether it existed) exactly as applying them in log order does.
// The deleted keys' bytes, reused from batch to batch, are not kept.
func TestReplayBatch_SortedBatchesLeaveWhatLogOrderLeaves(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t), 17))
	for round := range 100 {
		inOrder, batched := bareDB(), bareDB()
		var b replayBatch
		var lastWithOps store.Version
		for v := store.Version(1); v <= 200; v++ {
			ops := randomOps(rng, v, 20, shortKey)
			inOrder.applyToTree(v, ownOps(ops))
			if len(ops) > 0 {
				lastWithOps = v
			}
			owned := asReplayed(ops)
			if b.add(v, owned) || rng.IntN(30) == 0 {
				b.flush(batched)
			}
			forgetBodies(ops)
		}
		b.flush(batched)
		sameReplay(t, round, inOrder, batched, lastWithOps)
	}
}

// TestReplayBatch_PanicsUnlessNewerThanApplied: a batch whose first op is
// at or below the last applied version is refused before it touches the
// tree, as applyToTree refuses one.
func TestReplayBatch_PanicsUnlessNewerThanApplied(t *testing.T) {
	db := bareDB()
	db.applyToTree(5, putOps("a"))
	var b replayBatch
	b.add(5, putOps("b"))
	testsupport.MustPanic(t, "invariant broken: versions strictly increase", func() { b.flush(db) })
	if _, ok := db.tree.Get(index.Probe([]byte("b"))); ok {
		t.Fatal("the refused batch reached the tree")
	}
}

func treeKeys(tree *index.Ordered[index.KV]) []string {
	var out []string
	tree.AscendAll(func(it index.KV) bool { out = append(out, string(it.Key())); return true })
	return out
}

func firstWrites(d *dirtySet) []string {
	var out []string
	for _, k := range d.sortDistinct() {
		out = append(out, fmt.Sprintf("%s:%v", k.key, k.existed))
	}
	return out
}

// randomOps is up to three puts and deletes of batch v over keys
// keyOf(0) … keyOf(n-1).
func randomOps(rng *rand.Rand, v store.Version, n int, keyOf func(int) string) []store.Op {
	var ops []store.Op
	for range rng.IntN(4) {
		key := keyOf(rng.IntN(n))
		if rng.IntN(3) == 0 {
			ops = append(ops, store.Op{Key: []byte(key), Delete: true})
		} else {
			ops = append(ops, store.Op{Key: []byte(key), Value: []byte(fmt.Sprintf("v%d", v))})
		}
	}
	return ops
}

func shortKey(i int) string { return fmt.Sprintf("k%02d", i) }

// asReplayed is ops as the replay hands them on: puts engine-owned,
// deletes' keys still the body's (the batch copies them).
func asReplayed(ops []store.Op) []store.Op {
	owned := ownOps(ops)
	for i := range ops {
		if ops[i].Delete {
			owned[i].Key = ops[i].Key
		}
	}
	return owned
}

// forgetBodies overwrites the deleted keys' bytes, as the next entry's body
// overwrites the one a replay read.
func forgetBodies(ops []store.Op) {
	for i := range ops {
		if ops[i].Delete {
			ops[i].Key[0] = 'X'
		}
	}
}

// sameReplay fails unless got, replayed, holds what want, applied in log
// order, holds: the tree, the live bytes, the applied version (the last
// batch with ops: the replay's end sets the rest) and the dirty set's first
// write of each key.
func sameReplay(t *testing.T, round int, want, got *DB, lastWithOps store.Version) {
	t.Helper()
	wantItems, gotItems := holding(want.tree), holding(got.tree)
	wantKeys, gotKeys := treeKeys(want.tree), treeKeys(got.tree)
	if !slices.Equal(gotItems, wantItems) || !slices.Equal(gotKeys, wantKeys) || got.liveBytes != want.liveBytes {
		t.Fatalf("round %d: replayed holds %v %v (live %d), in order %v %v (live %d)", round, gotKeys, gotItems, got.liveBytes, wantKeys, wantItems, want.liveBytes)
	}
	if got.applied != lastWithOps {
		t.Fatalf("round %d: applied %d, want %d, the last batch with ops", round, got.applied, lastWithOps)
	}
	if w, g := firstWrites(want.dirty), firstWrites(got.dirty); !slices.Equal(g, w) {
		t.Fatalf("round %d: the dirty set's first writes %v, in order %v", round, g, w)
	}
}
