package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/engine/memstore"
	"github.com/idemdb/idem/receipt"
)

// TestTables_AnotherNodesDropAndRecreate: two nodes share a store; one
// keeps executing keyed batches while the other drops the table and
// creates it again. A batch is refused as table_not_found (not applied)
// while there is no table, and lands in the new table, never the dropped
// one, once there is. (The property a cache of table metadata on the
// keyed path — one read less per request on etcd — must keep: a stale
// copy may never turn into a false table_not_found; docs/etcd.md.)
func TestTables_AnotherNodesDropAndRecreate(t *testing.T) {
	e := newEnv(t)
	store := memstore.New()
	a := e.openOn(store, receipt.Options{Node: "node-a"})
	b := e.openOn(store, receipt.Options{Node: "node-b"})
	createTable(t, a, "t")
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "k1", incBatch(t, "k1", "ctr"))), receipt.Bind("alice", "t", "k1"), false)

	if err := b.Tables().Drop(ctx, alice, "t"); err != nil {
		t.Fatal(err)
	}
	gone := mustExecute(t, a, req("alice", "t", "k2", incBatch(t, "k2", "ctr")))
	if !gone.Terminal || gone.Code != "table_not_found" || gone.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("a batch for a table another node dropped: %+v, want table_not_found not_applied", gone.Envelope)
	}

	createTable(t, b, "t")
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "k3", incBatch(t, "k3", "ctr"))), receipt.Bind("alice", "t", "k3"), false)
	if got := counter(t, b, "t", "ctr"); got != 1 {
		t.Fatalf("counter of the new table %d, want 1: the batch went to the dropped table", got)
	}
	if docExists(t, b, "t", "doc-k1") {
		t.Fatal("the new table holds a document of the dropped one")
	}
	if !docExists(t, b, "t", "doc-k3") {
		t.Fatal("the new table lacks the batch's document")
	}
}
