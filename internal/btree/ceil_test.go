package btree

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCeil_IsTheSmallestItemNotBelowTheKey on a built tree and on one
// grown by inserts and deletes, for keys below, among, between and above
// its items, against a linear scan of them.
func TestCeil_IsTheSmallestItemNotBelowTheKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tr := range []*BTreeG[int]{NewG(4, lessInt), NewSortedG(4, lessInt, ints(3_000))} {
		for range 2_000 {
			v := rng.IntN(7_000)
			if rng.IntN(3) == 0 {
				tr.Delete(v)
			} else {
				tr.ReplaceOrInsert(v)
			}
		}
		var all []int
		tr.Ascend(func(v int) bool { all = append(all, v); return true })
		for key := -1; key <= 7_001; key++ {
			i, _ := slices.BinarySearch(all, key)
			got, ok := tr.Ceil(key)
			if ok != (i < len(all)) || ok && got != all[i] {
				t.Fatalf("Ceil(%d) = %d, %v; the items from there: %v", key, got, ok, all[i:])
			}
		}
	}
}
