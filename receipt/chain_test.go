package receipt_test

import (
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal/waltest"
)

// TestChained_NewKeyCostsOneFsyncWait: by default a new receipt whose
// shards commit directly is created terminal in the one write that commits
// it (one log entry, one fsync), where the two-write flow (started + Begin,
// decision + terminal envelope) waits twice; the answer, the stored
// envelope and the replay are the same.
func TestChained_NewKeyCostsOneFsyncWait(t *testing.T) {
	for _, separate := range []bool{false, true} {
		e := newEnv(t)
		a := e.open(receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: separate}))
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
		if got, entries := after.Fsyncs-before.Fsyncs, after.Entries-before.Entries; got != want || entries != want {
			t.Fatalf("separate=%v: %d fsyncs for %d log entries, want %d for %d", separate, got, entries, want, want)
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

// TestChained_TornChainConvergesToOneExecution: the write of a new receipt
// reaches the log but not its fsync, and a power loss keeps a cut of it at
// offsets across its bytes. Whatever survives, the next incarnation
// converges to one execution, finished without a client retry where
// anything survived, and every later retry replays one envelope:
//   - by default the receipt is created terminal in the one write that
//     commits it: a cut keeps nothing (the retry executes it) or all of it;
//   - with intents (DeferResolution, which BeginCommit stages as two links),
//     a cut may also keep the first link alone: a started receipt with
//     every prepare durable, which maintenance commits (docs/design.md §12).
//
// Each state is reached by some cut.
func TestChained_TornChainConvergesToOneExecution(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	const stride = 97
	for _, tc := range []struct {
		name   string
		opts   receipt.Options
		states []string
	}{
		{"created-terminal", receipt.Options{Node: "node-0"}, []string{"lost", receipt.Terminal.String()}},
		{"staged-chain", receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{DeferResolution: true}), []string{"lost", receipt.Started.String(), receipt.Terminal.String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen, unsynced := waltest.StatesByCut(stride, func(keep int) (string, int) { return tornNewReceipt(t, tc.opts, keep) })
			for _, s := range tc.states {
				if seen[s] == 0 {
					t.Errorf("no cut of the %d unsynced bytes recovered to %q (seen %v)", unsynced, s, seen)
				}
			}
			if len(seen) != len(tc.states) {
				t.Errorf("cuts recovered to %v, want only %v", seen, tc.states)
			}
			t.Logf("%d unsynced bytes, states by cut: %v", unsynced, seen)
		})
	}
}

// tornNewReceipt executes a new keyed request whose write is not fsynced,
// keeps keep of its unsynced bytes through a power loss, and checks that
// the next incarnation converges to one execution. It reports the state
// recovered and how many bytes the write left unsynced.
func tornNewReceipt(t *testing.T, opts receipt.Options, keep int) (state string, unsynced int) {
	e := newEnv(t)
	a := e.open(opts)
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
	ans, err := a.Execute(ctx, r)
	disarm()
	if err != nil || ans.Terminal || ans.Status != 503 || ans.Code != "idempotency_receipt_pending" {
		t.Fatalf("Execute whose write was not fsynced: %+v, %v; want 503 idempotency_receipt_pending", ans, err)
	}
	a.Close()
	unsynced = e.crashKeeping(memfs.KeepUnsynced(keep))
	e.openDB()
	b := e.open(opts)
	state = "lost"
	if receiptExists(t, e.db, id) {
		rec, _ := record(t, e.db, id)
		state = rec.State.String()
	}
	if _, err := b.MaintainOnce(ctx); err != nil {
		t.Fatalf("%s: maintenance: %v", state, err)
	}
	if state != "lost" {
		if rec, _ := record(t, e.db, id); rec.State != receipt.Terminal {
			t.Fatalf("maintenance left a torn write's %s receipt %v: it must finish without a retry", state, rec.State)
		}
	}
	first := mustExecute(t, b, r)
	wantCommitted(t, first, id, state != "lost")
	if got := counter(t, b, "t", "ctr"); got != 1 {
		t.Fatalf("%s: counter %d, want 1", state, got)
	}
	again := mustExecute(t, b, r)
	if !again.Terminal || !again.Replayed {
		t.Fatalf("%s: second retry %+v, want a replay", state, again)
	}
	wantSameEnvelope(t, again.Envelope, first.Envelope)
	if _, err := b.MaintainOnce(ctx); err != nil { // resolves deferred intents
		t.Fatalf("%s: maintenance: %v", state, err)
	}
	intents, err := e.db.Scan(ctx, []byte(store.NSIntent), store.PrefixEnd([]byte(store.NSIntent)), 1)
	if err != nil || len(intents) != 0 {
		t.Fatalf("%s: open intents %v, %v", state, intents, err)
	}
	return state, unsynced
}
