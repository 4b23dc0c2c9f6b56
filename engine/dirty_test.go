package engine

import (
	"fmt"
	"testing"
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
