package btree

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestReplaceOrInsertAt_AgreesWithAModel: runs of puts through one finger
// — ascending with repeats, as a batch's sorted puts are, and now and then
// out of order — on a built tree, with deletes (each followed by Reset)
// between the runs and clones within them: every put reports what the model says it
// replaced, the tree keeps the B-tree's rules and iterates the model in
// order, and no clone changes with the writes after it.
func TestReplaceOrInsertAt_AgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := ints(5_000)
	tr := NewSortedG(4, lessInt, slices.Clone(src)) // degree 4: leaves fill and split often
	model := map[int]bool{}
	for _, v := range src {
		model[v] = true
	}
	snapshot := tr.Clone()
	var f FingerG[int]
	fast := 0
	for run := range 4_000 {
		v := rng.IntN(12_000)
		for range 1 + rng.IntN(12) {
			if rng.IntN(10) == 0 {
				v = rng.IntN(12_000) // out of order: the finger must not be trusted
			} else {
				v += rng.IntN(3) // ascending, repeats included
			}
			if rng.IntN(40) == 0 {
				// Mid-run: the finger's leaf is now shared, and the next
				// put must copy it, not write into the clone.
				sameItems(t, snapshot, src)
				snapshot, src = tr.Clone(), sortedKeys(model)
			}
			if f.leaf != nil && f.leaf.cow == tr.cow && !lessInt(v, f.last) {
				fast++
			}
			_, had := tr.ReplaceOrInsertAt(&f, v)
			if had != model[v] {
				t.Fatalf("run %d: ReplaceOrInsertAt(%d) replaced %v, model %v", run, v, had, model[v])
			}
			model[v] = true
		}
		if rng.IntN(4) == 0 {
			d := rng.IntN(12_000)
			tr.Delete(d)
			delete(model, d)
			f.Reset()
		}
	}
	checkShape(t, tr)
	if tr.Len() != len(model) {
		t.Fatalf("Len %d, model %d", tr.Len(), len(model))
	}
	var got []int
	tr.Ascend(func(v int) bool { got = append(got, v); return true })
	if !slices.Equal(got, sortedKeys(model)) {
		t.Fatal("the tree does not iterate the model in order")
	}
	sameItems(t, snapshot, src)
	if fast < 10_000 {
		t.Fatalf("only %d puts found the finger's leaf usable: the test does not exercise it", fast)
	}
	t.Logf("%d puts started at a usable finger", fast)
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// sameItems fails unless clone still holds exactly items, in order.
func sameItems(t *testing.T, clone *BTreeG[int], items []int) {
	t.Helper()
	checkShape(t, clone)
	var got []int
	clone.Ascend(func(v int) bool { got = append(got, v); return true })
	if !slices.Equal(got, items) {
		t.Fatal("a clone changed with the writes after it")
	}
}

// BenchmarkReplaceOrInsertAt puts runs of three adjacent new keys — a
// shard's documents of one keyed request — into a tree of 600 000, through
// a finger and one by one, and reports the key compares per put: a
// count the machine's load cannot blur.
func BenchmarkReplaceOrInsertAt(b *testing.B) {
	for _, finger := range []bool{false, true} {
		b.Run(map[bool]string{false: "descend", true: "finger"}[finger], func(b *testing.B) {
			compares := 0
			less := func(a, b int) bool { compares++; return a < b }
			base := ints(600_000)
			for i := range base {
				base[i] *= 4 // multiples of 8: seven free keys after each
			}
			tr := NewSortedG(32, less, base)
			order := rand.New(rand.NewPCG(5, 6)).Perm(len(base)) // past it, runs replace
			compares = 0
			for i := 0; b.Loop(); i++ {
				var f FingerG[int]
				at := 8*order[i%len(order)] + 1
				for k := range 3 {
					if finger {
						tr.ReplaceOrInsertAt(&f, at+k)
					} else {
						tr.ReplaceOrInsert(at + k)
					}
				}
			}
			b.ReportMetric(float64(compares)/float64(3*b.N), "compares/put")
		})
	}
}
