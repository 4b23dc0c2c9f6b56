package twopc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/twopc"
)

// TestBegin_DecidedTxnReturnsDecisionAndNeverReapplies proves that beginning
// a decided txn_id again — before its intents are resolved, after, and after
// a crash and reopen — returns BeginResult.Decided with the stored outcome,
// writes nothing, and so counts its $inc exactly once (or, if it aborted,
// never).
func TestBegin_DecidedTxnReturnsDecisionAndNeverReapplies(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("defer=%v/commit=%v", deferRes, commit), func(t *testing.T) {
				n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
				work.seed(t, n)
				txn := txnFor("tx", n.plan(t, work.body()))
				if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
					t.Fatalf("begin: %+v %v", res, err)
				}
				result, _ := json.Marshal(wantResult)
				var o twopc.Outcome = twopc.Committed{Result: result}
				wantState := "new"
				if !commit {
					o, wantState = twopc.Aborted{Code: code.TransactionConflict, Message: "m"}, "old"
				}
				if _, won, err := n.coord.DecideOrLearn(ctx, "tx", txn.Participants, o, nil); err != nil || !won {
					t.Fatalf("decide: %v %v", won, err)
				}
				rebegin := func(stage string) {
					t.Helper()
					before := dump(t, n.db)
					// A retry re-plans the same request from scratch.
					res, err := n.coord.Begin(ctx, txnFor("tx", n.plan(t, work.body())), nil)
					if err != nil || res.Prepared || res.Refused != nil || outcomeString(res.Decided) != outcomeString(o) {
						t.Fatalf("%s: re-begin = %+v, %v; want Decided %s", stage, res, err, outcomeString(o))
					}
					if dump(t, n.db) != before {
						t.Fatalf("%s: re-begin wrote", stage)
					}
					if got := work.state(t, n); got != wantState {
						t.Fatalf("%s: state %s, want %s", stage, got, wantState)
					}
				}
				rebegin("decided")
				if deferRes {
					if r, err := n.coord.Resolve(ctx, "tx"); err != nil || r != 4 {
						t.Fatalf("resolve: %d %v", r, err)
					}
					rebegin("resolved")
				}
				n.crashReopen(t)
				rebegin("reopened")
				if got := n.doc(t, work.inc[0]); commit && got != incNew {
					t.Fatalf("$inc applied more than once: %s", got)
				}
			})
		}
	}
}

// TestBegin_RefusedThenAbortedTxnReturnsDecision proves a txn that was
// refused and then decided Aborted answers a later Begin with that decision
// (not a fresh vote), even when the conflicting intent is still open.
func TestBegin_RefusedThenAbortedTxnReturnsDecision(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, twopc.Options{})
	n.fast(t, `{"inserts":[{"id":"x","doc":{"n":1}}]}`)
	body := `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	a := txnFor("A", n.plan(t, body))
	if res, err := n.coord.Begin(ctx, a, nil); err != nil || !res.Prepared {
		t.Fatalf("begin A: %+v %v", res, err)
	}
	b := txnFor("B", n.plan(t, body))
	res, err := n.coord.Begin(ctx, b, nil)
	if err != nil || res.Refused == nil || res.Refused.Code != code.TransactionConflict {
		t.Fatalf("begin B: %+v %v", res, err)
	}
	if err := n.coord.Decide(ctx, "B", nil, *res.Refused, nil); err != nil {
		t.Fatal(err)
	}
	res2, err := n.coord.Begin(ctx, txnFor("B", n.plan(t, body)), nil)
	if err != nil || outcomeString(res2.Decided) != outcomeString(*res.Refused) {
		t.Fatalf("re-begin B: %+v %v", res2, err)
	}
}

// TestBegin_BegunUndecidedTxnIsInProgress proves beginning a begun,
// undecided txn_id again — with the same batch, whose documents the first
// Begin holds intents on, or with a disjoint one — is ErrInProgress and
// writes nothing, also after a crash and reopen.
func TestBegin_BegunUndecidedTxnIsInProgress(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, twopc.Options{})
	work.seed(t, n)
	if res, err := n.coord.Begin(ctx, txnFor("tx", n.plan(t, work.body())), nil); err != nil || !res.Prepared {
		t.Fatalf("begin: %+v %v", res, err)
	}
	check := func(stage string) {
		t.Helper()
		before := dump(t, n.db)
		for _, body := range []string{work.body(), `{"inserts":[{"id":"elsewhere","doc":{}}]}`} {
			res, err := n.coord.Begin(ctx, txnFor("tx", n.plan(t, body)), nil)
			if !errors.Is(err, twopc.ErrInProgress) {
				t.Fatalf("%s: re-begin = %+v, %v; want ErrInProgress", stage, res, err)
			}
		}
		if dump(t, n.db) != before {
			t.Fatalf("%s: re-begin wrote", stage)
		}
		if got := work.state(t, n); got != "old" {
			t.Fatalf("%s: state %s", stage, got)
		}
	}
	check("begun")
	n.crashReopen(t)
	check("reopened")
}
