package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// TestTreeVersions_AgreeWithADescentPerKey: for conditions on keys present
// and absent, repeated, below, between and past the tree's keys, packed
// and raw, treeVersions finds in one ascending pass the version a Get of
// each finds, in the conditions' order.
func TestTreeVersions_AgreeWithADescentPerKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	db := bareDB()
	db.tree = keyedTree(300, rng)
	var keys [][]byte
	db.tree.AscendAll(func(kv index.KV) bool { keys = append(keys, kv.Key()); return true })
	for round := range 500 {
		conds := make([]store.Condition, 1+rng.IntN(condScanMax+4))
		for i := range conds {
			var key []byte
			switch rng.IntN(4) {
			case 0: // present
				key = keys[rng.IntN(len(keys))]
			case 1: // absent, just past a present key
				key = append(slices.Clone(keys[rng.IntN(len(keys))]), 0)
			case 2: // repeated
				if i > 0 {
					key = conds[rng.IntN(i)].Key
					break
				}
				fallthrough
			default: // absent, anywhere: a fresh receipt's or another namespace's
				key = []byte(fmt.Sprintf("%s/%032x", []string{"a", "rcpt/v1", "tomb/v1", "txn/v1/rec", "zz"}[rng.IntN(5)], rng.Uint64()))
			}
			conds[i] = store.Condition{Key: key, Kind: store.MustBeAbsent}
		}
		got := db.treeVersions(conds, nil)
		want := db.treeVersionsEach(conds, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: one pass found %v, a descent per key %v", round, got, want)
		}
	}
}
