package receipt_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// stuckStarted leaves key's receipt started and its transaction begun
// and undecided (the decision write fails), on a service deciding in a
// write of its own.
func stuckStarted(t *testing.T, svc *receipt.Service, key string) string {
	t.Helper()
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	if _, err := svc.Execute(ctx, req(alice, "t", key, incBatch(t, key, "ctr"))); err == nil {
		t.Fatal("no injected failure")
	}
	disarm()
	return receipt.Bind(alice, "t", key)
}

func wantCodeErr(t *testing.T, err error, c code.Code) {
	t.Helper()
	var ce *code.Error
	if !errors.As(err, &ce) || ce.Code != c {
		t.Fatalf("error %v, want %s", err, c)
	}
}

// TestResolve_AStuckStartedReceiptIsPresumedAbortedAndSaysWho: the
// operator's resolution writes a presumed abort through the decision's
// create-if-absent, the receipt becomes terminal naming the operator, the
// key replays that answer, and the batch never applied.
func TestResolve_AStuckStartedReceiptIsPresumedAbortedAndSaysWho(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, svc, "t")
	id := stuckStarted(t, svc, "k1")

	res, err := svc.Resolve(ctx, id, "ops")
	if err != nil || !res.Decided || res.WasTerminal || res.Outcome != receipt.OutcomeAborted || res.Envelope.Code != code.TransactionAborted {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	rec, _ := record(t, e.db, id)
	if rec.State != receipt.Terminal || rec.ResolvedBy != "ops" {
		t.Fatalf("record %+v", rec)
	}
	if st, err := svc.Coordinator().Lookup(ctx, id); err != nil || st.Decision == nil {
		t.Fatalf("decision %+v %v", st, err)
	} else if _, aborted := st.Decision.(twopc.Aborted); !aborted {
		t.Fatalf("decision %+v, want aborted", st.Decision)
	}
	a := mustExecute(t, svc, req(alice, "t", "k1", incBatch(t, "k1", "ctr")))
	if !a.Replayed || a.Code != code.TransactionAborted || a.Message != res.Envelope.Message {
		t.Fatalf("the key after resolution: %+v", a)
	}
	if docExists(t, svc, "t", "doc-k1") || docExists(t, svc, "t", "ctr") {
		t.Fatal("the resolved batch applied")
	}
	if again, err := svc.Resolve(ctx, id, "ops"); err != nil || !again.WasTerminal || again.Decided {
		t.Fatalf("resolving a terminal receipt: %+v %v", again, err)
	}
	if svc.Stats().Resolved != 1 {
		t.Fatalf("stats %+v", svc.Stats())
	}
}

// TestResolve_NeverContradictsADecisionThatExists: the transaction was
// decided committed but the receipt not yet published; the resolution
// publishes the commit — it cannot abort what is decided.
func TestResolve_NeverContradictsADecisionThatExists(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, svc, "t")
	id := stuckStarted(t, svc, "k1")
	if err := svc.Coordinator().Decide(ctx, id, nil, twopc.Committed{Result: []byte(incResult)}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Resolve(ctx, id, "ops")
	if err != nil || res.Decided || res.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	wantCommitted(t, mustExecute(t, svc, req(alice, "t", "k1", incBatch(t, "k1", "ctr"))), id, true)
	if got := counter(t, svc, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
}

// TestResolve_RefusesWhatIsNotItsToResolve: a pending receipt (it will
// run), one a live owner elsewhere holds (until its lease expires), and a
// missing one are refused, typed, and change nothing.
func TestResolve_RefusesWhatIsNotItsToResolve(t *testing.T) {
	e := newEnv(t)
	owner := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, owner, "t")
	id := stuckStarted(t, owner, "k1")
	other := e.open(receipt.Options{Node: "node-1"})
	before := dump(t, e.db)
	_, err := other.Resolve(ctx, id, "ops")
	wantCodeErr(t, err, code.RequestInProgress)
	if _, err := other.Resolve(ctx, receipt.Bind(alice, "t", "nope"), "ops"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := other.Resolve(ctx, "not-a-txn-id", "ops"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("malformed: %v", err)
	}
	if after := dump(t, e.db); !maps.Equal(after, before) {
		t.Fatal("a refused resolution wrote")
	}
	// The owner dies; once its lease expired the other node adopts and resolves.
	owner.Close()
	e.clock.Advance(2 * ttl)
	if res, err := other.Resolve(ctx, id, "ops"); err != nil || res.Outcome != receipt.OutcomeAborted {
		t.Fatalf("after the owner's lease: %+v %v", res, err)
	}

	hs := &hookStore{Store: e.db}
	busy := e.openOn(hs, twoWrites(receipt.Options{Node: "node-2", ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	g, done := occupyExecutor(t, busy, hs, "ctr")
	pend := mustExecute(t, busy, req(alice, "t", "k-pending", incBatch(t, "k-pending", "ctr")))
	if pend.State != receipt.Pending {
		t.Fatalf("with the executor full: %+v", pend)
	}
	_, err = busy.Resolve(ctx, pend.TxnID, "ops")
	wantCodeErr(t, err, code.RequestInProgress)
	g.open()
	awaitResult(t, done)
}

// TestList_ReceiptsByStateAndAge: the mutable listing finds a stuck
// started receipt once it is older than asked, for its principal or for
// all, and the terminal one finds what completed, paged with a cursor.
func TestList_ReceiptsByStateAndAge(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, svc, "t")
	for _, k := range []string{"a", "b", "c"} {
		mustExecute(t, svc, req(alice, "t", k, incBatch(t, k, "ctr")))
	}
	id := stuckStarted(t, svc, "stuck")
	list := func(f receipt.ListFilter) []receipt.Listed {
		t.Helper()
		p, err := svc.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return p.Receipts
	}
	if got := list(receipt.ListFilter{State: receipt.Started, OlderThan: time.Minute}); len(got) != 0 {
		t.Fatalf("younger than asked: %+v", got)
	}
	e.clock.Advance(2 * time.Minute)
	got := list(receipt.ListFilter{State: receipt.Started, OlderThan: time.Minute, Principal: alice})
	if len(got) != 1 || got[0].TxnID != id || got[0].Key != "stuck" || got[0].Table != "t" || got[0].Principal != alice || got[0].Started.IsZero() {
		t.Fatalf("stuck receipts: %+v", got)
	}
	if got := list(receipt.ListFilter{State: receipt.Started, Principal: "bob"}); len(got) != 0 {
		t.Fatalf("bob sees alice's: %+v", got)
	}
	// Terminal, two per page.
	var keys []string
	f := receipt.ListFilter{Terminal: true, Limit: 2}
	for pages := 0; ; pages++ {
		p, err := svc.List(ctx, f)
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, l := range p.Receipts {
			if l.State != receipt.Terminal || l.Outcome != receipt.OutcomeCommitted {
				t.Fatalf("terminal listing: %+v", l)
			}
			keys = append(keys, l.Key)
		}
		if p.Next == nil {
			break
		}
		f.After = p.Next
	}
	if len(keys) != 3 {
		t.Fatalf("terminal keys %v", keys)
	}
	if _, err := svc.List(ctx, receipt.ListFilter{Terminal: true, After: []byte("rcpt/v1/x")}); !errors.Is(err, receipt.ErrBadCursor) {
		t.Fatalf("a foreign cursor: %v", err)
	}
}
