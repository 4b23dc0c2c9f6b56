package table_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// transformCase is one transform of document "d". before is the stored
// document ("" = absent); want is the document afterwards in canonical JSON,
// or, when code is set, the transform fails with that code, its message names
// failOp ("ops[i] $op"), and nothing is written.
type transformCase struct {
	name   string
	before string
	ops    string
	upsert bool
	want   string
	code   code.Code
	failOp string
	msg    string // the refusal's message contains it
}

// allTransformCases is every transform suite: both paths run all of them.
func allTransformCases() []transformCase {
	return slices.Concat(transformCases, numberCases, byValueCases)
}

var transformCases = []transformCase{
	// $set
	{name: "set/creates-intermediate-objects", before: `{"a":1}`, ops: `[{"op":"$set","path":"x.y.z","value":5}]`, want: `{"a":1,"x":{"y":{"z":5}}}`},
	{name: "set/overwrites-leaf", before: `{"a":{"b":1,"c":2}}`, ops: `[{"op":"$set","path":"a.b","value":"s"}]`, want: `{"a":{"b":"s","c":2}}`},
	{name: "set/extends-existing-object", before: `{"a":{"b":1}}`, ops: `[{"op":"$set","path":"a.c.d","value":true}]`, want: `{"a":{"b":1,"c":{"d":true}}}`},
	{name: "set/object-value-is-canonical", before: `{}`, ops: `[{"op":"$set","path":"o","value":{"b":1,"a":[2,{"d":1,"c":0}]}}]`, want: `{"o":{"a":[2,{"c":0,"d":1}],"b":1}}`},
	{name: "set/null-value", before: `{"a":1}`, ops: `[{"op":"$set","path":"a","value":null}]`, want: `{"a":null}`},
	{name: "set/upsert-creates-doc", ops: `[{"op":"$set","path":"x.y","value":1}]`, upsert: true, want: `{"x":{"y":1}}`},
	{name: "set/missing-doc-without-upsert", ops: `[{"op":"$set","path":"x","value":1}]`, code: code.DocumentNotFound},
	{name: "set/through-number-is-type-error", before: `{"a":1}`, ops: `[{"op":"$set","path":"a.b","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $set"},
	{name: "set/through-array-is-type-error", before: `{"a":{"b":[1]}}`, ops: `[{"op":"$set","path":"a.b.c","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $set"},

	// $unset
	{name: "unset/removes-dotted-leaf", before: `{"a":{"b":1,"c":2}}`, ops: `[{"op":"$unset","path":"a.b"}]`, want: `{"a":{"c":2}}`},
	{name: "unset/missing-leaf-is-noop", before: `{"a":{"c":2}}`, ops: `[{"op":"$unset","path":"a.b"}]`, want: `{"a":{"c":2}}`},
	{name: "unset/missing-intermediate-is-noop-and-creates-nothing", before: `{"a":1}`, ops: `[{"op":"$unset","path":"x.y.z"}]`, want: `{"a":1}`},
	{name: "unset/through-non-object-is-noop", before: `{"a":1}`, ops: `[{"op":"$unset","path":"a.b"}]`, want: `{"a":1}`},
	{name: "unset/upsert-creates-empty-doc", ops: `[{"op":"$unset","path":"a.b"}]`, upsert: true, want: `{}`},

	// $inc
	{name: "inc/int-plus-int-stays-integer", before: `{"n":{"c":41}}`, ops: `[{"op":"$inc","path":"n.c","value":1}]`, want: `{"n":{"c":42}}`},
	{name: "inc/negative", before: `{"n":5}`, ops: `[{"op":"$inc","path":"n","value":-7}]`, want: `{"n":-2}`},
	{name: "inc/large-ints-exact", before: `{"n":9007199254740993}`, ops: `[{"op":"$inc","path":"n","value":2}]`, want: `{"n":9007199254740995}`},
	{name: "inc/max-int64-reachable", before: `{"n":9223372036854775806}`, ops: `[{"op":"$inc","path":"n","value":1}]`, want: `{"n":9223372036854775807}`},
	{name: "inc/missing-path-starts-at-value-with-intermediates", before: `{}`, ops: `[{"op":"$inc","path":"a.b","value":3}]`, want: `{"a":{"b":3}}`},
	{name: "inc/upsert-creates-doc", ops: `[{"op":"$inc","path":"n","value":5}]`, upsert: true, want: `{"n":5}`},
	{name: "inc/float-sum", before: `{"n":0.5}`, ops: `[{"op":"$inc","path":"n","value":0.25}]`, want: `{"n":0.75}`},
	{name: "inc/int-plus-float", before: `{"n":1}`, ops: `[{"op":"$inc","path":"n","value":0.5}]`, want: `{"n":1.5}`},
	{name: "inc/float-plus-int", before: `{"n":2.25}`, ops: `[{"op":"$inc","path":"n","value":-1}]`, want: `{"n":1.25}`},
	{name: "inc/exponent-is-float", before: `{"n":1}`, ops: `[{"op":"$inc","path":"n","value":1e1}]`, want: `{"n":11}`},
	{name: "inc/applied-in-order", before: `{"n":1}`, ops: `[{"op":"$inc","path":"n","value":1},{"op":"$inc","path":"n","value":10}]`, want: `{"n":12}`},
	{name: "inc/past-int64-max-is-exact", before: `{"n":9223372036854775807}`, ops: `[{"op":"$inc","path":"n","value":1}]`, want: `{"n":9223372036854775808}`},
	{name: "inc/past-int64-min-is-exact", before: `{"n":-9223372036854775808}`, ops: `[{"op":"$inc","path":"n","value":-1}]`, want: `{"n":-9223372036854775809}`},
	{name: "inc/past-float64-max-is-exact", before: `{"n":1.7e308}`, ops: `[{"op":"$inc","path":"n","value":1.7e308}]`, want: `{"n":3.4e308}`},
	{name: "inc/on-string-is-type-error", before: `{"s":"x"}`, ops: `[{"op":"$inc","path":"s","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $inc"},
	{name: "inc/on-object-is-type-error", before: `{"o":{}}`, ops: `[{"op":"$inc","path":"o","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $inc"},
	{name: "inc/through-string-is-type-error", before: `{"s":"x"}`, ops: `[{"op":"$inc","path":"s.n","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $inc"},
	{name: "inc/later-op-failure-discards-earlier-ops", before: `{"n":1,"s":"x"}`, ops: `[{"op":"$inc","path":"n","value":1},{"op":"$set","path":"t","value":2},{"op":"$inc","path":"s","value":1}]`, code: code.InvalidRequest, failOp: "ops[2] $inc"},

	// $max / $min on numbers
	{name: "max/number-larger-replaces", before: `{"n":5}`, ops: `[{"op":"$max","path":"n","value":7}]`, want: `{"n":7}`},
	{name: "max/number-smaller-keeps", before: `{"n":5}`, ops: `[{"op":"$max","path":"n","value":3}]`, want: `{"n":5}`},
	{name: "max/float-vs-int", before: `{"n":5}`, ops: `[{"op":"$max","path":"n","value":5.5}]`, want: `{"n":5.5}`},
	{name: "max/missing-path-sets-with-intermediates", before: `{}`, ops: `[{"op":"$max","path":"a.b","value":1}]`, want: `{"a":{"b":1}}`},
	{name: "max/upsert-creates-doc", ops: `[{"op":"$max","path":"n","value":-1}]`, upsert: true, want: `{"n":-1}`},
	{name: "min/number-smaller-replaces", before: `{"n":5}`, ops: `[{"op":"$min","path":"n","value":3}]`, want: `{"n":3}`},
	{name: "min/number-larger-keeps", before: `{"n":5}`, ops: `[{"op":"$min","path":"n","value":9}]`, want: `{"n":5}`},
	{name: "min/negative-float", before: `{"a":{"n":-1}}`, ops: `[{"op":"$min","path":"a.n","value":-1.5}]`, want: `{"a":{"n":-1.5}}`},
	// $max / $min on strings
	{name: "max/string-larger-replaces", before: `{"s":"b"}`, ops: `[{"op":"$max","path":"s","value":"c"}]`, want: `{"s":"c"}`},
	{name: "max/string-smaller-keeps", before: `{"s":"b"}`, ops: `[{"op":"$max","path":"s","value":"a"}]`, want: `{"s":"b"}`},
	{name: "min/string-smaller-replaces", before: `{"s":"b"}`, ops: `[{"op":"$min","path":"s","value":"a"}]`, want: `{"s":"a"}`},
	{name: "min/string-larger-keeps", before: `{"s":"b"}`, ops: `[{"op":"$min","path":"s","value":"ba"}]`, want: `{"s":"b"}`},
	// $max / $min type errors
	{name: "max/number-vs-string-is-type-error", before: `{"n":5}`, ops: `[{"op":"$max","path":"n","value":"x"}]`, code: code.InvalidRequest, failOp: "ops[0] $max"},
	{name: "max/string-vs-number-is-type-error", before: `{"s":"x"}`, ops: `[{"op":"$max","path":"s","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $max"},
	{name: "min/string-vs-number-is-type-error", before: `{"s":"x"}`, ops: `[{"op":"$min","path":"s","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $min"},
	{name: "min/bool-is-type-error", before: `{"b":true}`, ops: `[{"op":"$min","path":"b","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $min"},
	{name: "max/through-non-object-is-type-error", before: `{"a":[1]}`, ops: `[{"op":"$max","path":"a.b","value":1}]`, code: code.InvalidRequest, failOp: "ops[0] $max"},

	// $addToSet
	{name: "addToSet/missing-path-creates-array", before: `{}`, ops: `[{"op":"$addToSet","path":"a.tags","value":"x"}]`, want: `{"a":{"tags":["x"]}}`},
	{name: "addToSet/appends-new-element", before: `{"tags":["x"]}`, ops: `[{"op":"$addToSet","path":"tags","value":"y"}]`, want: `{"tags":["x","y"]}`},
	{name: "addToSet/existing-element-is-noop", before: `{"tags":["x","y"]}`, ops: `[{"op":"$addToSet","path":"tags","value":"x"}]`, want: `{"tags":["x","y"]}`},
	{name: "addToSet/equal-object-any-key-order-is-noop", before: `{"t":[{"a":1,"b":2}]}`, ops: `[{"op":"$addToSet","path":"t","value":{"b":2,"a":1}}]`, want: `{"t":[{"a":1,"b":2}]}`},
	{name: "addToSet/number-and-string-differ", before: `{"t":[1]}`, ops: `[{"op":"$addToSet","path":"t","value":"1"}]`, want: `{"t":[1,"1"]}`},
	{name: "addToSet/upsert-creates-doc", ops: `[{"op":"$addToSet","path":"t","value":1}]`, upsert: true, want: `{"t":[1]}`},
	{name: "addToSet/on-string-is-type-error", before: `{"t":"x"}`, ops: `[{"op":"$addToSet","path":"t","value":"y"}]`, code: code.InvalidRequest, failOp: "ops[0] $addToSet"},
	{name: "addToSet/on-object-is-type-error", before: `{"t":{}}`, ops: `[{"op":"$addToSet","path":"t","value":"y"}]`, code: code.InvalidRequest, failOp: "ops[0] $addToSet"},
	{name: "addToSet/through-string-is-type-error", before: `{"t":"x"}`, ops: `[{"op":"$addToSet","path":"t.u","value":"y"}]`, code: code.InvalidRequest, failOp: "ops[0] $addToSet"},
}

func (c transformCase) body() string {
	return fmt.Sprintf(`{"transforms":[{"id":"d","ops":%s,"upsert":%t}]}`, c.ops, c.upsert)
}

// seed creates a fresh table for case i and stores its "before" document.
func (c transformCase) seed(t *testing.T, f *fixture, i int) string {
	t.Helper()
	tbl := fmt.Sprintf("tr%d", i)
	f.create(t, tbl, 0)
	if c.before != "" {
		f.mustFast(t, tbl, `{"inserts":[{"id":"d","doc":`+c.before+`}]}`)
		if got := f.doc(t, tbl, "d"); got != c.before {
			t.Fatalf("seeded %s, stored %s", c.before, got)
		}
	}
	return tbl
}

// checkRefusal asserts err is the case's typed failure naming its op.
func (c transformCase) checkRefusal(t *testing.T, errCode code.Code, msg string) {
	t.Helper()
	if errCode != c.code {
		t.Fatalf("code %s (%s), want %s", errCode, msg, c.code)
	}
	if c.failOp != "" && !strings.Contains(msg, c.failOp) {
		t.Fatalf("message %q does not name %q", msg, c.failOp)
	}
	if !strings.Contains(msg, c.msg) {
		t.Fatalf("message %q does not contain %q", msg, c.msg)
	}
}

// TestTransform_FastPathSemanticsAndTypeErrorsWriteNothing proves every op's
// semantics on dotted paths through ApplyFast, and that a failing transform
// is a typed error that leaves the whole store unchanged.
func TestTransform_FastPathSemanticsAndTypeErrorsWriteNothing(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	for i, c := range allTransformCases() {
		t.Run(c.name, func(t *testing.T) {
			tbl := c.seed(t, f, i)
			before := dump(t, f.db)
			res, err := f.fast(t, tbl, c.body())
			if c.code != "" {
				ce := wantCode(t, err, c.code)
				c.checkRefusal(t, ce.Code, ce.Message)
				if after := dump(t, f.db); after != before {
					t.Fatalf("a failed transform wrote:\nbefore\n%s\nafter\n%s", before, after)
				}
				if got := f.doc(t, tbl, "d"); got != c.before {
					t.Fatalf("doc = %q, want unchanged %q", got, c.before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res != (table.Result{Transformed: 1}) {
				t.Fatalf("result %+v", res)
			}
			if got := f.doc(t, tbl, "d"); got != c.want {
				t.Fatalf("doc = %s, want %s", got, c.want)
			}
		})
	}
}

// TestTransform_TwoPCSemanticsAndTypeErrorsRefuseWithoutWriting proves the
// same semantics through 2PC: a valid transform commits to the same document
// as the fast path; a failing one is a Refused vote with the same code, and
// Begin wrote nothing (no record, no intent, no document change).
func TestTransform_TwoPCSemanticsAndTypeErrorsRefuseWithoutWriting(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	for i, c := range allTransformCases() {
		t.Run(c.name, func(t *testing.T) {
			tbl := c.seed(t, f, i)
			before := dump(t, f.db)
			plan := f.plan(t, tbl, c.body())
			txn := txnOf(fmt.Sprintf("tx-%d", i), plan)
			res, err := f.coord.Begin(ctx, txn, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.code != "" {
				if res.Refused == nil {
					t.Fatalf("begin %+v, want Refused %s", res, c.code)
				}
				c.checkRefusal(t, res.Refused.Code, res.Refused.Message)
				if after := dump(t, f.db); after != before {
					t.Fatalf("a refused begin wrote:\nbefore\n%s\nafter\n%s", before, after)
				}
				if st, err := f.coord.Lookup(ctx, txn.ID); err != nil || st.Begun || st.Decision != nil {
					t.Fatalf("refused txn is durable: %+v %v", st, err)
				}
				if k := keysUnder(t, f.db, store.NSIntent.Prefix(plan.Table.ID)); len(k) != 0 {
					t.Fatalf("intents after refusal: %q", k)
				}
				return
			}
			if !res.Prepared {
				t.Fatalf("begin %+v", res)
			}
			o, won, err := f.coord.DecideOrLearn(ctx, txn.ID, txn.Participants, twopc.Committed{}, nil)
			if err != nil || !won {
				t.Fatalf("decide: %v %v %v", o, won, err)
			}
			if got := f.doc(t, tbl, "d"); got != c.want {
				t.Fatalf("doc = %s, want %s", got, c.want)
			}
			if plan.Result() != (table.Result{Transformed: 1}) {
				t.Fatalf("result %+v", plan.Result())
			}
		})
	}
}

// TestTransform_RepeatedIntegerIncStaysExact proves $inc of an integer
// beyond float64's exact range, repeated, stays an exact integer (no float
// rounding).
func TestTransform_RepeatedIntegerIncStaysExact(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 1)
	f.mustFast(t, "t", `{"inserts":[{"id":"d","doc":{"n":9007199254740000}}]}`)
	for range 20 {
		f.mustFast(t, "t", `{"transforms":[{"id":"d","ops":[{"op":"$inc","path":"n","value":1}]}]}`)
	}
	if got := f.doc(t, "t", "d"); got != `{"n":9007199254740020}` {
		t.Fatalf("doc = %s", got)
	}
}
