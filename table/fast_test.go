package table_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// TestFast_BatchAppliesAtomicallyWithExactCounts proves a mixed batch over
// every shard applies as a whole, and that its Result counts inserts,
// transforms, and only those deletes that removed an existing document.
func TestFast_BatchAppliesAtomicallyWithExactCounts(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 4)
	f.mustFast(t, "t", `{"inserts":[{"id":"a","doc":{"n":1}},{"id":"b","doc":{"n":2}},{"id":"c","doc":{"n":3}}]}`)
	before := dump(t, f.db)
	res := f.mustFast(t, "t", `{
		"inserts":[{"id":"x","doc":{"v":"x"}},{"id":"c","doc":{"replaced":true}}],
		"deletes":["a","missing1","missing2"],
		"transforms":[
			{"id":"b","ops":[{"op":"$inc","path":"n","value":40},{"op":"$set","path":"m.k","value":"v"}]},
			{"id":"up","ops":[{"op":"$addToSet","path":"s","value":1}],"upsert":true}]}`)
	if want := (table.Result{Inserted: 2, Deleted: 1, Transformed: 2}); res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	for id, want := range map[string]string{
		"a": "", "missing1": "", "missing2": "",
		"b": `{"m":{"k":"v"},"n":42}`, "c": `{"replaced":true}`, "x": `{"v":"x"}`, "up": `{"s":[1]}`,
	} {
		if got := f.doc(t, "t", id); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if dump(t, f.db) == before {
		t.Fatal("nothing was written")
	}
	// Deleting only missing documents is a successful no-op.
	before = dump(t, f.db)
	if res := f.mustFast(t, "t", `{"deletes":["a","nope"]}`); res != (table.Result{}) {
		t.Fatalf("result %+v", res)
	}
	if dump(t, f.db) != before {
		t.Fatal("deleting missing documents wrote")
	}
}

// TestFast_FailingDocumentWritesNothing proves that one failing document (a
// transform of a missing document, or a type error) fails the whole batch:
// none of its other inserts, deletes or transforms is written.
func TestFast_FailingDocumentWritesNothing(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 4)
	f.mustFast(t, "t", `{"inserts":[{"id":"a","doc":{"n":1}},{"id":"s","doc":{"n":"str"}}]}`)
	for body, c := range map[string]code.Code{
		`{"inserts":[{"id":"x","doc":{}}],"deletes":["a"],"transforms":[{"id":"nodoc","ops":[{"op":"$inc","path":"n","value":1}]}]}`: code.DocumentNotFound,
		`{"inserts":[{"id":"x","doc":{}}],"deletes":["a"],"transforms":[{"id":"s","ops":[{"op":"$inc","path":"n","value":1}]}]}`:     code.InvalidRequest,
	} {
		before := dump(t, f.db)
		_, err := f.fast(t, "t", body)
		wantCode(t, err, c)
		if dump(t, f.db) != before {
			t.Fatalf("failed batch wrote: %s", body)
		}
	}
}

// TestFast_ConflictsWithOpenIntentUntilDecided proves a fast batch touching
// a document that an undecided 2PC transaction holds fails with
// transaction_conflict and writes nothing (for an insert, a delete and a
// transform of that document), and succeeds on top of the decided state once
// the transaction is committed or aborted.
func TestFast_ConflictsWithOpenIntentUntilDecided(t *testing.T) {
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			f := newFixture(t, twopc.Options{})
			f.create(t, "t", 4)
			f.mustFast(t, "t", `{"inserts":[{"id":"X","doc":{"n":1}},{"id":"other","doc":{}}]}`)
			plan := f.plan(t, "t", `{"inserts":[{"id":"Y","doc":{}}],"transforms":[{"id":"X","ops":[{"op":"$inc","path":"n","value":10}]}]}`)
			txn := txnOf("tx", plan)
			if res, err := f.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
				t.Fatalf("begin: %+v %v", res, err)
			}
			before := dump(t, f.db)
			for _, body := range []string{
				`{"inserts":[{"id":"new","doc":{}},{"id":"X","doc":{"n":0}}]}`,
				`{"deletes":["other","X"]}`,
				`{"inserts":[{"id":"new","doc":{}}],"transforms":[{"id":"X","ops":[{"op":"$inc","path":"n","value":1}]}]}`,
				`{"deletes":["Y","missing"]}`, // nothing to write, but Y is being inserted
			} {
				_, err := f.fast(t, "t", body)
				wantCode(t, err, code.TransactionConflict)
				var ce *code.Error
				if !errors.As(err, &ce) || !(strings.HasPrefix(ce.Message, `document "X" is being written`) ||
					strings.HasPrefix(ce.Message, `document "Y" is being written`)) {
					t.Fatalf("%s: conflict %v does not name the held document", body, err)
				}
				if dump(t, f.db) != before {
					t.Fatalf("conflicting fast batch wrote: %s", body)
				}
			}
			// Untouched documents are still writable.
			f.mustFast(t, "t", `{"transforms":[{"id":"other","ops":[{"op":"$set","path":"k","value":1}]}]}`)

			var o twopc.Outcome = twopc.Committed{}
			want := `{"n":12}`
			if !commit {
				o, want = twopc.Aborted{Code: code.TransactionAborted, Message: "test"}, `{"n":2}`
			}
			if _, won, err := f.coord.DecideOrLearn(ctx, "tx", txn.Participants, o, nil); err != nil || !won {
				t.Fatalf("decide: %v %v", won, err)
			}
			if r := f.mustFast(t, "t", `{"transforms":[{"id":"X","ops":[{"op":"$inc","path":"n","value":1}]}]}`); r.Transformed != 1 {
				t.Fatalf("result %+v", r)
			}
			if got := f.doc(t, "t", "X"); got != want {
				t.Fatalf("X = %s, want %s", got, want)
			}
		})
	}
}

// TestFast_ConcurrentIncrementsLoseNoUpdates proves concurrent fast-path
// read-modify-writes of one document never lose an update: the final count
// equals the number of increments that reported success, and every failure
// is a typed transaction_conflict.
func TestFast_ConcurrentIncrementsLoseNoUpdates(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 1)
	f.mustFast(t, "t", `{"inserts":[{"id":"c","doc":{"n":0}}]}`)
	const workers, each = 8, 25
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				p, err := f.tables.Preflight(context.Background(), tenant, "t", decode(t, `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}]}]}`))
				if err != nil {
					t.Error(err)
					return
				}
				_, err = f.tables.ApplyFast(context.Background(), p)
				var ce *code.Error
				switch {
				case err == nil:
					mu.Lock()
					ok++
					mu.Unlock()
				case errors.As(err, &ce) && ce.Code == code.TransactionConflict:
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := f.doc(t, "t", "c")
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(got, `{"n":`), "}"))
	if err != nil {
		t.Fatalf("doc %s", got)
	}
	if n != ok || ok == 0 {
		t.Fatalf("n = %d, successful increments = %d", n, ok)
	}
}
