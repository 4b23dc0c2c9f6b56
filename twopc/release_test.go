package twopc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/twopc"
)

// TestRelease_RequiresResolutionThenFreesTheTxnID proves Release of a
// transaction whose participants still hold intents fails with
// ErrUnresolved and keeps the decision; after Resolve it succeeds, the
// decision is gone, and the same txn_id begins again as a new transaction
// whose effects apply on top of the first one's.
func TestRelease_RequiresResolutionThenFreesTheTxnID(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		t.Run(fmt.Sprintf("defer=%v", deferRes), func(t *testing.T) {
			n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
			n.fast(t, `{"inserts":[{"id":"c","doc":{"n":0}}]}`)
			body := `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}]}]}`
			txn := txnFor("tx", n.plan(t, body))
			if res, err := n.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
				t.Fatalf("begin: %+v %v", res, err)
			}
			// Begun, undecided: intents are open.
			if err := n.coord.Release(ctx, "tx", nil); !errors.Is(err, twopc.ErrUnresolved) {
				t.Fatalf("release undecided = %v, want ErrUnresolved", err)
			}
			if _, _, err := n.coord.DecideOrLearn(ctx, "tx", nil, twopc.Committed{}, nil); err != nil {
				t.Fatal(err)
			}
			if deferRes {
				before := dump(t, n.db)
				if err := n.coord.Release(ctx, "tx", nil); !errors.Is(err, twopc.ErrUnresolved) {
					t.Fatalf("release unresolved = %v, want ErrUnresolved", err)
				}
				if dump(t, n.db) != before {
					t.Fatal("refused release wrote")
				}
				if o, err := n.coord.Learn(ctx, "tx"); err != nil || outcomeString(o) != outcomeString(twopc.Committed{}) {
					t.Fatalf("decision after refused release: %s %v", outcomeString(o), err)
				}
				if r, err := n.coord.Resolve(ctx, "tx"); err != nil || r != 1 {
					t.Fatalf("resolve: %d %v", r, err)
				}
			}
			if err := n.coord.Release(ctx, "tx", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := n.coord.Learn(ctx, "tx"); !errors.Is(err, twopc.ErrOutcomeUnknown) {
				t.Fatalf("learn after release = %v", err)
			}
			if st, err := n.coord.Lookup(ctx, "tx"); err != nil || st.Begun || st.Decision != nil {
				t.Fatalf("status after release: %+v %v", st, err)
			}
			if got := n.doc(t, "c"); got != `{"n":1}` {
				t.Fatalf("c = %s", got)
			}
			// The txn_id is free: a new transaction under it.
			again := txnFor("tx", n.plan(t, body))
			if res, err := n.coord.Begin(ctx, again, nil); err != nil || !res.Prepared {
				t.Fatalf("begin again: %+v %v", res, err)
			}
			if _, won, err := n.coord.DecideOrLearn(ctx, "tx", again.Participants, twopc.Committed{}, nil); err != nil || !won {
				t.Fatalf("decide again: %v %v", won, err)
			}
			if _, err := n.coord.Resolve(ctx, "tx"); err != nil {
				t.Fatal(err)
			}
			if got := n.doc(t, "c"); got != `{"n":2}` {
				t.Fatalf("c after second transaction = %s", got)
			}
			n.crashReopen(t)
			if got := n.doc(t, "c"); got != `{"n":2}` {
				t.Fatalf("c after reopen = %s", got)
			}
			if err := n.coord.Release(ctx, "tx", nil); err != nil {
				t.Fatal(err)
			}
			assertNoIntentsOrRecords(t, n.db)
		})
	}
}
