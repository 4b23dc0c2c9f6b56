package twopc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal/waltest"
)

// outcomeOnce is what the tests' `with` records for CommitOnce, as the
// receipt layer records its terminal receipt: the outcome, under the
// condition that none is recorded yet.
func outcomeOnce(got *[]byte) func(result []byte, b *store.Batch) error {
	return func(result []byte, b *store.Batch) error {
		*got = result
		b.Absent(withKey).Put(withKey, result)
		return nil
	}
}

// TestCommitOnce_OneWriteAndNoRecordOfItsOwn: CommitOnce is one log entry
// and one fsync holding the batch and with's writes. It leaves no intent,
// no coordinator record and no decision: Lookup knows nothing, recovery has
// nothing to do under either policy, and the outcome is with's. A second
// commit of the same transaction is refused by with's own condition, named
// in the error (the receipt layer answers from it), and writes nothing.
func TestCommitOnce_OneWriteAndNoRecordOfItsOwn(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "counts engine.DB's log entries")
	ctx := context.Background()
	n := newNode(t, twopc.Options{})
	work.seed(t, n)
	wantRes, _ := json.Marshal(wantResult)
	var result []byte
	before := n.edb.Stats().WAL
	v, ok, err := n.coord.CommitOnce(ctx, txnFor("tx", n.plan(t, work.body())), outcomeOnce(&result))
	if err != nil || !ok || v == 0 {
		t.Fatalf("CommitOnce: %d, %v, %v", v, ok, err)
	}
	after := n.edb.Stats().WAL
	if f, e := after.Fsyncs-before.Fsyncs, after.Entries-before.Entries; f != 1 || e != 1 {
		t.Fatalf("CommitOnce took %d fsyncs for %d log entries, want 1 for 1", f, e)
	}
	if string(result) != string(wantRes) {
		t.Fatalf("with got result %s, want %s", result, wantRes)
	}
	if it, err := n.db.Get(ctx, withKey); err != nil || string(it.Value) != string(wantRes) || it.Version != v {
		t.Fatalf("with's write: %+v, %v; want %s at %d", it, err, wantRes, v)
	}
	if got := work.state(t, n); got != "new" {
		t.Fatalf("state %s after CommitOnce", got)
	}
	assertNoIntentsOrRecords(t, n.db)
	if st, err := n.coord.Lookup(ctx, "tx"); err != nil || st.Begun || st.Decision != nil {
		t.Fatalf("Lookup: %+v, %v; want nothing known", st, err)
	}
	for _, p := range policies {
		if st, err := n.coord.Recover(ctx, twopc.RecoverOptions{Undecided: p.policy}); err != nil || st != (twopc.RecoverStats{}) {
			t.Fatalf("recover (%s) = %+v, %v; want nothing to do", p.name, st, err)
		}
	}
	dumped := dump(t, n.db)
	_, ok, err = n.coord.CommitOnce(ctx, txnFor("tx", n.plan(t, work.body())), outcomeOnce(&result))
	if key, named := store.FailedKey(err); ok || !named || string(key) != string(withKey) {
		t.Fatalf("second CommitOnce: ok=%v, %v; want nothing written, with's condition on %q failed", ok, err, withKey)
	}
	if dump(t, n.db) != dumped {
		t.Fatal("a second CommitOnce of a recorded outcome wrote")
	}
	n.crashReopen(t)
	if got := work.state(t, n); got != "new" {
		t.Fatalf("state %s after a crash", got)
	}
}

// TestCommitOnce_LostRaceNamesWithsCondition: two commits of one
// transaction race (two nodes, one key): the loser staged its documents
// before the winner wrote them, so its documents' conditions fail as well
// as with's; the error names with's (with's conditions come first), which
// is what the receipt layer answers a lost race from, at once: the loser
// makes one try, not a contended retry (a round trip more on etcd), and
// writes nothing.
func TestCommitOnce_LostRaceNamesWithsCondition(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, twopc.Options{})
	work.seed(t, n)
	var won, lost []byte
	var dumped string
	tries := 0
	_, ok, err := n.coord.CommitOnce(ctx, txnFor("race", n.plan(t, work.body())), func(result []byte, b *store.Batch) error {
		tries++
		// Staged: the winner commits now, between the loser's reads and its
		// write (once: a contended loser would stage and call with again).
		if dumped == "" {
			if _, ok, err := n.coord.CommitOnce(ctx, txnFor("race", n.plan(t, work.body())), outcomeOnce(&won)); !ok || err != nil {
				t.Fatalf("the winner's CommitOnce: %v, %v", ok, err)
			}
			dumped = dump(t, n.db)
		}
		return outcomeOnce(&lost)(result, b)
	})
	if key, named := store.FailedKey(err); ok || !named || string(key) != string(withKey) {
		t.Fatalf("the loser's CommitOnce: ok=%v, %v; want with's condition on %q failed", ok, err, withKey)
	}
	if tries != 1 {
		t.Fatalf("the loser tried %d times, want once", tries)
	}
	if dump(t, n.db) != dumped {
		t.Fatal("the loser wrote")
	}
	if got := work.state(t, n); got != "new" {
		t.Fatalf("state %s, want the winner's commit alone", got)
	}
}

// TestCommitOnce_NothingWrittenWhenItCannot: a participant that cannot
// commit directly, deferred resolution, a conflicting open intent, a "no"
// vote, and a transaction already begun or already decided all leave the
// store untouched with ok=false and no error, so that the caller's Begin
// and Decide handle them. A failed condition of with's, which Begin would
// fail too, leaves it untouched with the store's ConditionError.
func TestCommitOnce_NothingWrittenWhenItCannot(t *testing.T) {
	ctx := context.Background()
	n := nodeWithHolder(t)
	decided := txnFor("D", n.plan(t, `{"inserts":[{"id":"d","doc":{}}]}`))
	if res, err := n.coord.Begin(ctx, decided, nil); err != nil || !res.Prepared {
		t.Fatalf("begin D: %+v %v", res, err)
	}
	if _, won, err := n.coord.DecideOrLearn(ctx, "D", decided.Participants, twopc.Aborted{Code: "test", Message: "aborted"}, nil); err != nil || !won {
		t.Fatalf("decide D: %v %v", won, err)
	}
	_, deferring := table.NewWithCoordinator(n.db, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
	for _, c := range []struct {
		name  string
		coord *twopc.Coordinator
		txn   twopc.Txn
		with  *store.Batch
	}{
		{"staged participants", n.coord, stagedTxnFor("T", n.plan(t, bodyFree)), nil},
		{"deferred resolution", deferring, txnFor("T", n.plan(t, bodyFree)), nil},
		{"open intent", n.coord, txnFor("T", n.plan(t, bodyConflicting)), nil},
		{"no vote", n.coord, txnFor("T", n.plan(t, bodyWrongType)), nil},
		{"begun", n.coord, txnFor("H", n.plan(t, bodyFree)), nil},
		{"decided", n.coord, txnFor("D", n.plan(t, bodyFree)), nil},
	} {
		wroteNothing(t, n, c.name, func() (bool, error) {
			_, ok, err := c.coord.CommitOnce(ctx, c.txn, func(_ []byte, b *store.Batch) error {
				b.Merge(c.with).Put(withKey, []byte("outcome"))
				return nil
			})
			return ok, err
		})
	}
	before := dump(t, n.db)
	_, ok, err := n.coord.CommitOnce(ctx, txnFor("T", n.plan(t, bodyFree)), func(_ []byte, b *store.Batch) error {
		b.Present([]byte("no/such/key")).Put(withKey, []byte("outcome"))
		return nil
	})
	if key, named := store.FailedKey(err); ok || !named || string(key) != "no/such/key" {
		t.Errorf("condition of with: ok=%v, %v; want nothing written and its ConditionError", ok, err)
	}
	if dump(t, n.db) != before {
		t.Error("condition of with: the store changed")
	}
}

// TestCommitOnce_TornWriteIsAllOrNothing: CommitOnce written but never
// fsynced, then cut by a power loss at offsets across its bytes, recovers
// to nothing (documents as they were, with's outcome absent) or to all of
// it, never a part; both states are reached, and no intent or record is
// left under either recovery policy.
func TestCommitOnce_TornWriteIsAllOrNothing(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "a power loss needs engine.DB")
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	ctx := context.Background()
	const stride = 61
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) {
			run := func(keep int) (state string, unsynced int) {
				n := newNode(t, twopc.Options{})
				work.seed(t, n)
				var result []byte
				disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
				_, ok, err := n.coord.CommitOnce(ctx, txnFor("tx", n.plan(t, work.body())), outcomeOnce(&result))
				disarm()
				if ok || !errors.Is(err, twopc.ErrOutcomeUnknown) || !errors.Is(err, store.ErrAmbiguous) {
					t.Fatalf("CommitOnce whose fsync failed: ok=%v, %v; want ErrOutcomeUnknown", ok, err)
				}
				unsynced = waltest.Total(n.disk.Crash(n.edb, memfs.KeepUnsynced(keep)))
				n.open(t)
				if _, err := n.coord.Recover(ctx, twopc.RecoverOptions{Undecided: pol.policy}); err != nil {
					t.Fatal(err)
				}
				_, withErr := n.db.Get(ctx, withKey)
				docs := work.state(t, n)
				switch {
				case withErr == nil && docs == "new":
					state = "committed"
				case errors.Is(withErr, store.ErrNotFound) && docs == "old":
					state = "nothing"
				default:
					t.Fatalf("recovered documents %s with outcome %v: a part of one write", docs, withErr)
				}
				assertNoIntentsOrRecords(t, n.db)
				return state, unsynced
			}
			seen, unsynced := waltest.StatesByCut(stride, run)
			for _, s := range []string{"nothing", "committed"} {
				if seen[s] == 0 {
					t.Errorf("no cut of the %d unsynced bytes recovered to %q (seen %v)", unsynced, s, seen)
				}
			}
			t.Logf("%d unsynced bytes, states by cut: %v", unsynced, seen)
		})
	}
}
