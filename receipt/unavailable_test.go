package receipt_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// stoppableStore reports itself fail-stopped once stopped is set, as
// engine.DB does after an I/O error.
type stoppableStore struct {
	*hookStore
	stopped atomic.Bool
}

func (s *stoppableStore) Health() error {
	if s.stopped.Load() {
		return store.ErrFailStopped
	}
	return nil
}

// TestFailStopped_AnswersSayWhatBecameOfTheKey: a store that accepts no
// writes gets every keyed request answered 503 unavailable with its
// transaction and what is known of it — not_applied without a receipt,
// pending with one that is not terminal — while terminal receipts replay
// and mismatches stay 422. The fast path refuses even a batch with
// nothing to write.
func TestFailStopped_AnswersSayWhatBecameOfTheKey(t *testing.T) {
	e := newEnv(t)
	hs := &stoppableStore{hookStore: &hookStore{Store: e.db}}
	a := e.openOn(hs, twoWrites(receipt.Options{ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	createTable(t, a, "t")
	doneID := receipt.Bind("alice", "t", "done")
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "done", incBatch(t, "done", "ctr"))), doneID, false)
	g, busy := occupyExecutor(t, a, hs.hookStore, "ctr")
	pendingID := receipt.Bind("alice", "t", "k3")
	if ans := mustExecute(t, a, req("alice", "t", "k3", incBatch(t, "k3", "ctr"))); ans.State != receipt.Pending {
		t.Fatalf("want a pending receipt: %+v", ans)
	}
	executed := a.Stats().Executed

	hs.stopped.Store(true)
	wantUnavailable := func(ans receipt.Answer, id, outcome string) {
		t.Helper()
		if ans.Status != 503 || ans.Code != code.Unavailable || !ans.Retryable || ans.RetryWith != code.SameKey ||
			ans.Terminal || ans.TxnID != id || ans.Outcome != outcome || ans.RetryAfter <= 0 {
			t.Fatalf("answer %+v, want 503 unavailable %s outcome %s", ans, id, outcome)
		}
	}
	wantUnavailable(mustExecute(t, a, req("alice", "t", "fresh", incBatch(t, "fresh", "ctr"))), receipt.Bind("alice", "t", "fresh"), receipt.OutcomeNotApplied)
	wantUnavailable(mustExecute(t, a, req("alice", "t", "k3", incBatch(t, "k3", "ctr"))), pendingID, receipt.OutcomePending)
	wantCommitted(t, mustExecute(t, a, req("alice", "t", "done", incBatch(t, "done", "ctr"))), doneID, true)
	wantMismatch(t, mustExecute(t, a, req("alice", "t", "done", incBatch(t, "other", "ctr"))), doneID, receipt.Terminal, receipt.OutcomeCommitted)
	_, err := a.ExecuteFast(ctx, "alice", "t", mustBatch(t, `{"deletes":["nothing-here"]}`))
	var ce *code.Error
	if !errors.As(err, &ce) || ce.Code != code.Unavailable {
		t.Fatalf("fast no-op batch on a stopped store: %v", err)
	}
	if a.Stats().Executed != executed {
		t.Fatal("a stopped store executed a batch")
	}
	hs.stopped.Store(false)
	g.open()
	awaitResult(t, busy)
}
