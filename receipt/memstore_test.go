package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store/memstore"
)

// TestReferenceStore_TheLifecycleNeedsOnlyTheContract: the receipt layer
// (and tables, 2PC and leases under it) runs on the reference store, which
// keeps the store.Store contract and nothing more: a commit, its replay
// and a mismatch, then a successor incarnation that replays the same
// answer and adopts nothing twice.
func TestReferenceStore_TheLifecycleNeedsOnlyTheContract(t *testing.T) {
	e := newEnv(t)
	st := memstore.New()
	a := e.openOn(st, receipt.Options{})
	createTable(t, a, "t")
	id := receipt.Bind("alice", "t", "k")
	first := mustExecute(t, a, req("alice", "t", "k", incBatch(t, "k", "ctr")))
	wantCommitted(t, first, id, false)
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "k", incBatch(t, "k", "ctr"))), id, true)
	wantMismatch(t, mustExecute(t, a, req("alice", "t", "k", incBatch(t, "other", "ctr"))), id, receipt.Terminal, receipt.OutcomeCommitted)
	a.Close()

	b := e.openOn(st, receipt.Options{})
	again := mustExecute(t, b, req("alice", "t", "k", incBatch(t, "k", "ctr")))
	wantCommitted(t, again, id, true)
	if string(again.Result) != string(first.Result) {
		t.Fatalf("replay %s, first %s", again.Result, first.Result)
	}
	if _, err := b.MaintainOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, b, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d, want 1: the batch applied %d times", got, got)
	}
}
