package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/receipt"
)

// TestDeferredResolution_ABatchPaysTheDebtItMeets: with resolution left to
// maintenance, a committed batch's intents stay on its documents. The next
// batch on them — one that needs the document the intent holds (a
// transform without upsert of a document only the intent created) and one
// that increments a counter the intent holds — resolves the decided
// transaction itself and commits, before any maintenance pass (twopc's
// debt.go); it is never refused for a write that is already over.
func TestDeferredResolution_ABatchPaysTheDebtItMeets(t *testing.T) {
	e := newEnv(t)
	svc := e.open(receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{DeferResolution: true}))
	createTable(t, svc, "t")
	wantCommitted(t, mustExecute(t, svc, req(alice, "t", "k1", incBatch(t, "a", "ctr"))), receipt.Bind(alice, "t", "k1"), false)
	again := mustExecute(t, svc, req(alice, "t", "k2", incBatch(t, "b", "ctr")))
	wantCommitted(t, again, receipt.Bind(alice, "t", "k2"), false)
	needs := mustBatch(t, `{"transforms":[{"id":"doc-a","ops":[{"op":"$set","path":"seen","value":true}]}]}`)
	if a := mustExecute(t, svc, req(alice, "t", "k3", needs)); a.Status != 201 {
		t.Fatalf("a transform of the document a decided, unresolved insert created: %d %s %s", a.Status, a.Code, a.Message)
	}
	if got := counter(t, svc, "t", "ctr"); got != 2 {
		t.Fatalf("counter %d, want 2", got)
	}
	if st := svc.Stats(); st.DebtPaid == 0 {
		t.Fatalf("stats %+v: no debt paid, yet every batch met a leftover intent", st)
	}
}
