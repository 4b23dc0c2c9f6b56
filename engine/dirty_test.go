package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/index"
)

// The dirty set keeps, for each key, its first write since the link —
// across a failed delta's restore too — and gives up past its bound.
func TestDirtySet_FirstWriteWinsAcrossARestore(t *testing.T) {
	d := newDirtySet()
	d.note([]byte("b"), false) // created since the link
	d.note([]byte("a"), true)
	d.note([]byte("b"), true) // then deleted: its first write says it was absent
	taken := d.take()
	d.note([]byte("a"), false) // after the failed delta: not the first write of a
	d.note([]byte("c"), true)
	d.restore(taken)
	got := ""
	for _, k := range d.sortDistinct() {
		got += fmt.Sprintf("%s:%v ", k.key, k.existed)
	}
	if want := "a:true b:false c:true "; got != want {
		t.Fatalf("distinct keys %q, want %q", got, want)
	}
	// Sorted once (a delta that then failed), restored again: still exact.
	again := d.take()
	d.note([]byte("b"), true)
	d.restore(again)
	if k := d.sortDistinct(); len(k) != 3 || string(k[1].key) != "b" || k[1].existed {
		t.Fatalf("after a second restore: %+v", k)
	}
}

func TestDirtySet_PastItsBoundItIsLost(t *testing.T) {
	d := newDirtySet()
	d.max = 100
	for i := range 4 {
		d.note(fmt.Appendf(nil, "key-%02d", i), false)
	}
	if !d.lost || len(d.keys) != 0 {
		t.Fatalf("4 notes of 38 bytes in 100: lost=%v keys=%d, want lost and emptied", d.lost, len(d.keys))
	}
	d.reset()
	if d.lost || d.max != 100 {
		t.Fatalf("reset: %+v", d)
	}
}

// The arena grows with what is noted: a few keys cost a small chunk, not
// a megabyte, a busy interval's chunks double up to dirtyChunkBytes, and
// every key reads back as it was noted across the chunks.
func TestDirtySet_TheArenaGrowsWithWhatIsNoted(t *testing.T) {
	d := newDirtySet()
	d.note([]byte("one key"), false)
	if got := cap(d.chunk); got != dirtyChunkMinBytes {
		t.Fatalf("after one note the arena's chunk holds %d bytes, want %d", got, dirtyChunkMinBytes)
	}
	const n = 60_000 // about 1.3 MB of keys: every chunk size, then full ones
	largest := 0
	for i := range n {
		d.note(fmt.Appendf(nil, "key-%08d-%s", i, "padding"), false)
		largest = max(largest, cap(d.chunk))
	}
	if largest != dirtyChunkBytes {
		t.Fatalf("largest chunk %d bytes, want %d", largest, dirtyChunkBytes)
	}
	big := make([]byte, dirtyChunkBytes+1) // a key beyond a chunk gets one of its own size
	d.note(big, false)
	if cap(d.chunk) != len(big) {
		t.Fatalf("a %d-byte key got a chunk of %d", len(big), cap(d.chunk))
	}
	for i, k := range d.keys[1 : n+1] {
		if want := fmt.Sprintf("key-%08d-%s", i, "padding"); string(k.key) != want {
			t.Fatalf("key %d reads %q, want %q", i, k.key, want)
		}
	}
}

// TestAtSnapshot_FindsWhatGetFinds: for key sets dense and sparse in the
// tree, before its first item and past its last, atSnapshot reports each
// key once, in order, with the item Get finds; fn's error stops it.
func TestAtSnapshot_FindsWhatGetFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	for round := range 200 {
		tree := index.NewKeySpace()
		for range rng.IntN(300) {
			k := fmt.Appendf(nil, "k%04d", 10+rng.IntN(500))
			tree.Put(index.PackedKV(index.AppendKV(nil, k, []byte("v"), 1), len(k), 1))
		}
		set := map[string]bool{}
		for range rng.IntN(60) {
			set[fmt.Sprintf("k%04d", rng.IntN(530))] = true // k0000-k0009, k0510+: outside
		}
		var keys []dirtyKey
		for k := range set {
			keys = append(keys, dirtyKey{key: []byte(k)})
		}
		slices.SortFunc(keys, func(a, b dirtyKey) int { return bytes.Compare(a.key, b.key) })
		var got []dirtyKey
		err := atSnapshot(tree, keys, func(k dirtyKey, it index.KV, ok bool) error {
			want, wantOK := tree.Get(index.Probe(k.key))
			if ok != wantOK || (ok && !bytes.Equal(it.Key(), want.Key())) {
				t.Fatalf("round %d: %s found %v (%q), Get finds %v", round, k.key, ok, it.Key(), wantOK)
			}
			got = append(got, k)
			return nil
		})
		if err != nil || !slices.EqualFunc(got, keys, func(a, b dirtyKey) bool { return bytes.Equal(a.key, b.key) }) {
			t.Fatalf("round %d: %d keys reported of %d (%v)", round, len(got), len(keys), err)
		}
		if len(keys) > 1 {
			stop := errors.New("stop")
			n := 0
			if err := atSnapshot(tree, keys, func(dirtyKey, index.KV, bool) error { n++; return stop }); err != stop || n != 1 {
				t.Fatalf("round %d: fn's error gave %v after %d calls", round, err, n)
			}
		}
	}
}
