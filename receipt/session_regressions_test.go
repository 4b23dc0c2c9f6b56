package receipt_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// The seed's long-term regressions (SEED.txt), for interactive sessions:
// the heartbeat, a bare DecisionConflict, a failed abort publication and
// an ambiguous creation, on a session's commit. (The independent
// supervisor and the active set are in session_test.go, the successor that
// finishes a commit without the client in TestSession_SuccessorFinishesRequestedCommit,
// the process-level restart in cmd/idemd/session_e2e_test.go.)

// commitReq is alice's commit of session id under key.
func commitReq(id, key string) receipt.CommitRequest {
	return receipt.CommitRequest{Principal: alice, Session: id, Key: key}
}

// TestHeartbeat_OpenSessionOutlivesTwoLeasePeriods: an open session held
// for more than two lease TTLs — across one transient lease-store failure
// — keeps its lease through the supervisor: another node may not presume
// it aborted, and it then stages and commits.
func TestHeartbeat_OpenSessionOutlivesTwoLeasePeriods(t *testing.T) {
	e, _, a, n1 := twoNodes(t)
	id := begin(t, a, alice, time.Minute)
	keepsLease(t, e, a, n1, id, 15, 4)
	stage(t, a, id, "t", `{"inserts":[{"id":"late","doc":{}}]}`)
	if ans := commit(t, a, id, ""); ans.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("commit after two lease periods: %+v", ans)
	}
	if !docExists(t, a, "t", "late") {
		t.Fatal("the commit did not apply")
	}
}

// TestAmbiguity_BareDecisionConflictKeepsSessionCommitStarted: a commit
// whose decision write is refused by a failed condition whose winner
// cannot be read is not proven aborted: 503 pending, the commit's receipt
// stays started, the session stays committed (never reopened, never
// presumed aborted), and maintenance publishes the real outcome, which
// the client's retry replays. (A decision is written apart from Begin on
// the two-write path only: twoWrites.)
func TestAmbiguity_BareDecisionConflictKeepsSessionCommitStarted(t *testing.T) {
	e, hs, a, sid, id := counterSessionOnHooks(t, twoWrites(receipt.Options{}))
	bareDecisionConflict(hs, id)
	wantPending(t, commit(t, a, sid, ""), id)
	if rec, _ := record(t, e.db, id); rec.State != receipt.Started {
		t.Fatalf("the commit's receipt is %v, want started", rec.State)
	}
	if info, _ := a.SessionInfo(ctx, alice, sid); info.State != receipt.SessionCommitted {
		t.Fatalf("the session is %v, want committed (its commit requested)", info.State)
	}
	hs.clear()
	if ms, err := a.MaintainOnce(ctx); err != nil || ms.Terminal != 1 || ms.SessionsEnded != 0 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	ans := commit(t, a, sid, "")
	if !ans.Replayed || ans.Outcome != receipt.OutcomeCommitted || counter(t, a, "t", "ctr") != 1 {
		t.Fatalf("retry after maintenance: %+v, counter %d", ans, counter(t, a, "t", "ctr"))
	}
}

// TestAbort_SessionConflictPublicationFailureRecoversExactEnvelope: a
// commit refused with transaction_conflict whose terminal write fails
// after the abort decision is durable is published later by maintenance,
// and every replay is exactly the envelope an undisturbed conflicting
// commit gets.
func TestAbort_SessionConflictPublicationFailureRecoversExactEnvelope(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.Options{})
	createTable(t, a, "t")
	mustExecute(t, a, req(alice, "t", "seed", mustBatch(t, `{"inserts":[{"id":"x","doc":{"n":1}}]}`)))
	conflicted := func(key string) string {
		sid := begin(t, a, alice, time.Minute)
		stage(t, a, sid, "t", `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`)
		mustExecute(t, a, req(alice, "t", "meanwhile-"+key, mustBatch(t, `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`)))
		return sid
	}
	ref := commit(t, a, conflicted("ref"), "k-ref")
	if !ref.Terminal || ref.Code != code.TransactionConflict {
		t.Fatalf("reference: %+v", ref)
	}
	sid := conflicted("k1")
	id := receipt.Bind(alice, "", "k1")
	disarm := testsupport.Arm(t, fault.ReceiptTerminalBefore, `1*return("eio")`)
	ans, err := a.CommitSession(ctx, commitReq(sid, "k1"))
	disarm()
	if err == nil && ans.Terminal {
		t.Fatalf("commit with a failing terminal write: %+v", ans)
	}
	if st, err := a.Coordinator().Lookup(ctx, id); err != nil || st.Decision == nil {
		t.Fatalf("no durable abort decision: %+v %v", st, err)
	}
	if ms, err := a.MaintainOnce(ctx); err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	want := ref.Envelope
	want.TxnID = id
	for i := 0; i < 2; i++ {
		replay, err := a.CommitSession(ctx, commitReq(sid, "k1"))
		if err != nil || !replay.Replayed {
			t.Fatalf("replay %d: %+v %v", i, replay, err)
		}
		wantSameEnvelope(t, replay.Envelope, want)
	}
	if got := counter(t, a, "t", "x"); got != 3 {
		t.Fatalf("x = %d, want 3: the seed and the two keyed increments, no session", got)
	}
}

// TestCreation_AmbiguousCommitWriteIsTypedPendingAndConverges: the write
// that publishes a commit's receipt (and ends the session) has an unknown
// outcome: the first answer is typed 503 pending, and a retry converges on
// one execution — the commit if the write landed; session_aborted never,
// since a write that did not land left the session open, and the retry
// commits it. On both routes: the write is the one that commits, or Begin.
func TestCreation_AmbiguousCommitWriteIsTypedPendingAndConverges(t *testing.T) {
	for _, c := range []struct {
		landed bool
		route  string
		o      receipt.Options
	}{{true, "one write", receipt.Options{}}, {false, "one write", receipt.Options{}},
		{true, "two writes", twoWrites(receipt.Options{})}, {false, "two writes", twoWrites(receipt.Options{})}} {
		landed := c.landed
		t.Run(fmt.Sprintf("%s/landed=%v", c.route, landed), func(t *testing.T) {
			e, hs, a, sid, id := counterSessionOnHooks(t, c.o)
			hs.onApply(func(ctx context.Context, b *store.Batch) (store.Version, error, bool) {
				if !putsKey(b, store.NSReceipt.Key(id)) {
					return 0, nil, false
				}
				hs.clear()
				if landed {
					if _, err := e.db.Apply(ctx, b); err != nil {
						return 0, err, true
					}
				}
				return 0, fmt.Errorf("%w: fsync failed", store.ErrAmbiguous), true
			})
			wantPending(t, commit(t, a, sid, ""), id)
			ans := commit(t, a, sid, "")
			if !ans.Terminal || ans.Outcome != receipt.OutcomeCommitted {
				t.Fatalf("retry: %+v", ans)
			}
			wantSameEnvelope(t, commit(t, a, sid, "").Envelope, ans.Envelope)
			if got := counter(t, a, "t", "ctr"); got != 1 {
				t.Fatalf("counter %d, want 1", got)
			}
		})
	}
}

// TestSession_CommitAfterTheTableWasDroppedIsNotApplied: a table the
// session staged on was dropped and created again before the commit: the
// commit is terminal not_applied table_not_found, replayed as is, and
// nothing of it reaches the new table.
func TestSession_CommitAfterTheTableWasDroppedIsNotApplied(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.Options{})
	createTable(t, a, "t")
	sid := begin(t, a, alice, time.Minute)
	stage(t, a, sid, "t", `{"inserts":[{"id":"x","doc":{}}]}`)
	if err := a.Tables().Drop(ctx, alice, "t"); err != nil {
		t.Fatal(err)
	}
	createTable(t, a, "t")
	first := commit(t, a, sid, "")
	if !first.Terminal || first.Code != code.TableNotFound || first.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("commit: %+v", first)
	}
	wantSameEnvelope(t, commit(t, a, sid, "").Envelope, first.Envelope)
	if docExists(t, a, "t", "x") {
		t.Fatal("the staged insert reached the new table")
	}
	_, _, err := a.StageSession(ctx, alice, sid, one("t", mustBatch(t, `{"deletes":["x"]}`)))
	wantCode(t, err, code.SessionCommitted)
}

// counterSessionOnHooks opens a service on a hookStore (its writes can be
// failed or held) with table "t", and begins a session of alice that
// stages one $inc of ctr; id is its commit's receipt (keyless commit).
func counterSessionOnHooks(t *testing.T, o receipt.Options) (e *env, hs *hookStore, a *receipt.Service, sid, id string) {
	t.Helper()
	e = newEnv(t)
	hs = &hookStore{Store: e.db}
	a = e.openOn(hs, o)
	createTable(t, a, "t")
	sid = begin(t, a, alice, time.Minute)
	stage(t, a, sid, "t", `{"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`)
	return e, hs, a, sid, receipt.Bind(alice, "", sid)
}
