package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemdb/idem/index"
)

// spillsOf spills every cold item of db's current tree to the value log,
// as a checkpoint does from its snapshot, and syncs the log.
func spillsOf(t *testing.T, db *DB) (*Snapshot, *spillList) {
	t.Helper()
	snap := db.ckpts.snapshotWith(func() {})
	var spills spillList
	var scratch [vlogPtrLen]byte
	snap.tree.AscendAll(func(it index.KV) bool {
		if _, _, err := db.stored(it, &spills, scratch[:]); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if err := db.vlog.sync(); err != nil {
		t.Fatal(err)
	}
	return snap, &spills
}

// TestInstallSpills_OnlyItemsUnchangedSinceTheSnapshot: a spill becomes
// the item's pointer only if the tree still holds the spilled value; an
// item overwritten or deleted since, or inserted anew after a deletion,
// keeps what the tree holds, and the live byte count follows only the
// items swapped.
func TestInstallSpills_OnlyItemsUnchangedSinceTheSnapshot(t *testing.T) {
	db := openT(t, t.TempDir(), vlogOpts())
	defer db.Close()
	for i := range 4 {
		putT(t, db, fmt.Sprintf("cold/%04d", i), coldValue(i, 0))
	}
	_, spills := spillsOf(t, db)
	putT(t, db, "cold/0001", coldValue(1, 1)) // overwritten since
	deleteT(t, db, "cold/0002")               // deleted since
	deleteT(t, db, "cold/0003")               // deleted and written again
	putT(t, db, "cold/0003", coldValue(3, 0))
	db.treeMu.RLock()
	live := db.liveBytes
	db.treeMu.RUnlock()
	spills.install(db)

	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	want := map[string]struct {
		value    string
		indirect bool
	}{"cold/0000": {coldValue(0, 0), true}, "cold/0001": {coldValue(1, 1), false}, "cold/0003": {coldValue(3, 0), false}}
	if n := db.tree.Len(); n != len(want) {
		t.Fatalf("the tree holds %d items, want %d", n, len(want))
	}
	for k, w := range want {
		it, ok := db.tree.Get(index.Probe([]byte(k)))
		if !ok || it.Indirect() != w.indirect {
			t.Fatalf("%s: present %v, indirect %v; want indirect %v", k, ok, it.Indirect(), w.indirect)
		}
		got, err := db.valueOf(it)
		if err != nil || string(got) != w.value {
			t.Fatalf("%s reads %q, %v; want %q", k, got, err, w.value)
		}
	}
	it, _ := db.tree.Get(index.Probe([]byte("cold/0000")))
	if saved := recordBytes(9, len(coldValue(0, 0))) - recordBytes(9, len(it.Value())); live-db.liveBytes != saved {
		t.Fatalf("live bytes went %d → %d, want %d less", live, db.liveBytes, saved)
	}
	if _, err := db.Get(context.Background(), []byte("cold/0002")); err == nil {
		t.Fatal("cold/0002, deleted since the snapshot, is back")
	}
}

// TestSpillList_KeepsEverySpillInOrderInChunks: past vlogSwapBatch the
// list starts a new chunk instead of growing (and copying) the old one.
func TestSpillList_KeepsEverySpillInOrderInChunks(t *testing.T) {
	var l spillList
	if !l.empty() {
		t.Fatal("a new list is not empty")
	}
	const n = 2*vlogSwapBatch + 5
	for i := range n {
		l.add(vlogSpill{ptr: vlogPtr{off: uint32(i)}})
	}
	next := uint64(0)
	for _, c := range append(l.full, l.cur) {
		if cap(c) > vlogSwapBatch {
			t.Fatalf("a chunk of capacity %d, past %d", cap(c), vlogSwapBatch)
		}
		for _, s := range c {
			if uint64(s.ptr.off) != next {
				t.Fatalf("spill %d where %d was due", s.ptr.off, next)
			}
			next++
		}
	}
	if next != n || l.empty() {
		t.Fatalf("%d spills listed of %d", next, n)
	}
}
