package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal/waltest"
)

// TestChained_NewKeyCostsOneFsyncWait: by default a new receipt's two
// writes (started + Begin, decision + terminal envelope) are chained into
// one fsync, and the answer, the stored envelope and the replay are those of
// the two-write flow.
func TestChained_NewKeyCostsOneFsyncWait(t *testing.T) {
	for _, separate := range []bool{false, true} {
		e := newEnv(t)
		a := e.open(receipt.Options{SeparateDecide: separate})
		createTable(t, a, "t")
		r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
		id := receipt.Bind("alice", "t", "k1")
		before := e.db.Stats().WAL
		first := mustExecute(t, a, r)
		after := e.db.Stats().WAL
		wantCommitted(t, first, id, false)
		want := uint64(1)
		if separate {
			want = 2
		}
		if got := after.Fsyncs - before.Fsyncs; got != want || after.Entries-before.Entries != 2 {
			t.Fatalf("separate=%v: %d fsyncs for %d log entries, want %d for 2", separate, got, after.Entries-before.Entries, want)
		}
		again := mustExecute(t, a, r)
		wantCommitted(t, again, id, true)
		wantSameEnvelope(t, again.Envelope, first.Envelope)
		if got := counter(t, a, "t", "ctr"); got != 1 {
			t.Fatalf("separate=%v: counter %d, want 1", separate, got)
		}
		if a.Active().Len() != 0 {
			t.Fatalf("separate=%v: %d receipts left in the active set", separate, a.Active().Len())
		}
	}
}

// TestChained_TornChainConvergesToOneExecution: the chained write of a new
// receipt reaches the log but not its fsync, and a power loss keeps a cut of
// it at offsets across its bytes. Whatever survives — nothing, the started
// receipt alone (the first link: the documents are written by the decision
// link, so no prepare is durable without it), or the whole chain — the next
// incarnation converges to at most one execution: a started receipt is
// finished by maintenance without a client retry, as presumed aborted
// (DESIGN §12: only a transaction with every prepare durable may be
// committed by recovery), a lost one is executed by the retry, and every
// later retry replays one envelope. Each of the three states is reached by
// some cut.
func TestChained_TornChainConvergesToOneExecution(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	const stride = 97
	// run cuts the chain's unsynced write after keep bytes and reports the
	// state recovered and how many bytes the chain left unsynced.
	run := func(keep int) (state string, unsynced int) {
		e := newEnv(t)
		a := e.open(receipt.Options{Node: "node-0"})
		createTable(t, a, "t")
		r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
		id := receipt.Bind("alice", "t", "k1")
		disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
		ans, err := a.Execute(ctx, r)
		disarm()
		if err != nil || ans.Terminal || ans.Status != 503 || ans.Code != "idempotency_receipt_pending" {
			t.Fatalf("Execute whose chain was not fsynced: %+v, %v; want 503 idempotency_receipt_pending", ans, err)
		}
		a.Close()
		unsynced = e.crashKeeping(memfs.KeepUnsynced(keep))
		e.openDB()
		b := e.open(receipt.Options{Node: "node-0"})
		switch {
		case !receiptExists(t, e.db, id):
			state = "lost"
		default:
			rec, _ := record(t, e.db, id)
			state = rec.State.String()
		}
		if _, err := b.MaintainOnce(ctx); err != nil {
			t.Fatalf("%s: maintenance: %v", state, err)
		}
		if state == "started" {
			if rec, _ := record(t, e.db, id); rec.State != receipt.Terminal {
				t.Fatalf("maintenance left a torn chain's started receipt %v: it must finish without a retry", rec.State)
			}
		}
		first := mustExecute(t, b, r)
		applied := 1
		if state == "started" {
			applied = 0
			if !first.Terminal || !first.Replayed || first.Status != 409 || first.Code != "transaction_aborted" || first.RetryWith != "new_key" {
				t.Fatalf("retry of a torn chain's started receipt: %+v; want its presumed abort replayed", first)
			}
		} else {
			wantCommitted(t, first, id, state != "lost")
		}
		if got := counter(t, b, "t", "ctr"); got != applied {
			t.Fatalf("%s: counter %d, want %d", state, got, applied)
		}
		again := mustExecute(t, b, r)
		if !again.Terminal || !again.Replayed {
			t.Fatalf("%s: second retry %+v, want a replay", state, again)
		}
		wantSameEnvelope(t, again.Envelope, first.Envelope)
		intents, err := e.db.Scan(ctx, []byte(engine.NSIntent), engine.PrefixEnd([]byte(engine.NSIntent)), 1)
		if err != nil || len(intents) != 0 {
			t.Fatalf("%s: open intents %v, %v", state, intents, err)
		}
		return state, unsynced
	}
	seen, unsynced := waltest.StatesByCut(stride, run)
	for _, s := range []string{"lost", receipt.Started.String(), receipt.Terminal.String()} {
		if seen[s] == 0 {
			t.Errorf("no cut of the %d unsynced bytes recovered to %q (seen %v)", unsynced, s, seen)
		}
	}
	t.Logf("%d unsynced bytes, states by cut: %v", unsynced, seen)
}
