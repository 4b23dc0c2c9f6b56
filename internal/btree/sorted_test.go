package btree

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// checkShape proves the B-tree's rules on t: every leaf at one depth, every
// node but the root within [min, max] items, an inner node one child more
// than items, keys in strictly increasing order; it returns the mean fill
// of the nodes (items / max).
func checkShape[T any](tb testing.TB, t *BTreeG[T]) float64 {
	tb.Helper()
	leafDepth := -1
	var nodes, items int
	var walk func(n *node[T], depth int, root bool)
	walk = func(n *node[T], depth int, root bool) {
		nodes++
		items += len(n.items)
		if !root && (len(n.items) < t.minItems() || len(n.items) > t.maxItems()) {
			tb.Fatalf("node at depth %d holds %d items, outside [%d, %d]", depth, len(n.items), t.minItems(), t.maxItems())
		}
		if len(n.children) == 0 {
			if leafDepth >= 0 && depth != leafDepth {
				tb.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			leafDepth = depth
			return
		}
		if len(n.children) != len(n.items)+1 {
			tb.Fatalf("inner node with %d items and %d children", len(n.items), len(n.children))
		}
		for _, c := range n.children {
			walk(c, depth+1, false)
		}
	}
	if t.root != nil {
		walk(t.root, 0, true)
	}
	if items != t.Len() {
		tb.Fatalf("%d items in the nodes, Len %d", items, t.Len())
	}
	if nodes == 0 {
		return 0
	}
	return float64(items) / float64(nodes*t.maxItems())
}

func ints(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 2 * i // even: odd keys are free for inserts
	}
	return out
}

func lessInt(a, b int) bool { return a < b }

// TestNewSortedG_BuildsAValidFullTreeOfExactlyTheItems, at every size
// where the shape changes (one leaf, two, a full level, one more) and
// beyond: the tree obeys the rules, iterates the items in order, finds
// each, and its nodes are far fuller than a tree built by sorted inserts.
func TestNewSortedG_BuildsAValidFullTreeOfExactlyTheItems(t *testing.T) {
	const degree = 32
	max := 2*degree - 1
	for _, n := range []int{0, 1, 2, max - 1, max, max + 1, 2*max + 1, 2*max + 2, 4095, 4096, 4097, 10_000, 262_143, 262_144, 300_001} {
		src := ints(n)
		tr := NewSortedG(degree, lessInt, src)
		fill := checkShape(t, tr)
		var got []int
		tr.Ascend(func(v int) bool { got = append(got, v); return true })
		if !slices.Equal(got, src) {
			t.Fatalf("n=%d: the tree iterates %d items, not the %d given in order", n, len(got), n)
		}
		for _, v := range src {
			if _, ok := tr.Get(v); !ok {
				t.Fatalf("n=%d: %d not found", n, v)
			}
		}
		if n >= 10_000 {
			inserted := NewG(degree, lessInt)
			for _, v := range src {
				inserted.ReplaceOrInsert(v)
			}
			byInserts := checkShape(t, inserted)
			if fill < 0.9 || byInserts > 0.6 {
				t.Fatalf("n=%d: nodes %.0f%% full when built, %.0f%% by sorted inserts", n, 100*fill, 100*byInserts)
			}
			t.Logf("n=%d: nodes %.1f%% full built, %.1f%% by sorted inserts", n, 100*fill, 100*byInserts)
		}
	}
}

// TestNewSortedG_IsAnOrdinaryTreeAfterwards: inserts, replacements and
// deletes on a built tree, and on a clone of it, keep the rules and agree
// with a model; the clone and the original do not see each other's writes.
func TestNewSortedG_IsAnOrdinaryTreeAfterwards(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := ints(20_000)
	tr := NewSortedG(32, lessInt, src)
	model := map[int]bool{}
	for _, v := range src {
		model[v] = true
	}
	snapshot := tr.Clone()
	for range 50_000 {
		v := rng.IntN(50_000)
		if rng.IntN(3) == 0 {
			_, had := tr.Delete(v)
			if had != model[v] {
				t.Fatalf("Delete(%d) found %v, model %v", v, had, model[v])
			}
			delete(model, v)
			continue
		}
		_, had := tr.ReplaceOrInsert(v)
		if had != model[v] {
			t.Fatalf("ReplaceOrInsert(%d) replaced %v, model %v", v, had, model[v])
		}
		model[v] = true
	}
	checkShape(t, tr)
	if tr.Len() != len(model) {
		t.Fatalf("Len %d, model %d", tr.Len(), len(model))
	}
	prev := -1
	tr.Ascend(func(v int) bool {
		if v <= prev || !model[v] {
			t.Fatalf("iteration: %d after %d (in model: %v)", v, prev, model[v])
		}
		prev = v
		return true
	})
	checkShape(t, snapshot)
	var got []int
	snapshot.Ascend(func(v int) bool { got = append(got, v); return true })
	if !slices.Equal(got, src) {
		t.Fatal("the clone taken before the writes changed")
	}
}
