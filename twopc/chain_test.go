package twopc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal/waltest"
)

// withKey is what the tests' beginWith publishes, as the receipt layer
// publishes its receipt in a chain's first link.
var withKey = store.NSMeta.Key("test", "with")

// TestBeginCommit_OneWaitSameRecordsAsBeginAndDecide: the chained commit
// costs one fsync, applies the batch once, and leaves the store as Begin +
// DecideOrLearn would: the decision retained, no record, no intent. A
// staged chain logs its first link (record, intents) and its decision
// link; a direct chain logs the caller's first link and the decision
// link, and is one link when the caller has nothing to publish first.
func TestBeginCommit_OneWaitSameRecordsAsBeginAndDecide(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "chaining is engine.DB's")
	for _, mode := range chainModes {
		for _, with := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/with=%v", mode, with), func(t *testing.T) {
				ctx := context.Background()
				n := newNode(t, twopc.Options{})
				work.seed(t, n)
				txn := txnForChain(mode, "tx", n.plan(t, work.body()))
				result, _ := json.Marshal(wantResult)
				var beginWith *store.Batch
				if with {
					beginWith = new(store.Batch).Put(withKey, []byte("first"))
				}
				links := 2
				if mode == "direct" && !with {
					links = 1
				}
				before := n.edb.Stats().WAL
				ch, ok, err := n.coord.BeginCommit(ctx, txn, beginWith, nil)
				if err != nil || !ok {
					t.Fatalf("BeginCommit: %+v, %v, %v", ch, ok, err)
				}
				after := n.edb.Stats().WAL
				if f, e := after.Fsyncs-before.Fsyncs, after.Entries-before.Entries; f != 1 || e != uint64(links) {
					t.Fatalf("chained commit took %d fsyncs for %d log entries, want 1 for %d", f, e, links)
				}
				if string(ch.Result) != string(result) || ch.Decided != ch.Begun+store.Version(links-1) {
					t.Fatalf("chained at %+v, want result %s and %d consecutive versions", ch, result, links)
				}
				if got := work.state(t, n); got != "new" {
					t.Fatalf("state %s after the chained commit", got)
				}
				if o, err := n.coord.Learn(ctx, "tx"); err != nil || outcomeString(o) != outcomeString(twopc.Committed{Result: result}) {
					t.Fatalf("learn: %s, %v", outcomeString(o), err)
				}
				assertNoIntentsOrRecords(t, n.db)
				// A retry re-plans from scratch: the decided transaction is never
				// chained again, and Begin returns its decision without writing.
				dumped := dump(t, n.db)
				retry := txnForChain(mode, "tx", n.plan(t, work.body()))
				if _, ok, err := n.coord.BeginCommit(ctx, retry, nil, nil); ok || err != nil {
					t.Fatalf("BeginCommit of a decided txn: ok=%v, %v; want nothing written", ok, err)
				}
				if res, err := n.coord.Begin(ctx, retry, nil); err != nil || outcomeString(res.Decided) != outcomeString(twopc.Committed{Result: result}) {
					t.Fatalf("Begin of a decided txn: %+v, %v", res, err)
				}
				if dump(t, n.db) != dumped {
					t.Fatal("retrying a decided transaction wrote")
				}
			})
		}
	}
}

// TestBeginCommit_NothingWrittenWhenItCannotChain: a conflicting open
// intent, a participant's "no" vote, a failed condition of beginWith, and a
// store that cannot chain all leave the store untouched with ok=false, so
// the caller's Begin/Decide path handles them.
func TestBeginCommit_NothingWrittenWhenItCannotChain(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "chaining is engine.DB's")
	ctx := context.Background()
	n := nodeWithHolder(t)
	for _, c := range []struct {
		name  string
		coord *twopc.Coordinator
		body  string
		with  *store.Batch
	}{
		{"open intent", n.coord, bodyConflicting, nil},
		{"no vote", n.coord, bodyWrongType, nil},
		{"condition of beginWith", n.coord, bodyFree, new(store.Batch).Present([]byte("no/such/key"))},
		{"store without ApplyChain", n.newCoordinator(plainStore{n.db}), bodyFree, nil},
	} {
		wroteNothing(t, n, c.name, func() (bool, error) {
			_, ok, err := c.coord.BeginCommit(ctx, txnFor("T", n.plan(t, c.body)), c.with, nil)
			return ok, err
		})
	}
}

// TestBeginCommit_TornChainRecoversAtomically: a chained commit written but
// never fsynced, then cut by a power loss at offsets across its bytes,
// recovers to a prefix of its links, never a decision without what comes
// before it; recovery then leaves the batch all applied or not at all, with
// no intent or record, and every state is reached. A staged chain's states
// are nothing, begun and undecided (its prepares alone: recovery decides
// by policy, and commit-prepared commits), or committed. A direct chain's
// are nothing, the caller's first link alone — with a record marked
// unprepared and no prepare, which recovery presumes aborted under either
// policy, leaving the documents as they were — or committed.
func TestBeginCommit_TornChainRecoversAtomically(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "chaining is engine.DB's")
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	ctx := context.Background()
	result, _ := json.Marshal(wantResult)
	const stride = 61 // cuts per chain: a few dozen, in both links and at the end
	for _, mode := range chainModes {
		for _, pol := range policies {
			t.Run(mode+"/"+pol.name, func(t *testing.T) {
				run := func(keep int) (state string, unsynced int) {
					n := newNode(t, twopc.Options{})
					work.seed(t, n)
					txn := txnForChain(mode, "tx", n.plan(t, work.body()))
					disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
					_, _, err := n.coord.BeginCommit(ctx, txn, new(store.Batch).Put(withKey, []byte("first")), nil)
					disarm()
					if !errors.Is(err, twopc.ErrOutcomeUnknown) || !errors.Is(err, store.ErrAmbiguous) {
						t.Fatalf("BeginCommit whose fsync failed: %v, want ErrOutcomeUnknown", err)
					}
					unsynced = waltest.Total(n.disk.Crash(n.edb, memfs.KeepUnsynced(keep)))
					n.open(t)
					st, err := n.coord.Lookup(ctx, "tx")
					if err != nil {
						t.Fatal(err)
					}
					_, withErr := n.db.Get(ctx, withKey)
					first := withErr == nil
					switch {
					case st.Decision != nil && !st.Begun && first:
						state = "committed"
						if outcomeString(st.Decision) != outcomeString(twopc.Committed{Result: result}) {
							t.Fatalf("decision %s", outcomeString(st.Decision))
						}
					case mode == "staged" && st.Decision == nil && st.Begun && len(st.Unresolved) == 4 && first:
						state = "begun"
					case mode == "direct" && st.Decision == nil && st.Begun && st.Unprepared && len(st.Unresolved) == 0 && first:
						state = "first link"
					case st.Decision == nil && !st.Begun && !first:
						state = "nothing"
					default:
						t.Fatalf("recovered begun=%v decision=%s unresolved=%d first link=%v: not a prefix of the chain",
							st.Begun, outcomeString(st.Decision), len(st.Unresolved), first)
					}
					if _, err := n.coord.Recover(ctx, twopc.RecoverOptions{Undecided: pol.policy}); err != nil {
						t.Fatal(err)
					}
					want := "old"
					if state == "committed" || (state == "begun" && pol.policy == twopc.CommitPrepared) {
						want = "new"
					}
					if got := work.state(t, n); got != want {
						t.Fatalf("%s chain recovered to documents %s, want %s", state, got, want)
					}
					assertNoIntentsOrRecords(t, n.db)
					return state, unsynced
				}
				seen, unsynced := waltest.StatesByCut(stride, run)
				states := []string{"nothing", "begun", "committed"}
				if mode == "direct" {
					states[1] = "first link"
				}
				for _, s := range states {
					if seen[s] == 0 {
						t.Errorf("no cut of the %d unsynced bytes recovered to %q (seen %v)", unsynced, s, seen)
					}
				}
				t.Logf("%d unsynced bytes, states by cut: %v", unsynced, seen)
			})
		}
	}
}

// contendedChains makes its first fails ApplyChains fail as if a document's
// intent were held by another transaction, then applies them.
type contendedChains struct {
	*engine.DB
	fails, calls int
}

// Capabilities implements store.Store: the engine's, with this ApplyChain.
func (c *contendedChains) Capabilities() store.Capabilities {
	return store.Capabilities{Chain: c, HotScan: c.DB, Latest: c.DB}
}

func (c *contendedChains) ApplyChain(ctx context.Context, links ...*store.Batch) ([]store.Version, error) {
	c.calls++
	if c.calls <= c.fails {
		return nil, &store.ConditionError{Cond: store.Condition{Key: store.NSIntent.Key("tid", "0", "x"), Kind: store.MustBeAbsent}, Found: 7}
	}
	return c.DB.ApplyChain(ctx, links...)
}

// TestBeginCommit_AContendedChainIsTriedAgainBounded: a chain refused only
// by a document another transaction held is prepared and tried again —
// nothing was written — up to ChainContendedRetriesMax times; past that it
// is ok=false with nothing written, for Begin to report the conflict.
func TestBeginCommit_AContendedChainIsTriedAgainBounded(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "chaining is engine.DB's")
	ctx := context.Background()
	for _, fails := range []int{1, twopc.ChainContendedRetriesMax, twopc.ChainContendedRetriesMax + 1} {
		n := newNode(t, twopc.Options{})
		work.seed(t, n)
		cs := &contendedChains{DB: n.edb, fails: fails}
		coord := n.newCoordinator(cs)
		dumped := dump(t, n.db)
		_, ok, err := coord.BeginCommit(ctx, txnFor("tx", n.plan(t, work.body())), nil, nil)
		wantOK := fails <= twopc.ChainContendedRetriesMax
		if err != nil || ok != wantOK || cs.calls != min(fails+1, twopc.ChainContendedRetriesMax+1) {
			t.Fatalf("%d contended tries: ok=%v err=%v after %d chains; want ok=%v", fails, ok, err, cs.calls, wantOK)
		}
		if wantOK {
			if got := work.state(t, n); got != "new" {
				t.Fatalf("state %s after the retried chain", got)
			}
		} else if dump(t, n.db) != dumped {
			t.Fatal("a chain refused every time wrote")
		}
	}
}

// plainStore is a store with no capability beyond the contract: no chains.
type plainStore struct{ store.Store }

// Capabilities implements store.Store: none.
func (plainStore) Capabilities() store.Capabilities { return store.Capabilities{} }
