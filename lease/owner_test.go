package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/vfs/memfs"
)

func TestRegister_BumpsIncarnationDurablyPerNode(t *testing.T) {
	ctx := context.Background()
	disk := memfs.NewDisk()
	db, err := engine.Open("/data", engine.Options{Logger: slog.New(slog.DiscardHandler), FS: disk.FS()})
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 3; want++ {
		o, err := lease.Register(ctx, db, "node-0")
		if err != nil || o != (lease.Owner{Node: "node-0", Incarnation: want}) {
			t.Fatalf("Register = %v %v, want node-0#%d", o, err, want)
		}
	}
	if o, err := lease.Register(ctx, db, "node-1"); err != nil || o.Incarnation != 1 {
		t.Fatalf("another node's first incarnation = %v %v, want 1", o, err)
	}
	// Durable: a crash and reopen continues the sequence.
	disk.Crash(db, nil)
	db, err = engine.Open("/data", engine.Options{Logger: slog.New(slog.DiscardHandler), FS: disk.FS()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if o, err := lease.Register(ctx, db, "node-0"); err != nil || o.Incarnation != 4 {
		t.Fatalf("after reopen Register = %v %v, want incarnation 4", o, err)
	}
}

func TestRegister_ConcurrentOpensGetDistinctIncarnations(t *testing.T) {
	db := openDB(t)
	const n = 8
	got := make(chan uint64, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := lease.Register(context.Background(), db, "node-0")
			if err != nil {
				t.Error(err)
				return
			}
			got <- o.Incarnation
		}()
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for inc := range got {
		if seen[inc] {
			t.Fatalf("incarnation %d handed out twice", inc)
		}
		seen[inc] = true
	}
	for i := uint64(1); i <= n; i++ {
		if !seen[i] {
			t.Fatalf("incarnations %v, want exactly 1..%d", seen, n)
		}
	}
}

func TestRegister_RejectsInvalidNodeIDs(t *testing.T) {
	db := openDB(t)
	for _, node := range []string{"", strings.Repeat("x", lease.NodeIDBytesMax+1)} {
		if _, err := lease.Register(context.Background(), db, node); err == nil {
			t.Fatalf("Register(%q) succeeded", node)
		}
	}
	if _, err := lease.Register(context.Background(), db, strings.Repeat("x", lease.NodeIDBytesMax)); err != nil {
		t.Fatalf("a %d-byte node id: %v", lease.NodeIDBytesMax, err)
	}
}

func TestMayAdopt_OlderIncarnationAtOnceOthersOnlyAfterExpiry(t *testing.T) {
	me := lease.Owner{Node: "node-0", Incarnation: 5}
	exp := t0.Add(10 * time.Second)
	before, at, after := exp.Add(-time.Nanosecond), exp, exp.Add(time.Second)
	st := func(node string, inc uint64) lease.State {
		return lease.State{Claim: lease.Claim{Node: node, Incarnation: inc, Epoch: 3}, ClaimVersion: 42, Expires: exp, ExpiryVersion: 43}
	}
	cases := []struct {
		name string
		st   lease.State
		now  time.Time
		want bool
	}{
		{"no claim (immutable or gone), even long expired", lease.State{Expires: exp}, after, false},
		{"no claim with a stale claim value", lease.State{Claim: lease.Claim{Node: "node-0", Incarnation: 1}}, after, false},
		{"older incarnation of my node, live lease", st("node-0", 4), before, true},
		{"much older incarnation of my node", st("node-0", 1), t0, true},
		{"my own claim, live", st("node-0", 5), before, false},
		{"my own claim, expired", st("node-0", 5), after, false},
		{"newer incarnation of my node, live", st("node-0", 6), before, false},
		{"newer incarnation of my node, expired", st("node-0", 6), after, true},
		{"other node, live", st("node-1", 1), before, false},
		{"other node, exactly at expiry", st("node-1", 1), at, true},
		{"other node, expired", st("node-1", 9), after, true},
		{"other node with my incarnation number, live", st("node-1", 5), before, false},
	}
	for _, c := range cases {
		if got := lease.MayAdopt(c.st, me, c.now); got != c.want {
			t.Errorf("%s: MayAdopt = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestClaim_AdoptionIsOneCASAndFencesTheOldOwner(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	a := lease.Owner{Node: "node-0", Incarnation: 1}
	b := lease.Owner{Node: "node-1", Incarnation: 1}
	ha := claimNew(t, db, a, t0.Add(time.Second), "r1")[0]

	st, err := lease.Read(ctx, db, "r1")
	if err != nil || st.Claim != (lease.Claim{Node: "node-0", Incarnation: 1, Epoch: 1}) || !st.Expires.Equal(t0.Add(time.Second)) {
		t.Fatalf("Read = %+v %v", st, err)
	}
	// Creating an existing claim fails on the claim key.
	dup := new(store.Batch)
	lease.ClaimNew(dup, "r1", b, t0)
	if _, err := db.Apply(ctx, dup); !lease.IsFence(err, "r1") {
		t.Fatalf("second ClaimNew: %v, want a failed condition on the claim key", err)
	}
	// Adopt: epoch+1, the old owner's fenced write fails.
	ad := new(store.Batch)
	hb := lease.ClaimAdopt(ad, "r1", st, b, t0.Add(2*time.Second))
	if hb.Status() == lease.Live {
		t.Fatal("a Held is live before its claim is durable")
	}
	v, err := db.Apply(ctx, ad)
	if err != nil {
		t.Fatal(err)
	}
	hb.Confirmed(v, t0.Add(2*time.Second))
	st2, _ := lease.Read(ctx, db, "r1")
	if st2.Claim != (lease.Claim{Node: "node-1", Incarnation: 1, Epoch: 2}) {
		t.Fatalf("after adoption claim = %+v", st2.Claim)
	}
	w := new(store.Batch)
	if err := ha.Fence(w); err != nil {
		t.Fatal(err)
	}
	w.Put([]byte("meta/v1/probe"), []byte("x"))
	if _, err := db.Apply(ctx, w); !lease.IsFence(err, "r1") {
		t.Fatalf("stale owner's write: %v, want fenced", err)
	}
	if _, err := db.Get(ctx, []byte("meta/v1/probe")); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the fenced write was applied")
	}
	// A second adoption from the same stale state loses the CAS.
	ad2 := new(store.Batch)
	lease.ClaimAdopt(ad2, "r1", st, lease.Owner{Node: "node-2", Incarnation: 1}, t0)
	if _, err := db.Apply(ctx, ad2); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("adoption from a stale state: %v", err)
	}
	// Drop makes the receipt immutable: nobody can adopt it any more.
	d := new(store.Batch)
	if err := hb.Fence(d); err != nil {
		t.Fatal(err)
	}
	lease.Drop(d, "r1")
	if _, err := db.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	st3, err := lease.Read(ctx, db, "r1")
	if err != nil || st3.ClaimVersion != 0 || lease.MayAdopt(st3, lease.Owner{Node: "node-9", Incarnation: 1}, t0.Add(time.Hour)) {
		t.Fatalf("after Drop: %+v %v", st3, err)
	}
}

// TestRegisterAt_TheRecordNamesTheIncarnationThatWroteItsAddress: each
// registration writes its address with its incarnation, so the record
// always says where the current incarnation listens; an older record's
// address does not outlive a later registration, and a node that never
// registered reads as not found.
func TestRegisterAt_TheRecordNamesTheIncarnationThatWroteItsAddress(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if _, err := lease.ReadNode(ctx, st, "node-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a node that never registered: %v, want ErrNotFound", err)
	}
	for i, addr := range []string{"http://127.0.0.1:1001", "http://127.0.0.1:1002", ""} {
		o, err := lease.RegisterAt(ctx, st, "node-a", addr)
		if err != nil {
			t.Fatal(err)
		}
		n, err := lease.ReadNode(ctx, st, "node-a")
		if err != nil || n.Owner != o || n.Advertise != addr || o.Incarnation != uint64(i+1) {
			t.Fatalf("registration %d at %q: record %+v %v, owner %v", i, addr, n, err, o)
		}
	}
	if _, err := lease.RegisterAt(ctx, st, "node-a", "http://"+strings.Repeat("x", lease.AdvertiseBytesMax)); err == nil {
		t.Fatal("an address beyond AdvertiseBytesMax was registered")
	}
	if n, _ := lease.ReadNode(ctx, st, "node-a"); n.Incarnation != 3 {
		t.Fatalf("a refused registration changed the record: %+v", n)
	}
}
