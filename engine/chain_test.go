package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
)

// TestApplyChain_LaterLinksSeeEarlierWrites: a link's conditions are checked
// against the links before it — a key an earlier link wrote is present (at
// that link's version), one it deleted is absent — and the links get
// consecutive versions, readable once ApplyChain returns.
func TestApplyChain_LaterLinksSeeEarlierWrites(t *testing.T) {
	ctx := context.Background()
	db := openT(t, t.TempDir(), quiet(Options{}))
	if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("old"), []byte("0"))); err != nil {
		t.Fatal(err)
	}
	first := store.Version(db.log.NextIndex())
	vs, err := db.ApplyChain(ctx,
		new(store.Batch).Absent([]byte("a")).Put([]byte("a"), []byte("1")).Delete([]byte("old")),
		new(store.Batch).AtVersion([]byte("a"), first).Absent([]byte("old")).Put([]byte("b"), []byte("2")),
		new(store.Batch).Present([]byte("b")).Put([]byte("a"), []byte("3")),
	)
	if err != nil {
		t.Fatalf("ApplyChain: %v", err)
	}
	if len(vs) != 3 || vs[0] != first || vs[1] != first+1 || vs[2] != first+2 {
		t.Fatalf("versions %v, want %d, %d, %d", vs, first, first+1, first+2)
	}
	sameState(t, "after the chain", scanAll(t, db), map[string]store.Item{
		"a": {Value: []byte("3"), Version: vs[2]},
		"b": {Value: []byte("2"), Version: vs[1]},
	})
}

// TestApplyChain_AFailedLinkWritesNothing: a condition failing in any link
// rejects the whole chain — earlier links included — with a
// *ConditionError naming the key, and consumes no version.
func TestApplyChain_AFailedLinkWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := openT(t, t.TempDir(), quiet(Options{}))
	if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("x"), []byte("0"))); err != nil {
		t.Fatal(err)
	}
	before := scanAll(t, db)
	next := db.log.NextIndex()
	_, err := db.ApplyChain(ctx,
		new(store.Batch).Put([]byte("a"), []byte("1")).Delete([]byte("x")),
		new(store.Batch).Present([]byte("x")).Put([]byte("b"), []byte("2")), // x deleted by link 0
	)
	if key, ok := store.FailedKey(err); !ok || string(key) != "x" {
		t.Fatalf("ApplyChain: %v, want a failed condition on x", err)
	}
	sameState(t, "after a rejected chain", scanAll(t, db), before)
	if got := db.log.NextIndex(); got != next {
		t.Fatalf("a rejected chain moved the log from index %d to %d", next, got)
	}
}

// TestApplyChain_OneFsyncForTheWholeChain: on an idle store the links go to
// the log as one group with one fsync, which is what the chain is for.
func TestApplyChain_OneFsyncForTheWholeChain(t *testing.T) {
	ctx := context.Background()
	db := openT(t, t.TempDir(), quiet(Options{}))
	before := db.Stats().WAL
	if _, err := db.ApplyChain(ctx,
		new(store.Batch).Put([]byte("a"), []byte("1")),
		new(store.Batch).Put([]byte("b"), []byte("2")),
		new(store.Batch).Put([]byte("c"), []byte("3")),
	); err != nil {
		t.Fatal(err)
	}
	after := db.Stats().WAL
	if f, g, e := after.Fsyncs-before.Fsyncs, after.Groups-before.Groups, after.Entries-before.Entries; f != 1 || g != 1 || e != 3 {
		t.Fatalf("a three-link chain took %d fsyncs, %d groups, %d entries; want 1, 1, 3", f, g, e)
	}
}

// TestApplyChain_RejectsOversizedChains: the chain's limits are checked
// before anything is sequenced.
func TestApplyChain_RejectsOversizedChains(t *testing.T) {
	ctx := context.Background()
	db := openT(t, t.TempDir(), quiet(Options{}))
	links := make([]*store.Batch, store.ChainLinksMax+1)
	for i := range links {
		links[i] = new(store.Batch).Put([]byte{'k', byte(i)}, nil)
	}
	big := make([]byte, store.BatchBytesMax/2+1)
	for name, chain := range map[string][]*store.Batch{
		"no links":       nil,
		"too many links": links,
		"too many bytes": {new(store.Batch).Put([]byte("a"), big), new(store.Batch).Put([]byte("b"), big)},
		"an empty link":  {new(store.Batch).Put([]byte("a"), nil), new(store.Batch)},
	} {
		if _, err := db.ApplyChain(ctx, chain...); !errors.Is(err, store.ErrInvalidBatch) {
			t.Errorf("%s: %v, want ErrInvalidBatch", name, err)
		}
	}
	if got := scanAll(t, db); len(got) != 0 {
		t.Fatalf("rejected chains wrote %d keys", len(got))
	}
}

// TestApplyChain_EveryTornTailKeepsAPrefix cuts the log at every byte of a
// chain that was written but never fsynced: recovery keeps no link, the
// first, or both — never a later link without the ones before it — and
// every one of those three states is reached by some cut.
func TestApplyChain_EveryTornTailKeepsAPrefix(t *testing.T) {
	testsupport.RequireFailpoints(t)
	ctx := context.Background()
	opts := quiet(Options{})
	// crashAt writes the chain without its fsync, then keeps keep of its
	// unsynced bytes, and returns which links survived.
	crashAt := func(keep int) (first, second bool, unsynced int) {
		disk := newMemDisk()
		db := disk.open(t, opts)
		if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("base"), []byte("0"))); err != nil {
			t.Fatal(err)
		}
		disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
		_, err := db.ApplyChain(ctx,
			new(store.Batch).Put([]byte("link0"), []byte("prepared")),
			new(store.Batch).Present([]byte("link0")).Put([]byte("link1"), []byte("decided")),
		)
		disarm()
		if !errors.Is(err, store.ErrAmbiguous) {
			t.Fatalf("ApplyChain whose fsync failed: %v, want ErrAmbiguous", err)
		}
		for _, n := range disk.Crash(db, memfs.KeepUnsynced(keep)) {
			unsynced += n
		}
		db, err = disk.reopen(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		got := scanAll(t, db)
		if _, ok := got["base"]; !ok {
			t.Fatal("the durable batch before the chain is lost")
		}
		_, first = got["link0"]
		_, second = got["link1"]
		return first, second, unsynced
	}
	_, _, unsynced := crashAt(0)
	if unsynced <= 0 {
		t.Fatalf("the chain left %d unsynced bytes", unsynced)
	}
	seen := map[[2]bool]bool{}
	for keep := 0; keep <= unsynced; keep++ {
		first, second, _ := crashAt(keep)
		if second && !first {
			t.Fatalf("cut after %d of %d unsynced bytes kept the second link without the first", keep, unsynced)
		}
		seen[[2]bool{first, second}] = true
	}
	for _, state := range [][2]bool{{false, false}, {true, false}, {true, true}} {
		if !seen[state] {
			t.Errorf("no cut recovered links %v", state)
		}
	}
}
