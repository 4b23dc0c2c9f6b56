package receipt_test

import (
	"maps"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

func wantNotTerminal(t *testing.T, a receipt.Answer, id string) {
	t.Helper()
	if a.Terminal || a.TxnID != id || !a.Retryable || a.RetryWith != "same_key" ||
		(a.Code != "idempotency_request_in_progress" && a.Code != "idempotency_receipt_pending") {
		t.Fatalf("stale owner answered %+v, want in-progress or pending", a)
	}
}

// TestFencing_StaleIncarnationCannotDecideOrRenew: once a newer incarnation
// of the node adopted a receipt, the old incarnation's decision write is
// fenced (it answers in-progress and the store is unchanged by it) and its
// renewal is fenced (the lease is reported lost).
func TestFencing_StaleIncarnationCannotDecideOrRenew(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{Node: "node-0"})) // held between its two writes
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	g := hs.block(t, decisionKey(id))
	ch := goExecute(a, r)
	g.wait(t) // A built its fenced decision write and waits to apply it
	stOld, err := lease.Read(ctx, e.db, id)
	if err != nil {
		t.Fatal(err)
	}

	b := e.open(receipt.Options{Node: "node-0"})
	if b.Owner().Incarnation <= a.Owner().Incarnation {
		t.Fatalf("incarnations a=%d b=%d", a.Owner().Incarnation, b.Owner().Incarnation)
	}
	// B adopts at once but fails before deciding: it holds the claim, no
	// decision exists.
	disarm := testsupport.Arm(t, fault.TwoPCDecideBefore, `1*return("crash")`)
	ms, err := b.MaintainOnce(ctx)
	disarm()
	if err != nil || ms.Adopted != 1 || ms.Terminal != 0 {
		t.Fatalf("B's maintenance: %+v %v, want adopted, not terminal", ms, err)
	}
	stNew, _ := lease.Read(ctx, e.db, id)
	if stNew.Claim != (lease.Claim{Node: "node-0", Incarnation: b.Owner().Incarnation, Epoch: stOld.Claim.Epoch + 1}) {
		t.Fatalf("claim after adoption %+v", stNew.Claim)
	}

	before := dump(t, e.db)
	g.open()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNotTerminal(t, res.a, id)
	if !maps.Equal(before, dump(t, e.db)) {
		t.Fatal("the stale owner's fenced decision changed the store")
	}
	if a.Stats().Fenced == 0 {
		t.Fatal("the fenced write was not counted")
	}

	// Its renewal is fenced too.
	stale := lease.Resume(id, stOld)
	hb := &lease.Heartbeat{Store: e.db, Clock: e.clock, TTL: ttl, Margin: time.Second}
	if rep := hb.Renew(ctx, []*lease.Held{stale}); rep.Fenced != 1 || rep.Renewed != 0 || stale.Status() != lease.Lost {
		t.Fatalf("stale renewal: %+v, status %v", rep, stale.Status())
	}
	if !maps.Equal(before, dump(t, e.db)) {
		t.Fatal("the stale owner's fenced renewal changed the store")
	}

	// The adopter finishes exactly once.
	ms, err = b.MaintainOnce(ctx)
	if err != nil || ms.Terminal != 1 {
		t.Fatalf("B's second pass: %+v %v", ms, err)
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)
	if got := counter(t, b, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestFencing_PartitionedOwnerLosesToAdopterAfterExpiry: an owner that can
// no longer renew (every lease write fails) becomes uncertain — never lost
// by itself — until its lease expires; then another node adopts and
// finishes, the old owner's renewal is fenced (lost, out of the active set)
// and its late decision changes nothing.
func TestFencing_PartitionedOwnerLosesToAdopterAfterExpiry(t *testing.T) {
	e, hs, a, n1 := twoNodes(t)
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	g := hs.block(t, decisionKey(id))
	ch := goExecute(a, r)
	g.wait(t)
	held, _ := a.Active().Get(id)

	partition := testsupport.Arm(t, fault.LeaseRenewBefore, `return("eio")`)
	for i := 0; ; i++ {
		st, _ := lease.Read(ctx, e.db, id)
		if lease.MayAdopt(st, n1.Owner(), e.clock.Now()) {
			break
		}
		if i > 20 {
			t.Fatal("the lease never expired")
		}
		if ms, err := n1.MaintainOnce(ctx); err != nil || ms.Adopted != 0 {
			t.Fatalf("node-1 adopted a live lease: %+v %v", ms, err)
		}
		if s := held.Status(); s == lease.Lost {
			t.Fatal("renewal failures alone marked the lease lost")
		}
		e.step(time.Second, 2)
	}
	if s := held.Status(); s != lease.Uncertain {
		t.Fatalf("after the confirmed deadline the lease is %v, want uncertain", s)
	}
	ms, err := n1.MaintainOnce(ctx)
	if err != nil || ms.Adopted != 1 || ms.Terminal != 1 {
		t.Fatalf("node-1 maintenance after expiry: %+v %v", ms, err)
	}
	partition()

	before := dump(t, e.db)
	fenced := a.Supervisor().Stats().Fenced
	e.step(time.Second, 2) // A's supervisor tries to renew
	if held.Status() != lease.Lost || a.Supervisor().Stats().Fenced != fenced+1 || a.Active().Len() != 0 {
		t.Fatalf("stale renewal: status %v, fenced %d, active %d", held.Status(), a.Supervisor().Stats().Fenced-fenced, a.Active().Len())
	}
	g.open()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Its late decision write fails on a condition — the adopter already
	// resolved the intents and released the decision, and the claim is
	// gone. Either it answers in-progress/pending, or, having re-read the
	// receipt, it replays the adopter's terminal envelope: never its own.
	if res.a.Terminal {
		wantCommitted(t, res.a, id, true)
	} else {
		wantNotTerminal(t, res.a, id)
	}
	if !maps.Equal(before, dump(t, e.db)) {
		t.Fatal("the stale owner changed the store")
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}
