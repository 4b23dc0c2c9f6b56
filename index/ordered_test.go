package index

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// kv packs key ‖ value ‖ version into a fresh allocation, as the engine does.
func kv(key, value []byte, version uint64) KV {
	return PackedKV(AppendKV(nil, key, value, version), len(key), len(value))
}

func intSet(n int) *Ordered[int] {
	o := NewOrdered(func(a, b int) bool { return a < b })
	for i := 0; i < n; i++ {
		o.Put(i * 2) // even numbers: odd ones are free for later inserts
	}
	return o
}

// TestNextAfter_VisitsEveryItemOncePerRound: walking a fixed set in batches
// of n, keeping the last item as the cursor, returns the items in cyclic
// order, so any Len consecutive results are each item exactly once and every
// item comes back within ⌈Len/n⌉ calls.
func TestNextAfter_VisitsEveryItemOncePerRound(t *testing.T) {
	const size, batch = 10000, 256
	o := intSet(size)
	sorted := make([]int, 0, size)
	o.AscendAll(func(v int) bool { sorted = append(sorted, v); return true })

	callsPerRound := (size + batch - 1) / batch
	var stream []int
	var cursor int
	has := false
	lastSeen := make(map[int]int) // item -> call that last returned it
	for call := 0; call < 3*callsPerRound; call++ {
		got := o.NextAfter(nil, cursor, has, batch)
		if len(got) != batch {
			t.Fatalf("call %d returned %d items, want %d", call, len(got), batch)
		}
		seen := make(map[int]bool, len(got))
		for _, v := range got {
			if seen[v] {
				t.Fatalf("call %d returned %d twice", call, v)
			}
			seen[v] = true
			lastSeen[v] = call
		}
		stream = append(stream, got...)
		cursor, has = got[len(got)-1], true
		if call >= callsPerRound-1 {
			for _, v := range sorted {
				if c, ok := lastSeen[v]; !ok || call-c >= callsPerRound {
					t.Fatalf("after call %d item %d last returned by call %d (ok=%v), more than %d calls ago", call, v, c, ok, callsPerRound)
				}
			}
		}
	}
	for i, v := range stream {
		if want := sorted[i%size]; v != want {
			t.Fatalf("result %d is %d, want %d (cyclic key order)", i, v, want)
		}
	}
}

// TestNextAfter_FairWhileItemsComeAndGo: with items deleted and inserted
// between calls (the cursor itself included), no call returns an item twice
// or an item that is no longer there, and every item that stays present is
// returned within ⌈maxLen/n⌉+1 calls.
func TestNextAfter_FairWhileItemsComeAndGo(t *testing.T) {
	const size, batch, churn = 10000, 256, 8
	rng := rand.New(rand.NewPCG(1, 2))
	o := intSet(size)
	since := make(map[int]int) // item -> call that last returned or inserted it
	o.AscendAll(func(v int) bool { since[v] = 0; return true })
	maxLen := size + 200*churn
	bound := (maxLen+batch-1)/batch + 1

	var cursor int
	has := false
	for call := 1; call <= 200; call++ {
		got := o.NextAfter(nil, cursor, has, batch)
		if want := min(batch, o.Len()); len(got) != want {
			t.Fatalf("call %d returned %d items, want %d", call, len(got), want)
		}
		seen := make(map[int]bool, len(got))
		for _, v := range got {
			if _, ok := o.Get(v); !ok {
				t.Fatalf("call %d returned %d, which is not in the set", call, v)
			}
			if seen[v] {
				t.Fatalf("call %d returned %d twice", call, v)
			}
			seen[v] = true
			since[v] = call
		}
		cursor, has = got[len(got)-1], true
		for v, c := range since {
			if call-c > bound {
				t.Fatalf("item %d present since call %d not returned by call %d (bound %d calls)", v, c, call, bound)
			}
		}
		// Churn: delete random items (sometimes the cursor), insert new ones.
		for i := 0; i < churn; i++ {
			victim := rng.IntN(2 * size)
			if i == 0 && rng.IntN(4) == 0 {
				victim = cursor
			}
			if _, ok := o.Delete(victim); ok {
				delete(since, victim)
			}
			add := rng.IntN(2*size+1000) - 500
			if _, ok := o.Get(add); !ok && o.Len() < maxLen {
				o.Put(add)
				since[add] = call
			}
		}
	}
}

func TestNextAfter_EdgeCases(t *testing.T) {
	o := NewOrdered(func(a, b int) bool { return a < b })
	if got := o.NextAfter(nil, 0, false, 5); len(got) != 0 {
		t.Fatalf("empty set returned %v", got)
	}
	for _, v := range []int{10, 20, 30} {
		o.Put(v)
	}
	for _, tc := range []struct {
		cursor int
		has    bool
		n      int
		want   []int
	}{
		{0, false, 2, []int{10, 20}},
		{20, true, 3, []int{30, 10, 20}}, // the cursor comes last in its round
		{20, true, 10, []int{30, 10, 20}},
		{25, true, 3, []int{30, 10, 20}}, // a cursor that is gone
		{30, true, 1, []int{10}},
		{10, true, 0, nil},
		{10, true, -1, nil},
	} {
		got := o.NextAfter([]int{-1}, tc.cursor, tc.has, tc.n)
		if !slices.Equal(got, append([]int{-1}, tc.want...)) {
			t.Errorf("NextAfter(cursor %d/%v, n %d) = %v, want [-1 %v] (appended to dst)", tc.cursor, tc.has, tc.n, got, tc.want)
		}
	}
}

// TestClone_IsIsolated: a clone is a snapshot — writes to either side are
// invisible to the other — and it may be read while the original is written
// (run under -race).
func TestClone_IsIsolated(t *testing.T) {
	ks := NewKeySpace()
	for i := 0; i < 5000; i++ {
		ks.Put(kv([]byte{byte(i >> 8), byte(i)}, []byte("v0"), 1))
	}
	snap := ks.Clone()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 0; round < 20; round++ {
			n := 0
			snap.AscendAll(func(kv KV) bool {
				if string(kv.Value()) != "v0" || kv.Version() != 1 {
					t.Errorf("clone sees a later write: %x = %q@%d", kv.Key(), kv.Value(), kv.Version())
					return false
				}
				n++
				return true
			})
			if n != 5000 {
				t.Errorf("clone has %d items, want 5000", n)
				return
			}
		}
	}()
	for i := 0; i < 5000; i++ {
		k := []byte{byte(i >> 8), byte(i)}
		if i%3 == 0 {
			ks.Delete(Probe(k))
		} else {
			ks.Put(kv(k, []byte("v1"), 2))
		}
		ks.Put(kv(append(k, 'x'), []byte("new"), 2))
	}
	wg.Wait()

	// Writes to the clone do not reach the original either.
	snap.Put(kv([]byte("only-in-clone"), nil, 3))
	snap.Delete(Probe([]byte{0, 1}))
	if _, ok := ks.Get(Probe([]byte("only-in-clone"))); ok {
		t.Fatalf("a write to the clone reached the original")
	}
	if it, ok := ks.Get(Probe([]byte{0, 1})); !ok || string(it.Value()) != "v1" {
		t.Fatalf("a delete in the clone reached the original: %v %v", it, ok)
	}
	if got, want := ks.Len(), 5000-1667+5000; got != want {
		t.Fatalf("original has %d items, want %d", got, want)
	}
	if snap.Len() != 5000 {
		t.Fatalf("clone has %d items, want 5000", snap.Len())
	}
}

// TestIDSet_OrdersByID: the renewal active set is ordered by ID.
func TestIDSet_OrdersByID(t *testing.T) {
	s := NewIDSet()
	s.Put("b")
	s.Put("a")
	if m, ok := s.Min(); !ok || m != "a" {
		t.Fatalf("min %q %v", m, ok)
	}
}
