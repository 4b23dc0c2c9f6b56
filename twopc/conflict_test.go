package twopc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/twopc"
)

// TestBegin_ConflictingTxnsOnePreparesOtherRefusedThenAbortsDurably proves
// that of two transactions preparing the same document, the second is
// Refused with transaction_conflict and writes nothing; the first commits;
// the second's abort, decided with the refusal's reason, is durable (it
// survives a crash and answers a re-Begin), and its other documents never
// change.
func TestBegin_ConflictingTxnsOnePreparesOtherRefusedThenAbortsDurably(t *testing.T) {
	ctx := context.Background()
	for _, deferRes := range []bool{false, true} {
		t.Run(fmt.Sprintf("defer=%v", deferRes), func(t *testing.T) {
			n := newNode(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: deferRes}))
			n.fast(t, `{"inserts":[{"id":"x","doc":{"n":1}},{"id":"y","doc":{"n":1}},{"id":"z","doc":{"n":1}}]}`)
			a := txnFor("A", n.plan(t, `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]},{"id":"y","ops":[{"op":"$inc","path":"n","value":1}]}]}`))
			b := txnFor("B", n.plan(t, `{"transforms":[{"id":"y","ops":[{"op":"$inc","path":"n","value":100}]},{"id":"z","ops":[{"op":"$inc","path":"n","value":100}]}],"inserts":[{"id":"w","doc":{}}]}`))
			if res, err := n.coord.Begin(ctx, a, nil); err != nil || !res.Prepared {
				t.Fatalf("begin A: %+v %v", res, err)
			}
			before := dump(t, n.db)
			res, err := n.coord.Begin(ctx, b, nil)
			if err != nil || res.Refused == nil || res.Refused.Code != code.TransactionConflict {
				t.Fatalf("begin B: %+v %v; want Refused transaction_conflict", res, err)
			}
			if dump(t, n.db) != before {
				t.Fatal("refused Begin wrote")
			}
			if o, won, err := n.coord.DecideOrLearn(ctx, "A", a.Participants, twopc.Committed{}, nil); err != nil || !won {
				t.Fatalf("decide A: %s %v %v", outcomeString(o), won, err)
			}
			refusal := *res.Refused
			if o, won, err := n.coord.DecideOrLearn(ctx, "B", b.Participants, refusal, nil); err != nil || !won || outcomeString(o) != outcomeString(refusal) {
				t.Fatalf("decide B: %s %v %v", outcomeString(o), won, err)
			}
			if deferRes {
				if _, err := n.coord.Resolve(ctx, "A"); err != nil {
					t.Fatal(err)
				}
				if _, err := n.coord.Resolve(ctx, "B"); err != nil {
					t.Fatal(err)
				}
			}
			check := func(stage string) {
				t.Helper()
				for id, want := range map[string]string{"x": `{"n":2}`, "y": `{"n":2}`, "z": `{"n":1}`, "w": ""} {
					if got := n.doc(t, id); got != want {
						t.Fatalf("%s: %s = %q, want %q", stage, id, got, want)
					}
				}
				for id, want := range map[string]twopc.Outcome{"A": twopc.Committed{}, "B": refusal} {
					if got, err := n.coord.Learn(ctx, id); err != nil || outcomeString(got) != outcomeString(want) {
						t.Fatalf("%s: %s decided %s %v, want %s", stage, id, outcomeString(got), err, outcomeString(want))
					}
				}
				if res, err := n.coord.Begin(ctx, txnFor("B", n.plan(t, `{"transforms":[{"id":"z","ops":[{"op":"$inc","path":"n","value":100}]}]}`)), nil); err != nil || outcomeString(res.Decided) != outcomeString(refusal) {
					t.Fatalf("%s: re-begin B = %+v %v", stage, res, err)
				}
				assertNoIntentsOrRecords(t, n.db)
			}
			check("decided")
			n.crashReopen(t)
			check("reopened")
		})
	}
}

// TestBegin_ConcurrentConflictingBeginsPrepareExactlyOne races two Begins on
// the same document many times and proves exactly one prepares and the
// other is Refused with transaction_conflict.
func TestBegin_ConcurrentConflictingBeginsPrepareExactlyOne(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, twopc.Options{})
	n.fast(t, `{"inserts":[{"id":"x","doc":{"n":0}}]}`)
	want := 0
	for i := range 40 {
		var txns [2]twopc.Txn
		var res [2]twopc.BeginResult
		var errs [2]error
		for k := range txns {
			txns[k] = txnFor(fmt.Sprintf("tx%d-%d", i, k), n.plan(t, `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`))
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range txns {
			wg.Go(func() { <-start; res[k], errs[k] = n.coord.Begin(ctx, txns[k], nil) })
		}
		close(start)
		wg.Wait()
		prepared := -1
		for k := range txns {
			switch {
			case errs[k] != nil:
				t.Fatalf("%d/%d: %v", i, k, errs[k])
			case res[k].Prepared:
				if prepared >= 0 {
					t.Fatalf("%d: both prepared", i)
				}
				prepared = k
			case res[k].Refused == nil || res[k].Refused.Code != code.TransactionConflict:
				t.Fatalf("%d/%d: %+v", i, k, res[k])
			}
		}
		if prepared < 0 {
			t.Fatalf("%d: neither prepared: %+v / %+v", i, res[0], res[1])
		}
		loser := txns[1-prepared]
		if _, _, err := n.coord.DecideOrLearn(ctx, txns[prepared].ID, txns[prepared].Participants, twopc.Committed{}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.coord.DecideOrLearn(ctx, loser.ID, nil, *res[1-prepared].Refused, nil); err != nil {
			t.Fatal(err)
		}
		want++
		if got := n.doc(t, "x"); got != fmt.Sprintf(`{"n":%d}`, want) {
			t.Fatalf("%d: x = %s, want n=%d", i, got, want)
		}
	}
	assertNoIntentsOrRecords(t, n.db)
}
