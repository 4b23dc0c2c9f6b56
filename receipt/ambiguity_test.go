package receipt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

func wantPending(t *testing.T, a receipt.Answer, id string) {
	t.Helper()
	if a.Terminal || a.Replayed || a.Status != 503 || a.Code != "idempotency_receipt_pending" || a.Outcome != receipt.OutcomePending ||
		!a.Retryable || a.RetryWith != "same_key" || a.TxnID != id || a.RetryAfter <= 0 {
		t.Fatalf("answer %+v, want typed retryable 503 idempotency_receipt_pending for %s", a, id)
	}
}

// TestAmbiguity_BareDecisionConflictKeepsReceiptStarted: a decision write
// refused by a failed condition on the decision key, whose winner cannot be
// read, is not proof of abort: the answer is 503 pending, the receipt stays
// started, and maintenance later publishes the real outcome.
func TestAmbiguity_BareDecisionConflictKeepsReceiptStarted(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{})) // a decision written apart from Begin
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	dec := decisionKey(id)
	bareDecisionConflict(hs, id)

	ans := mustExecute(t, a, r)
	wantPending(t, ans, id)
	if ans.State != receipt.Started {
		t.Fatalf("answer state %v, want started", ans.State)
	}
	if st := a.Stats(); st.Aborted != 0 || st.Committed != 0 {
		t.Fatalf("stats %+v: nothing may be published on a bare conflict", st)
	}
	if rec, _ := record(t, e.db, id); rec.State != receipt.Started || rec.Envelope != nil {
		t.Fatalf("receipt %v with envelope %v, want started", rec.State, rec.Envelope)
	}
	if _, err := e.db.Get(ctx, dec); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a decision exists: %v", err)
	}

	hs.clear()
	ms, err := a.MaintainOnce(ctx)
	if err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	replay := mustExecute(t, a, r)
	wantCommitted(t, replay, id, true)
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
	if a.Stats().Aborted != 0 {
		t.Fatal("an abort was published")
	}
}

// bareDecisionConflict makes every decision write of transaction id fail
// on its create-if-absent condition, and every read of the decision fail
// transiently: a bare DecisionConflict whose winner cannot be read.
func bareDecisionConflict(hs *hookStore, id string) {
	dec := decisionKey(id)
	hs.onApply(func(_ context.Context, b *store.Batch) (store.Version, error, bool) {
		if putsKey(b, dec) {
			return 0, &store.ConditionError{Cond: store.Condition{Key: dec, Kind: store.MustBeAbsent}}, true
		}
		return 0, nil, false
	})
	hs.onGet(func(key []byte) error {
		if bytes.Equal(key, dec) {
			return errTransient
		}
		return nil
	})
}

func conflictBatch(t *testing.T, doc string) *table.Batch {
	return mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":%q,"doc":{"by":"keyed"}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, doc))
}

// TestAbort_PublicationFailureRecoversExactRefusalEnvelope: a batch
// refused by a participant (a real conflict) whose terminal write fails
// after the abort decision is durable is published later by maintenance,
// and every replay returns exactly the envelope an undisturbed run returns.
func TestAbort_PublicationFailureRecoversExactRefusalEnvelope(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, receipt.Options{})
	createTable(t, a, "t")
	voteNo(hs, "alice", "t")

	// The reference: the same refusal, undisturbed.
	ref := mustExecute(t, a, req("alice", "t", "k-ref", conflictBatch(t, "X")))
	wantVotedNo(t, ref, receipt.Bind("alice", "t", "k-ref"))

	wantSameEnvelope(t, mustExecute(t, a, req("alice", "t", "k-ref", conflictBatch(t, "X"))).Envelope, ref.Envelope)

	r := req("alice", "t", "k1", conflictBatch(t, "X"))
	id := receipt.Bind("alice", "t", "k1")
	disarm := testsupport.Arm(t, fault.ReceiptTerminalBefore, `1*return("eio")`)
	ans, err := a.Execute(ctx, r)
	disarm()
	switch {
	case errors.Is(err, fault.ErrInjected):
	case err == nil && (ans.Code == "idempotency_receipt_pending" || ans.Code == "idempotency_request_in_progress") && !ans.Terminal:
	default:
		t.Fatalf("Execute with a failing terminal write: %+v %v, want an error or pending", ans, err)
	}
	if rec, _ := record(t, e.db, id); rec.State != receipt.Started {
		t.Fatalf("receipt %v, want started (abort decided, not published)", rec.State)
	}
	if st, err := a.Coordinator().Lookup(ctx, id); err != nil || st.Decision == nil {
		t.Fatalf("no durable abort decision: %+v %v", st, err)
	}
	// Coordinator handoff debt (decided, not yet published) pins the
	// receipt and its decision, however long past retention.
	// (The reference receipt, terminal and debt-free, is cleaned.)
	e.clock.Advance(25 * time.Hour)
	if n, err := a.CleanOnce(ctx); n != 1 || err != nil || receiptExists(t, e.db, ref.TxnID) {
		t.Fatalf("clean: %d %v, want only the reference receipt deleted", n, err)
	}
	if _, err := e.db.Get(ctx, decisionKey(id)); err != nil {
		t.Fatalf("the decision of an unpublished outcome is gone: %v", err)
	}
	if rec, _ := record(t, e.db, id); rec.State != receipt.Started {
		t.Fatalf("receipt %v", rec.State)
	}

	ms, err := a.MaintainOnce(ctx)
	if err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	want := ref.Envelope
	want.TxnID = id
	for i := 0; i < 2; i++ {
		replay := mustExecute(t, a, r)
		if !replay.Replayed || !replay.Terminal {
			t.Fatalf("replay %d: %+v", i, replay)
		}
		wantSameEnvelope(t, replay.Envelope, want)
	}
	if counter(t, a, "t", "ctr") != 0 {
		t.Fatal("an aborted batch applied")
	}
	if a.Active().Len() != 0 {
		t.Fatalf("active set %d", a.Active().Len())
	}
}

// TestCreation_AmbiguousReceiptWriteIsTypedPendingAndConverges: when the
// write that creates the receipt has an unknown outcome, the first answer is
// a typed retryable 503 idempotency_receipt_pending, and retrying the same
// key converges to one execution and one terminal envelope — whether the
// write had landed or not. On both routes: when the write is the one that
// commits (one write) and it landed, the retry replays what it published.
func TestCreation_AmbiguousReceiptWriteIsTypedPendingAndConverges(t *testing.T) {
	for _, c := range []struct {
		landed, once bool
	}{{true, true}, {false, true}, {true, false}, {false, false}} {
		landed, o := c.landed, twoWrites(receipt.Options{})
		if c.once {
			o = receipt.Options{}
		}
		t.Run(fmt.Sprintf("once=%v/landed=%v", c.once, landed), func(t *testing.T) {
			e := newEnv(t)
			hs := &hookStore{Store: e.db}
			a := e.openOn(hs, o)
			createTable(t, a, "t")
			r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
			id := receipt.Bind("alice", "t", "k1")
			hs.onApply(func(ctx context.Context, b *store.Batch) (store.Version, error, bool) {
				if !putsKey(b, store.NSReceipt.Key(id)) {
					return 0, nil, false
				}
				hs.clear() // only the first creating write
				if landed {
					if _, err := e.db.Apply(ctx, b); err != nil {
						return 0, err, true
					}
				}
				return 0, fmt.Errorf("%w: fsync failed", store.ErrAmbiguous), true
			})
			wantPending(t, mustExecute(t, a, r), id)
			if receiptExists(t, e.db, id) != landed {
				t.Fatalf("receipt exists = %v", !landed)
			}
			ans := mustExecute(t, a, r)
			wantCommitted(t, ans, id, landed && c.once)
			replay := mustExecute(t, a, r)
			wantCommitted(t, replay, id, true)
			wantSameEnvelope(t, replay.Envelope, ans.Envelope)
			if got := counter(t, a, "t", "ctr"); got != 1 {
				t.Fatalf("counter %d, want 1", got)
			}
			if !docExists(t, a, "t", "doc-k1") {
				t.Fatal("inserted doc missing")
			}
		})
	}
	t.Run("not_applied publication", func(t *testing.T) {
		e := newEnv(t)
		hs := &hookStore{Store: e.db}
		a := e.openOn(hs, receipt.Options{})
		r := req("alice", "missing", "k1", incBatch(t, "k1", "ctr"))
		id := receipt.Bind("alice", "missing", "k1")
		hs.onApply(func(ctx context.Context, b *store.Batch) (store.Version, error, bool) {
			if !putsKey(b, store.NSReceipt.Key(id)) {
				return 0, nil, false
			}
			hs.clear()
			return 0, store.ErrAmbiguous, true
		})
		wantPending(t, mustExecute(t, a, r), id)
		ans := mustExecute(t, a, r)
		if !ans.Terminal || ans.Status != 404 || ans.Code != "table_not_found" || ans.Outcome != receipt.OutcomeNotApplied {
			t.Fatalf("retry: %+v", ans)
		}
		wantSameEnvelope(t, mustExecute(t, a, r).Envelope, ans.Envelope)
	})
}
