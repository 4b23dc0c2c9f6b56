package receipt_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// mismatchDiff executes orig under a key, then other under the same key,
// and returns what the 422 says differs.
func mismatchDiff(t *testing.T, orig, other string) *receipt.Diff {
	t.Helper()
	e := newEnv(t)
	svc := e.open(receipt.Options{})
	createTable(t, svc, "t")
	if a := mustExecute(t, svc, req(alice, "t", "k", mustBatch(t, orig))); a.Status != 201 {
		t.Fatalf("original: %+v", a)
	}
	a := mustExecute(t, svc, req(alice, "t", "k", mustBatch(t, other)))
	if a.Status != 422 || a.Original == nil {
		t.Fatalf("%+v", a)
	}
	// Across a restart: the digests are durable, the request is not kept.
	svc.Close()
	e.crash()
	svc = e.open(receipt.Options{})
	b := mustExecute(t, svc, req(alice, "t", "k", mustBatch(t, other)))
	if !reflect.DeepEqual(a.Original.Diff, b.Original.Diff) {
		t.Fatalf("after a restart the diff is %+v, before %+v", b.Original.Diff, a.Original.Diff)
	}
	if rec, _ := record(t, e.db, receipt.Bind(alice, "t", "k")); rec.Request != nil {
		t.Fatal("the terminal receipt kept its request")
	}
	return a.Original.Diff
}

// TestMismatch_SaysWhichEntriesDiffer: a changed document, an added and a
// removed entry are each named by list, index and (where this request has
// it) ID; an entry that only moved is not a difference.
func TestMismatch_SaysWhichEntriesDiffer(t *testing.T) {
	orig := `{"inserts":[{"id":"a","doc":{"v":1}},{"id":"b","doc":{"v":2}},{"id":"c","doc":{"v":3}}],"deletes":["x","y"]}`
	other := `{"inserts":[{"id":"b","doc":{"v":2}},{"id":"a","doc":{"v":9}},{"id":"d","doc":{"v":4}}],"deletes":["y"],` +
		`"transforms":[{"id":"n","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	got := mismatchDiff(t, orig, other)
	want := &receipt.Diff{Complete: true, Entries: []receipt.EntryDiff{
		{Change: receipt.EntryChanged, List: table.ListInserts, Index: 1, ID: "a"},
		{Change: receipt.EntryAdded, List: table.ListInserts, Index: 2, ID: "d"},
		{Change: receipt.EntryAdded, List: table.ListTransforms, Index: 0, ID: "n"},
		{Change: receipt.EntryRemoved, List: table.ListInserts, Index: 2},
		{Change: receipt.EntryRemoved, List: table.ListDeletes, Index: 0},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff\n got %+v\nwant %+v", got, want)
	}
}

// TestMismatch_BeyondTheDigestsTheDiffSaysItIsIncomplete: a batch with
// more entries than are digested still gets the differences among those
// that are, and says that it may miss some; one that differs only there
// names nothing and says so.
func TestMismatch_BeyondTheDigestsTheDiffSaysItIsIncomplete(t *testing.T) {
	deletes := func(last string) string {
		ids := make([]string, table.EntryDigestsMax+1)
		for i := range ids {
			ids[i] = fmt.Sprintf(`"d%03d"`, i)
		}
		ids[len(ids)-1] = `"` + last + `"`
		return `{"deletes":[` + strings.Join(ids, ",") + `]}`
	}
	got := mismatchDiff(t, deletes("zz1"), deletes("zz2"))
	if got == nil || got.Complete || len(got.Entries) != 0 {
		t.Fatalf("a difference past the digests: %+v", got)
	}
}
