package receipt_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/receipt"
)

// TestOnceRace_TwoNodesOneKeyOneWinner: on a shared store that does not
// chain (as etcd), a keyed request is one write that publishes nothing
// until it commits, so a node sees no receipt for a key in flight on
// another node, and both send their write (docs/etcd.md, "One write per
// keyed request"). Both writes reach the store together here, each staged
// before either lands. The receipt's absence condition lets exactly one
// win; the loser's write fails on it, brings back the winner's terminal
// receipt (store.ConditionError.Value) and answers from it — the same
// envelope, replayed, or the mismatch for another batch — without a Begin
// or a read: two writes in all, one execution.
func TestOnceRace_TwoNodesOneKeyOneWinner(t *testing.T) {
	for _, c := range []struct {
		name    string
		another bool // the second node's batch differs from the first's
	}{{"same batch", false}, {"another batch", true}} {
		t.Run(c.name, func(t *testing.T) { onceRace(t, c.another) })
	}
}

func onceRace(t *testing.T, another bool) {
	e := newEnv(t)
	st := newRemoteStore()
	nodes := []*receipt.Service{e.openOn(st, receipt.Options{Node: "node-a"}), e.openOn(st, receipt.Options{Node: "node-b"})}
	createTable(t, nodes[0], "t")
	for _, svc := range nodes { // each caches the table's metadata: the race is of two creates
		mustExecute(t, svc, *insertBatch(t, "warm-"+svc.Owner().Node))
	}
	// The next two writes wait for each other: both creates are staged
	// before either is applied.
	var both sync.WaitGroup
	both.Add(2)
	var held atomic.Int32
	st.gate = func() {
		if held.Add(1) <= 2 {
			both.Done()
			both.Wait()
		}
	}
	w0, r0 := st.trips()
	// Inserts (their staging reads nothing): the loser's own conditions on
	// its documents fail too when it inserts what the winner did.
	batches := []receipt.Request{*insertBatch(t, "k"), *insertBatch(t, "k")}
	if another {
		batches[1].Batch = mustBatch(t, `{"inserts":[{"id":"doc-other","doc":{"n":2}}]}`)
	}
	chans := []<-chan result{goExecute(nodes[0], batches[0]), goExecute(nodes[1], batches[1])}
	var answers [2]receipt.Answer
	for i, ch := range chans {
		res := awaitResult(t, ch)
		if res.err != nil {
			t.Fatalf("node %d: %v", i, res.err)
		}
		answers[i] = res.a
	}
	w1, r1 := st.trips()
	if w1-w0 != 2 || r1-r0 != 0 {
		t.Fatalf("the race took %d writes and %d reads, want one write each and no read", w1-w0, r1-r0)
	}
	// The loser is the one that answers from the winner's receipt.
	loses := func(a receipt.Answer) bool {
		return a.Replayed && !another || a.Code == "idempotency_key_mismatch" && another
	}
	win, lose := answers[0], answers[1]
	if loses(win) {
		win, lose = lose, win
	}
	if !win.Terminal || win.Replayed || win.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("the winner: %+v", win.Envelope)
	}
	if !loses(lose) {
		t.Fatalf("the loser: %+v, want the winner's answer replayed, or the mismatch for another batch", lose.Envelope)
	}
	if !another {
		wantSameEnvelope(t, lose.Envelope, win.Envelope)
	}
	if got := nodes[0].Stats().Executed + nodes[1].Stats().Executed; got != 2+1 {
		t.Fatalf("executed %d batches, want the two warm-ups and one of the race", got)
	}
	if docExists(t, nodes[0], "t", "doc-k") == docExists(t, nodes[0], "t", "doc-other") {
		t.Fatal("the inserts of both batches, or of neither, were applied")
	}
}
