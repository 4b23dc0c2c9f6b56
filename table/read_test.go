package table_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/twopc"
)

// TestRead_NeverSeesAnUncommittedIntent: reads never see uncommitted
// intents (docs/design.md §12) — not while a transaction is prepared and
// undecided, nor once it aborted and its intents wait for resolution —
// and see a committed one at once, before its intents are resolved. Each
// kind of write is covered: an update, an insert, a delete. Resolution is
// deferred, so the intents stay on the documents throughout.
func TestRead_NeverSeesAnUncommittedIntent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
	f.create(t, "t", 2)
	f.mustFast(t, "t", `{"inserts":[{"id":"a","doc":{"n":1}},{"id":"b","doc":{"n":1}}]}`)
	const body = `{"inserts":[{"id":"c","doc":{"n":9}}],"deletes":["b"],"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	stored := map[string]string{"a": `{"n":1}`, "b": `{"n":1}`, "c": ""}
	committed := map[string]string{"a": `{"n":2}`, "b": "", "c": `{"n":9}`}
	want := func(when string, docs map[string]string) {
		t.Helper()
		for id, doc := range docs {
			if got := f.doc(t, "t", id); got != doc {
				t.Errorf("%s: document %s reads %q, want %q", when, id, got, doc)
			}
		}
	}
	for i, o := range []twopc.Outcome{twopc.Aborted{Code: code.TransactionAborted}, twopc.Committed{}} {
		id := fmt.Sprintf("tx-%d", i)
		if res, err := f.coord.Begin(ctx, txnOf(id, f.plan(t, "t", body)), nil); err != nil || !res.Prepared {
			t.Fatalf("%s: begin: %+v %v", id, res, err)
		}
		want(id+" prepared, undecided", stored)
		if _, _, err := f.coord.DecideOrLearn(ctx, id, nil, o, nil); err != nil {
			t.Fatalf("%s: decide: %v", id, err)
		}
		if _, committing := o.(twopc.Committed); committing {
			want(id+" committed, unresolved", committed)
		} else {
			want(id+" aborted, unresolved", stored)
			if _, err := f.coord.Resolve(ctx, id); err != nil {
				t.Fatalf("resolve: %v", err)
			}
			want(id+" aborted, resolved", stored)
		}
	}
}
