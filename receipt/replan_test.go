package receipt_test

import (
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// Contended re-plans (replan.go): two nodes on one store that does not
// chain (as on etcd, every receipt is Begin then Decide, with intents in
// between), so the document latches of one node do not order the other's
// batches.

// hotNodes opens node-0 and node-1 on their own hookStores over one
// engine, as nodes of a shared store (ReplanContended=replan), on the real
// clock (a re-plan's backoff waits on it), with table "t".
func hotNodes(t *testing.T, replan bool) (hs0 *hookStore, n0, n1 *receipt.Service) {
	return hotNodesWith(t, receipt.Options{ReplanContended: replan})
}

// hotNodesWith is hotNodes with the options o (Node and Clock set here).
func hotNodesWith(t *testing.T, o receipt.Options) (hs0 *hookStore, n0, n1 *receipt.Service) {
	t.Helper()
	e := newEnv(t)
	hs0 = &hookStore{Store: e.db}
	o.Clock = lease.Real{}
	o0, o1 := o, o
	o0.Node, o1.Node = "node-0", "node-1"
	n0 = e.openOn(hs0, twoWrites(o0)) // holdIntent holds it between its two writes
	n1 = e.openOn(&hookStore{Store: e.db}, o1)
	createTable(t, n0, "t")
	return hs0, n0, n1
}

// holdIntent executes key on n0 up to its Begin, then holds its decision
// at a gate: its intent holds document ctr until the gate opens.
func holdIntent(t *testing.T, hs0 *hookStore, n0 *receipt.Service, key string) (*gate, <-chan result) {
	t.Helper()
	g := hs0.block(t, decisionKey(receipt.Bind(alice, "t", key)))
	done := goExecute(n0, req(alice, "t", key, incBatch(t, key, "ctr")))
	g.wait(t)
	return g, done
}

// TestReplan_AnotherNodesIntentIsWaitedOutNotRefused: node-1's keyed
// increment meets node-0's intent on the shared counter. It is re-planned
// (counted) until node-0 decides, then commits on the newer version: both
// commit, the counter is 2, and the retries replay both answers.
func TestReplan_AnotherNodesIntentIsWaitedOutNotRefused(t *testing.T) {
	hs0, n0, n1 := hotNodes(t, true)
	g, first := holdIntent(t, hs0, n0, "k0")
	second := goExecute(n1, req(alice, "t", "k1", incBatch(t, "k1", "ctr")))
	testsupport.Poll(t, "node-1 re-planning behind node-0's intent", testsupport.Patience, func() bool {
		return n1.Stats().Replans >= 2
	})
	g.open()
	// Each retry goes to the other node: the answer is the stored one.
	for _, k := range []struct {
		key   string
		done  <-chan result
		retry *receipt.Service
	}{{"k0", first, n1}, {"k1", second, n0}} {
		r := <-k.done
		if r.err != nil {
			t.Fatalf("Execute %s: %v", k.key, r.err)
		}
		id := receipt.Bind(alice, "t", k.key)
		wantCommitted(t, r.a, id, false)
		again := mustExecute(t, k.retry, req(alice, "t", k.key, incBatch(t, k.key, "ctr")))
		wantCommitted(t, again, id, true)
		wantSameEnvelope(t, again.Envelope, r.a.Envelope)
	}
	if got := counter(t, n1, "t", "ctr"); got != 2 {
		t.Fatalf("counter %d, want 2", got)
	}
	if st := n0.Stats(); st.Replans != 0 {
		t.Fatalf("node-0 re-planned %d times; it never met another's intent", st.Replans)
	}
}

// TestReplan_BoundedByContendedReplansMax: while node-0's intent stays,
// node-1 re-plans exactly ContendedReplansMax times and then answers
// pending, storing nothing: contention is never a stored refusal. A wait
// is bounded, never a hang; once the holder is done, the same key commits.
func TestReplan_BoundedByContendedReplansMax(t *testing.T) {
	hs0, n0, n1 := hotNodes(t, true)
	g, first := holdIntent(t, hs0, n0, "k0")
	wantContendedPending(t, n1, "k1")
	if got := n1.Stats().Replans; got != receipt.ContendedReplansMax {
		t.Fatalf("node-1 re-planned %d times, want ContendedReplansMax (%d)", got, receipt.ContendedReplansMax)
	}
	wantHolderThenRetryCommit(t, g, first, n1)
}

// TestReplan_OffThePendingAnswerComesAtOnce: without ReplanContended (one
// process owns the store, and an intent in the way belongs to a
// transaction whose outcome is not known yet) the same meeting is answered
// pending at once: no re-plan, nothing stored, and the retry commits.
func TestReplan_OffThePendingAnswerComesAtOnce(t *testing.T) {
	hs0, n0, n1 := hotNodes(t, false)
	g, first := holdIntent(t, hs0, n0, "k0")
	wantContendedPending(t, n1, "k1")
	if got := n1.Stats().Replans; got != 0 {
		t.Fatalf("node-1 re-planned %d times without ReplanContended", got)
	}
	wantHolderThenRetryCommit(t, g, first, n1)
}

// wantContendedPending executes key's increment on n behind an intent that
// stays and requires the contended answer: 503 pending, same key, no
// receipt stored.
func wantContendedPending(t *testing.T, n *receipt.Service, key string) {
	t.Helper()
	a := mustExecute(t, n, req(alice, "t", key, incBatch(t, key, "ctr")))
	if a.Terminal || a.Status != 503 || a.Code != "idempotency_receipt_pending" || a.RetryWith != "same_key" || a.Outcome != receipt.OutcomePending {
		t.Fatalf("%s behind an intent that stays: %+v, want pending with the same key", key, a.Envelope)
	}
	if st := n.Stats(); st.ContendedPending != 1 || st.Aborted != 0 {
		t.Fatalf("stats %+v, want one contended pending answer and no abort", st)
	}
	if _, err := n.Lookup(ctx, alice, "t", key); err == nil {
		t.Fatalf("%s: a receipt was stored for a contended batch", key)
	}
}

// wantHolderThenRetryCommit lets node-0's held batch finish, then retries
// k1 on n: it commits, and the counter holds both increments.
func wantHolderThenRetryCommit(t *testing.T, g *gate, first <-chan result, n *receipt.Service) {
	t.Helper()
	g.open()
	if r := <-first; r.err != nil || r.a.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("node-0: %+v %v, want committed", r.a.Envelope, r.err)
	}
	wantCommitted(t, mustExecute(t, n, req(alice, "t", "k1", incBatch(t, "k1", "ctr"))), receipt.Bind(alice, "t", "k1"), false)
	if got := counter(t, n, "t", "ctr"); got != 2 {
		t.Fatalf("counter %d, want 2: both batches once", got)
	}
}

// TestReplan_ARealConflictIsRefusedAtOnce: with ReplanContended on, a
// transform invalid on the document it finds ($inc on a string) is a real
// conflict, not contention: refused at once, no re-plan.
func TestReplan_ARealConflictIsRefusedAtOnce(t *testing.T) {
	_, n0, n1 := hotNodes(t, true)
	if a := mustExecute(t, n0, req(alice, "t", "k0", mustBatch(t, `{"inserts":[{"id":"ctr","doc":{"n":"x"}}]}`))); a.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("insert of ctr: %+v", a.Envelope)
	}
	a := mustExecute(t, n1, req(alice, "t", "k1", incBatch(t, "k1", "ctr")))
	if a.Outcome != receipt.OutcomeAborted || a.Code == "transaction_conflict" || n1.Stats().Replans != 0 {
		t.Fatalf("$inc on a string: %+v after %d re-plans, want aborted (not for contention) after none", a.Envelope, n1.Stats().Replans)
	}
}

// TestReplan_BoundedByTheLeaseItPublishes: no re-plan starts that would
// publish the receipt with less than SafetyMargin of its lease left. With
// a 1 s lease (0.8 s usable) node-1 stops before ContendedReplansMax,
// whose backoffs alone add up to more, and answers pending.
func TestReplan_BoundedByTheLeaseItPublishes(t *testing.T) {
	hs0, n0, n1 := hotNodesWith(t, receipt.Options{ReplanContended: true, LeaseTTL: time.Second, RenewInterval: 250 * time.Millisecond})
	g, first := holdIntent(t, hs0, n0, "k0")
	wantContendedPending(t, n1, "k1")
	if got := n1.Stats().Replans; got == 0 || got >= receipt.ContendedReplansMax {
		t.Fatalf("node-1 re-planned %d times, want some, fewer than ContendedReplansMax (%d): the lease ends them first", got, receipt.ContendedReplansMax)
	}
	wantHolderThenRetryCommit(t, g, first, n1)
}
