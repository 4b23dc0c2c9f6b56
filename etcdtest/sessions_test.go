package etcdtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// Interactive sessions run on etcd unchanged (docs/design.md §14): one node holds
// a session; another node is refused its steps (held elsewhere) while the
// holder lives, replays its commit, and presumes it aborted once the
// holder's lease expired; a commit requested before the holder died is
// finished by the other node.

func stageOne(t *testing.T, svc *receipt.Service, id, batch string) {
	t.Helper()
	b, err := table.DecodeBatch([]byte(batch))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.StageSession(ctx, "alice", id, []receipt.TableBatch{{Table: "t", Batch: b}}); err != nil {
		t.Fatalf("stage: %v", err)
	}
}

const incCtr = `{"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

func TestSessions_TwoNodesOnEtcd(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	clock := lease.NewSim(t0)
	a := node(t, newStore(t, c, prefix), "node-0", clock, receipt.Options{})
	b := node(t, newStore(t, c, prefix), "node-1", clock, receipt.Options{})
	createTable(t, a)

	s, err := a.BeginSession(ctx, "alice", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stageOne(t, a, s.ID, incCtr)
	var elsewhere *receipt.HeldElsewhereError
	if _, _, err := b.StageSession(ctx, "alice", s.ID, nil); err == nil {
		t.Fatal("an empty step was accepted")
	}
	bb, _ := table.DecodeBatch([]byte(incCtr))
	if _, _, err := b.StageSession(ctx, "alice", s.ID, []receipt.TableBatch{{Table: "t", Batch: bb}}); !errors.As(err, &elsewhere) || elsewhere.Holder != a.Owner() {
		t.Fatalf("a step on the other node: %v, want held by %s", err, a.Owner())
	}
	if got := counter(t, b); got != 0 {
		t.Fatalf("counter %d before the commit", got)
	}
	first, err := a.CommitSession(ctx, receipt.CommitRequest{Principal: "alice", Session: s.ID})
	if err != nil || first.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("commit: %+v %v", first, err)
	}
	again, err := b.CommitSession(ctx, receipt.CommitRequest{Principal: "alice", Session: s.ID})
	if err != nil || !again.Replayed || string(again.Result) != string(first.Result) || again.TxnID != first.TxnID {
		t.Fatalf("replay on the other node: %+v %v", again, err)
	}
	if got := counter(t, b); got != 1 {
		t.Fatalf("counter %d, want 1", got)
	}

	// The holder dies with one session open and one commit requested and
	// started but undecided.
	open, _ := a.BeginSession(ctx, "alice", time.Minute)
	stageOne(t, a, open.ID, incCtr)
	pending, _ := a.BeginSession(ctx, "alice", time.Minute)
	stageOne(t, a, pending.ID, incCtr)
	a.Close()
	a2 := node(t, newStore(t, c, prefix), "node-0", clock, receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true}))
	// A commit requested, and started, by node-0's next incarnation,
	// which dies before the decision.
	requested, _ := a2.BeginSession(ctx, "alice", time.Minute)
	stageOne(t, a2, requested.ID, incCtr)
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	if _, err := a2.CommitSession(ctx, receipt.CommitRequest{Principal: "alice", Session: requested.ID}); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("commit with the crash armed: %v", err)
	}
	disarm()
	a2.Close()

	// Their holder is gone for good, but its leases (10 s) still run: the
	// other node may take nothing yet.
	if ms, err := b.MaintainOnce(ctx); err != nil || ms.SessionsEnded != 0 || ms.Terminal != 0 {
		t.Fatalf("maintenance before expiry: %+v %v, want nothing ended or finished", ms, err)
	}
	clock.Advance(11 * time.Second)
	ms, err := b.MaintainOnce(ctx)
	if err != nil || ms.SessionsEnded != 2 || ms.Terminal != 1 {
		t.Fatalf("maintenance after expiry: %+v %v, want 2 sessions presumed aborted and the requested commit finished", ms, err)
	}
	for _, id := range []string{open.ID, pending.ID} {
		if ans, _ := b.CommitSession(ctx, receipt.CommitRequest{Principal: "alice", Session: id}); ans.Code != code.SessionAborted {
			t.Fatalf("commit of a dead holder's open session: %+v", ans)
		}
	}
	if ans, err := b.CommitSession(ctx, receipt.CommitRequest{Principal: "alice", Session: requested.ID}); err != nil || !ans.Replayed || ans.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("the requested commit after its holder died: %+v %v", ans, err)
	}
	if got := counter(t, b); got != 2 {
		t.Fatalf("counter %d, want 2: the first commit and the requested one, once each", got)
	}
}
