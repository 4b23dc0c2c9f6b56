package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// TestTables_AnotherNodesDropAndRecreate: two nodes share a store; one
// keeps executing keyed batches while the other drops the table and
// creates it again. A batch is refused as table_not_found (not applied)
// while there is no table, and lands in the new table, never the dropped
// one, once there is. On a remote store (remoteStore) node a plans from
// its cached copy of the table's metadata (createfirst.go): a stale copy
// may never turn into a false table_not_found, nor a batch in the dropped
// table; it is planned again from a fresh read (docs/etcd.md).
func TestTables_AnotherNodesDropAndRecreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  func() store.Store
		replan bool // node a plans from a cached copy, and must plan again
	}{
		{"local", func() store.Store { return memstore.New() }, false},
		{"remote", func() store.Store { return newRemoteStore() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := tc.store()
			a := e.openOn(st, receipt.Options{Node: "node-a"})
			b := e.openOn(st, receipt.Options{Node: "node-b"})
			dropAndRecreate(t, a, b)
			if got := a.Stats().Replanned; tc.replan != (got > 0) {
				t.Fatalf("node a planned %d batches again, want some: %v", got, tc.replan)
			}
		})
	}
}

// dropAndRecreate runs a batch on a, drops the table on b, runs one on a,
// creates the table on b and runs a third on a.
func dropAndRecreate(t *testing.T, a, b *receipt.Service) {
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
