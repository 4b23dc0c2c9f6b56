package twopc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// TestRead_ResolveOnReadShowsExactlyTheDecidedState proves, with
// DeferResolution, that while intents are open, document reads show the
// old state when no decision exists, the committed state as soon as a
// commit decision is durable (before Resolve, and after a crash and reopen),
// and the old state after an abort decision; and that resolution does not
// change what reads show.
func TestRead_ResolveOnReadShowsExactlyTheDecidedState(t *testing.T) {
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
			work.seed(t, n)
			txn := txnFor("tx", n.plan(t, work.body()))
			if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
				t.Fatalf("begin: %+v %v", res, err)
			}
			intents := len(keysUnder(t, n.db, []byte(store.NSIntent)))
			if intents != 13 {
				t.Fatalf("%d intents, want 13", intents)
			}
			if got := work.state(t, n); got != "old" {
				t.Fatalf("undecided: state %s", got)
			}
			var o twopc.Outcome = twopc.Committed{}
			want := "new"
			if !commit {
				o, want = twopc.Aborted{Code: code.TransactionConflict, Message: "m"}, "old"
			}
			if _, won, err := n.coord.DecideOrLearn(ctx, "tx", nil, o, nil); err != nil || !won {
				t.Fatalf("decide: %v %v", won, err)
			}
			check := func(stage string, wantIntents int) {
				t.Helper()
				if got := len(keysUnder(t, n.db, []byte(store.NSIntent))); got != wantIntents {
					t.Fatalf("%s: %d intents, want %d", stage, got, wantIntents)
				}
				if got := work.state(t, n); got != want {
					t.Fatalf("%s: state %s, want %s", stage, got, want)
				}
			}
			check("decided", intents)
			n.crashReopen(t)
			check("reopened", intents)
			if r, err := n.coord.Resolve(ctx, "tx"); err != nil || r != 4 {
				t.Fatalf("resolve: %d %v", r, err)
			}
			check("resolved", 0)
		})
	}
}

// TestRead_WithoutDecisionReaderIntentsAreInvisible proves a table manager
// with no decision reader never shows intents, committed or not, until they
// are resolved.
func TestRead_WithoutDecisionReaderIntentsAreInvisible(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
	work.seed(t, n)
	txn := txnFor("tx", n.plan(t, work.body()))
	if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
		t.Fatalf("begin: %+v %v", res, err)
	}
	if _, _, err := n.coord.DecideOrLearn(ctx, "tx", nil, twopc.Committed{}, nil); err != nil {
		t.Fatal(err)
	}
	withReader := n.tables
	n.tables = table.New(n.db, nil) // no SetDecisionReader
	if got := work.state(t, n); got != "old" {
		t.Fatalf("state %s", got)
	}
	if _, err := n.coord.Resolve(ctx, "tx"); err != nil {
		t.Fatal(err)
	}
	if got := work.state(t, n); got != "new" {
		t.Fatalf("resolved: state %s", got)
	}
	n.tables = withReader
	if got := work.state(t, n); got != "new" {
		t.Fatalf("with reader: state %s", got)
	}
}
