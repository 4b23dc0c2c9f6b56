package twopc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

var errUnreadable = errors.New("test: decision unreadable")

func isDecisionKey(k []byte) bool { return bytes.HasPrefix(k, store.NSTxn.Prefix("dec")) }

// blindStore is a store on which decisions cannot be read: every Get of a
// decision key fails with getErr.
type blindStore struct {
	store.Store
	getErr error
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s blindStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s blindStore) Get(ctx context.Context, key []byte) (store.Item, error) {
	if isDecisionKey(key) {
		return store.Item{}, s.getErr
	}
	return s.Store.Get(ctx, key)
}

// phantomStore additionally reports, for every batch that would create a
// decision, that the decision's absent-condition failed — someone else
// decided — without writing anything: a bare DecisionConflict whose winner
// cannot be read.
type phantomStore struct{ blindStore }

func (s phantomStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	for _, c := range b.Conds {
		if c.Kind == store.MustBeAbsent && isDecisionKey(c.Key) {
			return 0, &store.ConditionError{Cond: c, Found: 1}
		}
	}
	return s.Store.Apply(ctx, b)
}

type decideResult struct {
	o   twopc.Outcome
	won bool
	err error
}

// raceDecide runs both deciders at once and returns their results.
func raceDecide(a, b func() decideResult) (ra, rb decideResult) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { <-start; ra = a() })
	wg.Go(func() { <-start; rb = b() })
	close(start)
	wg.Wait()
	return ra, rb
}

const raceIterations = 60

// TestDecide_ConcurrentCommitAndPresumedAbortAgree races, many times, a
// coordinator deciding Committed against another presuming abort for the
// same prepared txn_id, and proves: exactly one of them wins, the loser
// returns the winner's outcome (never its own), the durable decision is the
// winner's, and the documents reflect exactly that outcome, with no intent
// left.
func TestDecide_ConcurrentCommitAndPresumedAbortAgree(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		t.Run(fmt.Sprintf("defer=%v", deferRes), func(t *testing.T) {
			n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
			n.fast(t, `{"inserts":[{"id":"c","doc":{"n":0}}]}`)
			other := n.newCoordinator(n.db)
			abort := twopc.PresumedOutcome(twopc.PresumeAbort, nil)
			commits := 0
			wins := [2]int{}
			for i := range raceIterations {
				id := fmt.Sprintf("tx%d", i)
				txn := txnFor(id, n.plan(t, fmt.Sprintf(`{"inserts":[{"id":"i%d","doc":{}}],"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}]}]}`, i)))
				if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
					t.Fatalf("begin: %+v %v", res, err)
				}
				rc, ra := raceDecide(
					func() decideResult {
						o, won, err := n.coord.DecideOrLearn(ctx, id, txn.Participants, twopc.Committed{}, nil)
						return decideResult{o, won, err}
					},
					func() decideResult {
						o, won, err := other.DecideOrLearn(ctx, id, nil, abort, nil)
						return decideResult{o, won, err}
					})
				if rc.err != nil || ra.err != nil {
					t.Fatalf("%s: errors %v / %v", id, rc.err, ra.err)
				}
				if rc.won == ra.won {
					t.Fatalf("%s: won %v and %v, want exactly one winner", id, rc.won, ra.won)
				}
				winner := twopc.Outcome(twopc.Committed{})
				if ra.won {
					winner = abort
					wins[1]++
				} else {
					wins[0]++
					commits++
				}
				if outcomeString(rc.o) != outcomeString(winner) || outcomeString(ra.o) != outcomeString(winner) {
					t.Fatalf("%s: outcomes %s / %s, winner %s", id, outcomeString(rc.o), outcomeString(ra.o), outcomeString(winner))
				}
				for _, c := range []*twopc.Coordinator{n.coord, other} {
					if got, err := c.Learn(ctx, id); err != nil || outcomeString(got) != outcomeString(winner) {
						t.Fatalf("%s: learn %s %v, winner %s", id, outcomeString(got), err, outcomeString(winner))
					}
				}
				if deferRes {
					if _, err := other.Resolve(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				assertNoIntentsOrRecords(t, n.db)
				if got, want := n.doc(t, "c"), fmt.Sprintf(`{"n":%d}`, commits); got != want {
					t.Fatalf("%s: c = %s, want %s", id, got, want)
				}
				if got := n.doc(t, fmt.Sprintf("i%d", i)); (got != "") != !ra.won {
					t.Fatalf("%s: insert visible=%v under %s", id, got != "", outcomeString(winner))
				}
			}
			t.Logf("commit won %d, presumed abort won %d", wins[0], wins[1])
		})
	}
}

// TestDecide_LoserThatCannotReadWinnerGetsOutcomeUnknown proves a decider
// that loses the decision race and cannot read the winner reports an error
// wrapping ErrOutcomeUnknown — never Aborted and never its own outcome —
// both deterministically (it decides second) and under a race.
func TestDecide_LoserThatCannotReadWinnerGetsOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		t.Run(fmt.Sprintf("defer=%v", deferRes), func(t *testing.T) {
			n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
			blind := n.newCoordinator(blindStore{Store: n.db, getErr: errUnreadable})
			abort := twopc.PresumedOutcome(twopc.PresumeAbort, nil)
			begin := func(id string) twopc.Txn {
				txn := txnFor(id, n.plan(t, fmt.Sprintf(`{"inserts":[{"id":"d-%s","doc":{}}]}`, id)))
				if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
					t.Fatalf("begin: %+v %v", res, err)
				}
				return txn
			}
			checkLoser := func(id string, r decideResult) {
				t.Helper()
				if r.won || r.o != nil || !errors.Is(r.err, twopc.ErrOutcomeUnknown) || !errors.Is(r.err, errUnreadable) {
					t.Fatalf("%s: blind loser got %s won=%v err=%v; want ErrOutcomeUnknown", id, outcomeString(r.o), r.won, r.err)
				}
			}

			// Deterministic: the winner decided first.
			txn := begin("seq")
			if _, won, err := n.coord.DecideOrLearn(ctx, "seq", txn.Participants, twopc.Committed{}, nil); err != nil || !won {
				t.Fatalf("decide: %v %v", won, err)
			}
			o, won, err := blind.DecideOrLearn(ctx, "seq", nil, abort, nil)
			checkLoser("seq", decideResult{o, won, err})
			if got, err := n.coord.Learn(ctx, "seq"); err != nil || outcomeString(got) != outcomeString(twopc.Committed{}) {
				t.Fatalf("decision changed: %s %v", outcomeString(got), err)
			}

			// Raced.
			for i := range raceIterations {
				id := fmt.Sprintf("tx%d", i)
				txn := begin(id)
				rc, rb := raceDecide(
					func() decideResult {
						o, won, err := n.coord.DecideOrLearn(ctx, id, txn.Participants, twopc.Committed{}, nil)
						return decideResult{o, won, err}
					},
					func() decideResult {
						o, won, err := blind.DecideOrLearn(ctx, id, nil, abort, nil)
						return decideResult{o, won, err}
					})
				if rc.err != nil || rc.won == rb.won && rb.err == nil {
					t.Fatalf("%s: %+v / %+v", id, rc, rb)
				}
				if rb.won {
					if outcomeString(rb.o) != outcomeString(abort) || outcomeString(rc.o) != outcomeString(abort) {
						t.Fatalf("%s: blind winner %s, other learned %s", id, outcomeString(rb.o), outcomeString(rc.o))
					}
				} else {
					checkLoser(id, rb)
					if !rc.won || outcomeString(rc.o) != outcomeString(twopc.Committed{}) {
						t.Fatalf("%s: committer %+v", id, rc)
					}
				}
			}
		})
	}
}

// TestDecide_BareDecisionConflictWithoutReadableWinnerIsUnknown proves that
// a decision write refused because a decision exists, whose winner then
// cannot be read (read error, or not found), is reported as
// ErrOutcomeUnknown by DecideOrLearn for either proposed outcome — never as
// Aborted — that nothing is written, and that recovery in that situation
// defers the transaction instead of deciding it.
func TestDecide_BareDecisionConflictWithoutReadableWinnerIsUnknown(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		for _, getErr := range []error{errUnreadable, store.ErrNotFound} {
			t.Run(fmt.Sprintf("defer=%v/%v", deferRes, getErr), func(t *testing.T) {
				n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
				work.seed(t, n)
				txn := txnFor("tx", n.plan(t, work.body()))
				if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
					t.Fatalf("begin: %+v %v", res, err)
				}
				// A winner that cannot be read stays unknown.
				_, phantom := table.NewWithCoordinator(phantomStore{blindStore{Store: n.db, getErr: getErr}},
					twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
				before := dump(t, n.db)
				if err := phantom.Decide(ctx, "tx", txn.Participants, twopc.Committed{}, nil); !errors.Is(err, twopc.ErrDecisionConflict) {
					t.Fatalf("decide = %v, want the bare ErrDecisionConflict", err)
				}
				for _, o := range []twopc.Outcome{twopc.Committed{}, twopc.PresumedOutcome(twopc.PresumeAbort, nil)} {
					for _, parts := range [][]twopc.Participant{nil, txn.Participants} {
						got, won, err := phantom.DecideOrLearn(ctx, "tx", parts, o, nil)
						if got != nil || won || !errors.Is(err, twopc.ErrOutcomeUnknown) {
							t.Fatalf("proposing %s: got %s won=%v err=%v; want ErrOutcomeUnknown", outcomeString(o), outcomeString(got), won, err)
						}
					}
				}
				if getErr == store.ErrNotFound {
					stats, err := phantom.Recover(ctx, twopc.RecoverOptions{Undecided: twopc.PresumeAbort})
					if err != nil || stats != (twopc.RecoverStats{Scanned: 1, Deferred: 1}) {
						t.Fatalf("recover = %+v, %v; want the transaction deferred", stats, err)
					}
				}
				if dump(t, n.db) != before {
					t.Fatal("an unknown outcome wrote")
				}
				if st, err := n.coord.Lookup(ctx, "tx"); err != nil || !st.Begun || st.Decision != nil {
					t.Fatalf("status %+v %v", st, err)
				}
				if got := work.state(t, n); got != "old" {
					t.Fatalf("state %s", got)
				}
			})
		}
	}
}
