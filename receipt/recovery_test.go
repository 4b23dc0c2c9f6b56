package receipt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// TestRecovery_SuccessorCompletesWithoutClientRetry: the owner dies after
// execution started (Begin durable, no decision). A successor's maintenance
// — a new incarnation of the same node at once, another node only after the
// lease expired — finishes the receipt as committed with nobody retrying the
// request; the batch applied exactly once and a later retry replays the
// stored envelope.
func TestRecovery_SuccessorCompletesWithoutClientRetry(t *testing.T) {
	cases := []struct {
		name  string
		node  string
		crash bool
	}{
		{"same node new incarnation", "node-0", false},
		{"same node after engine crash", "node-0", true},
		{"other node after lease expiry", "node-1", false},
		{"other node after engine crash and lease expiry", "node-1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{SeparateDecide: true})) // to crash between the two writes
			createTable(t, a, "t")
			r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
			id := receipt.Bind("alice", "t", "k1")

			disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
			if _, err := a.Execute(ctx, r); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("Execute: %v, want the injected crash", err)
			}
			disarm()
			// Started with its 2PC record (not its request: a started
			// receipt is reconciled, never executed again).
			if rec, _ := record(t, e.db, id); rec.State != receipt.Started || len(rec.Request) != 0 {
				t.Fatalf("after the crash the receipt is %v (request %d bytes), want started without its request", rec.State, len(rec.Request))
			}
			if st, err := a.Coordinator().Lookup(ctx, id); err != nil || !st.Begun || st.Decision != nil {
				t.Fatalf("after the crash the transaction is %+v (%v), want begun and undecided", st, err)
			}
			a.Close()
			if tc.crash {
				e.crash()
			}

			b := e.open(receipt.Options{Node: tc.node})
			if tc.node != "node-0" {
				// Before expiry another node must not adopt.
				st, err := lease.Read(ctx, e.db, id)
				if err != nil || lease.MayAdopt(st, b.Owner(), e.clock.Now()) {
					t.Fatalf("node-1 may adopt a live lease: %+v %v", st, err)
				}
				ms, err := b.MaintainOnce(ctx)
				if err != nil || ms.Adopted != 0 || ms.Terminal != 0 || ms.Deferred == 0 {
					t.Fatalf("maintenance before expiry: %+v %v, want deferred", ms, err)
				}
				if rec, _ := record(t, e.db, id); rec.State != receipt.Started {
					t.Fatalf("receipt %v before expiry", rec.State)
				}
				e.clock.Advance(ttl + time.Second)
			} else if b.Owner().Incarnation <= 1 {
				t.Fatalf("successor incarnation %d, want > 1", b.Owner().Incarnation)
			}

			ms, err := b.MaintainOnce(ctx)
			if err != nil || ms.Adopted != 1 || ms.Terminal != 1 {
				t.Fatalf("successor maintenance: %+v %v, want 1 adopted and made terminal", ms, err)
			}
			// Terminal without any client retry.
			v := view(t, b, "alice", "t", "k1")
			if v.State != receipt.Terminal || v.Envelope == nil {
				t.Fatalf("receipt %+v, want terminal", v)
			}
			if env := *v.Envelope; env.Status != 201 || env.Outcome != receipt.OutcomeCommitted || string(env.Result) != incResult || env.TxnID != id {
				t.Fatalf("stored envelope %+v (result %s)", env, env.Result)
			}
			if got := counter(t, b, "t", "ctr"); got != 1 {
				t.Fatalf("counter %d, want 1", got)
			}
			if !docExists(t, b, "t", "doc-k1") {
				t.Fatal("inserted doc missing")
			}
			if st := b.Stats(); st.Executed != 0 || st.Recovered != 1 || st.Adopted != 1 {
				t.Fatalf("successor stats %+v: it must finish, not execute again", st)
			}
			if st, _ := lease.Read(ctx, e.db, id); st.ClaimVersion != 0 {
				t.Fatalf("terminal receipt still has a lease: %+v", st)
			}
			if b.Active().Len() != 0 {
				t.Fatalf("active set %d after recovery", b.Active().Len())
			}
			// A later retry replays the identical envelope.
			again := mustExecute(t, b, r)
			wantCommitted(t, again, id, true)
			wantSameEnvelope(t, again.Envelope, *v.Envelope)
			if got := counter(t, b, "t", "ctr"); got != 1 {
				t.Fatalf("counter %d after replay, want 1", got)
			}
		})
	}
}

// TestRecovery_SuccessorExecutesPendingReceiptFromStoredRequest: a receipt
// left pending (the executor was full) when its owner died is executed by a
// successor from the canonical request stored in it.
func TestRecovery_SuccessorExecutesPendingReceiptFromStoredRequest(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{Node: "node-0", ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	createTable(t, a, "t")
	g, ch := occupyExecutor(t, a, hs, "ctr-busy")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	ans := mustExecute(t, a, r)
	if ans.Status != 429 || ans.Code != "overloaded" || ans.State != receipt.Pending || !ans.Retryable || ans.RetryWith != "same_key" {
		t.Fatalf("executor full: %+v, want 429 overloaded pending", ans)
	}
	g.open()
	awaitResult(t, ch)
	a.Close()

	b := e.open(receipt.Options{Node: "node-0"})
	ms, err := b.MaintainOnce(ctx)
	if err != nil || ms.Adopted != 1 || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	if b.Stats().Executed != 1 {
		t.Fatalf("successor executed %d", b.Stats().Executed)
	}
	id := receipt.Bind("alice", "t", "k1")
	wantCommitted(t, mustExecute(t, b, r), id, true)
	if got := counter(t, b, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d, want 1", got)
	}
}

// TestRecovery_PresumeAbortOptionAbortsUndecided: with Options.PresumeAbort
// recovery aborts a begun, undecided transaction instead of committing it,
// through the same create-if-absent decision, and nothing applies.
func TestRecovery_PresumeAbortOptionAbortsUndecided(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.WithTestKnobs(receipt.Options{PresumeAbort: true}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	if _, err := a.Execute(ctx, r); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Execute: %v", err)
	}
	disarm()
	a.Close()
	b := e.open(receipt.Options{PresumeAbort: true})
	if ms, err := b.MaintainOnce(ctx); err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	ans := mustExecute(t, b, r)
	if !ans.Replayed || ans.Status != 409 || ans.Code != "transaction_aborted" || ans.Outcome != receipt.OutcomeAborted || ans.TxnID != id {
		t.Fatalf("replay %+v", ans)
	}
	if counter(t, b, "t", "ctr") != 0 || docExists(t, b, "t", "doc-k1") {
		t.Fatal("a presumed-aborted batch applied")
	}
}
