package receipt_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store/memstore"
)

// TestMaintenance_DeadNodesReceiptsAreSharedNotGrabbed: node-a dies
// holding 40 started receipts. Once its leases lapse, node-b's and
// node-c's maintenance each adopt about their share at once — neither
// takes everything in its first pass, neither is left out — and what a
// node of a worse rank leaves waits one stagger, then anyone takes it:
// every receipt ends terminal, applied once.
func TestMaintenance_DeadNodesReceiptsAreSharedNotGrabbed(t *testing.T) {
	const n = 40
	e := newEnv(t)
	st := memstore.New()
	a := e.openOn(st, receipt.WithTestKnobs(receipt.Options{Node: "node-a"}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a, "t")
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		if _, err := a.Execute(ctx, req("alice", "t", key, incBatch(t, key, key))); !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("%s: %v, want the injected crash", key, err)
		}
	}
	disarm()
	a.Close()
	b := e.openOn(st, receipt.Options{Node: "node-b"})
	c := e.openOn(st, receipt.Options{Node: "node-c"})

	e.clock.Advance(ttl + time.Millisecond) // the leases lapsed; no stagger has passed
	mb, err := b.MaintainOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := c.MaintainOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first passes: node-b adopted %d, node-c %d of %d", mb.Adopted, mc.Adopted, n)
	if mb.Adopted+mc.Adopted != n {
		t.Fatalf("first passes adopted %d + %d of %d: each receipt has one first-ranked node alive", mb.Adopted, mc.Adopted, n)
	}
	if mb.Adopted < n/4 || mc.Adopted < n/4 {
		t.Fatalf("first passes adopted %d and %d of %d: one node grabbed (nearly) everything", mb.Adopted, mc.Adopted, n)
	}
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		if got := counter(t, b, "t", key); got != 1 {
			t.Fatalf("%s applied %d times", key, got)
		}
	}
}

// TestMaintenance_ADeadFirstRankDelaysAdoptionByOneStaggerOnly: with
// node-c (ranked first for some receipts) dead too, node-b leaves those at
// first and takes them once a stagger has passed: nothing starves.
func TestMaintenance_ADeadFirstRankDelaysAdoptionByOneStaggerOnly(t *testing.T) {
	const n = 20
	e := newEnv(t)
	st := memstore.New()
	a := e.openOn(st, receipt.WithTestKnobs(receipt.Options{Node: "node-a"}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a, "t")
	c := e.openOn(st, receipt.Options{Node: "node-c"}) // registers, then dies
	c.Close()
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		if _, err := a.Execute(ctx, req("alice", "t", key, incBatch(t, key, key))); !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("%s: %v", key, err)
		}
	}
	disarm()
	a.Close()
	b := e.openOn(st, receipt.Options{Node: "node-b"})
	e.clock.Advance(ttl + time.Millisecond)
	first, err := b.MaintainOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Adopted == 0 || first.Adopted == n {
		t.Fatalf("node-b's first pass adopted %d of %d, want only those it ranks first for", first.Adopted, n)
	}
	e.clock.Advance(ttl / 4) // one stagger (AdoptStagger defaults to LeaseTTL/4)
	second, err := b.MaintainOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Adopted+second.Adopted != n {
		t.Fatalf("after a stagger node-b adopted %d + %d of %d: a dead first-ranked node left some behind", first.Adopted, second.Adopted, n)
	}
}
