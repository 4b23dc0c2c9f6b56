package receipt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// Crash prefixes of a plan as table rows (issue 36, part 3): for every
// route and every k from 0 to its plan's length, the first k writes of
// one keyed request are durable and the process dies at the next one —
// the store refuses it and every later write of that process, the service
// is abandoned, and its lease runs out by the simulated clock. A successor
// (a new service of another node on the same store) runs maintenance and
// the client retries the same key: the retries must converge on one
// terminal answer, byte for byte, with the batch applied exactly once and
// nothing of the transaction left once settled.

// TestCrashPrefix_EveryRouteConvergesFromEveryPrefix walks the rows.
func TestCrashPrefix_EveryRouteConvergesFromEveryPrefix(t *testing.T) {
	for _, c := range planCases {
		n := len(c.plan().steps)
		for k := 0; k <= n; k++ {
			t.Run(fmt.Sprintf("%v/%d of %d", c, k, n), func(t *testing.T) { crashAfter(t, c, k) })
		}
	}
}

// crashAfter runs one row: case c, crashed after k writes.
func crashAfter(t *testing.T, c planCase, k int) {
	ctx := context.Background()
	e := newPlanEnv(t, c)
	a := e.first(c)
	r := c.request(t, "k1")
	e.rec.arm(k)
	_, _ = a.Execute(ctx, r) // what the dying process answers is lost with it
	if got := len(e.rec.recorded()); got != k {
		t.Fatalf("%d writes made before the crash, want %d", got, k)
	}
	e.rec.kill()
	wantLeft(t, e.inner, Bind(r.Principal, r.Table, r.Key), c.plan(), k)
	e.clock.Advance(6*time.Second + time.Second) // past the dead owner's lease

	b := e.open(e.inner, "node-1", c, 0)
	settle(t, b)
	first, err := b.Execute(ctx, r)
	if err != nil || !first.Terminal {
		t.Fatalf("the successor's first retry: %+v (%v), want a terminal answer", first, err)
	}
	settle(t, b)
	for i := range 2 {
		again, err := b.Execute(ctx, r)
		if err != nil || !again.Terminal || !again.Replayed || !reflect.DeepEqual(again.Envelope, first.Envelope) {
			t.Fatalf("retry %d: %+v (%v), want the replay of %+v", i+2, again, err, first.Envelope)
		}
	}
	wantOutcome(t, c, b, first)
	wantSettled(t, e.inner, Bind(r.Principal, r.Table, r.Key))
}

// wantLeft checks that the crash left the receipt as the plan's first k
// steps leave it: absent before the first, then in its last step's state.
func wantLeft(t *testing.T, st store.Store, id string, p writePlan, k int) {
	t.Helper()
	it, err := st.Get(context.Background(), receiptKey(id))
	if k == 0 {
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no write durable, yet the receipt reads %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("receipt after %d writes: %v", k, err)
	}
	rec, err := DecodeRecord(it.Value)
	if want := p.steps[k-1].leaves; err != nil || rec.State != want {
		t.Fatalf("after %q the receipt is %v (%v), want %v", p.steps[k-1].name, rec.State, err, want)
	}
}

// settle runs the successor's maintenance, enough passes to adopt and
// finish, pay visibility debt and release decisions.
func settle(t *testing.T, s *Service) {
	t.Helper()
	for range 3 {
		if _, err := s.MaintainOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// wantOutcome checks the answer and the documents: committed and applied
// once (one insert, the counter at 1), or refused — before execution
// (not_applied) or by a participant's vote (aborted) — with nothing applied.
func wantOutcome(t *testing.T, c planCase, s *Service, ans Answer) {
	t.Helper()
	if c.route == routeNotApplied {
		if ans.Code != code.TableNotFound || ans.Outcome != OutcomeNotApplied {
			t.Fatalf("answer %+v, want not_applied table_not_found", ans.Envelope)
		}
		return
	}
	ctx := context.Background()
	if c.outcome == outcomeRefused {
		if ans.Code != code.DocumentNotFound || ans.Outcome != OutcomeAborted {
			t.Fatalf("answer %+v, want aborted document_not_found", ans.Envelope)
		}
		var ce *code.Error
		if _, err := s.Tables().Get(ctx, "alice", planTable, "doc-k1"); !errors.As(err, &ce) || ce.Code != code.DocumentNotFound {
			t.Fatalf("the refused batch's insert: %v, want document_not_found", err)
		}
		return
	}
	if ans.Outcome != OutcomeCommitted || ans.Status != 201 {
		t.Fatalf("answer %+v (result %s), want committed", ans.Envelope, ans.Result)
	}
	if _, err := s.Tables().Get(ctx, "alice", planTable, "doc-k1"); err != nil {
		t.Fatalf("the inserted document: %v", err)
	}
	raw, err := s.Tables().Get(ctx, "alice", planTable, "ctr")
	var doc struct{ N int }
	if err != nil || json.Unmarshal(raw, &doc) != nil || doc.N != 1 {
		t.Fatalf("counter %s (%v), want n=1: the batch applied once", raw, err)
	}
}

// wantSettled checks that the receipt is terminal with no owner or debt,
// and that nothing of its transaction is left: no intent, no coordinator
// record or decision, no recovery entry, no lease.
func wantSettled(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	it, err := st.Get(ctx, receiptKey(id))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	rec, err := DecodeRecord(it.Value)
	if err != nil || rec.State != Terminal || rec.Owner != nil || rec.Debt != 0 {
		t.Fatalf("receipt %+v (%v), want terminal, unowned, without debt", rec, err)
	}
	items, err := st.Scan(ctx, []byte{0}, nil, store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	const stray = kindIntent | kindTxnRecord | kindDecision | kindRecovery
	for _, it := range items {
		k := kindOfKey(it.Key)
		if k&stray != 0 || (k&(kindClaim|kindLeaseTTL) != 0 && strings.HasSuffix(string(it.Key), id)) {
			t.Errorf("left once settled: %q (%v)", it.Key, k)
		}
	}
	if _, err := lease.Read(ctx, st, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}
