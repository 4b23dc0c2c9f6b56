package table_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

func deletesBody(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%q", fmt.Sprintf("d%d", i))
	}
	return `{"deletes":[` + strings.Join(ids, ",") + `]}`
}

func opsBody(n int) string {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"op":"$inc","path":"n%d","value":1}`, i)
	}
	return `{"transforms":[{"id":"a","ops":[` + strings.Join(ops, ",") + `]}]}`
}

func pathBody(path string) string {
	return fmt.Sprintf(`{"transforms":[{"id":"a","ops":[{"op":"$set","path":%q,"value":1}]}]}`, path)
}

// preflightCases are batches (for table "t", or for table when set) that
// preflight must reject with code, its message containing msg.
var preflightCases = []struct {
	name  string
	table string
	body  string
	code  code.Code
	msg   string
}{
	{name: "missing-table", table: "nope", body: `{"deletes":["a"]}`, code: code.TableNotFound, msg: `"nope"`},
	{name: "invalid-table-name", table: "a/b", body: `{"deletes":["a"]}`, code: code.InvalidRequest, msg: `invalid table name "a/b" (1..64 of A-Z a-z 0-9 _ -)`},
	{name: "empty-batch", body: `{}`, code: code.InvalidRequest, msg: "empty"},
	{name: "empty-arrays", body: `{"inserts":[],"deletes":[],"transforms":[]}`, code: code.InvalidRequest, msg: "empty"},
	{name: "doc-id-empty", body: `{"deletes":[""]}`, code: code.InvalidRequest, msg: "deletes[0]: invalid document id"},
	{name: "doc-id-slash", body: `{"deletes":["a/b"]}`, code: code.InvalidRequest, msg: "deletes[0]: invalid document id"},
	{name: "doc-id-dot", body: `{"inserts":[{"id":".","doc":{}}]}`, code: code.InvalidRequest, msg: "inserts[0]: invalid document id"},
	{name: "doc-id-dot-dot", body: `{"deletes":[".."]}`, code: code.InvalidRequest, msg: "deletes[0]: invalid document id"},
	{name: "doc-id-space", body: `{"inserts":[{"id":"a b","doc":{}}]}`, code: code.InvalidRequest, msg: "inserts[0]: invalid document id"},
	{name: "doc-id-non-ascii", body: `{"transforms":[{"id":"é","ops":[{"op":"$unset","path":"a"}]}]}`, code: code.InvalidRequest, msg: "transforms[0]: invalid document id"},
	{name: "doc-id-too-long", body: `{"deletes":["` + strings.Repeat("x", table.DocIDBytesMax+1) + `"]}`, code: code.InvalidRequest, msg: "invalid document id"},
	{name: "duplicate-insert-delete", body: `{"inserts":[{"id":"a","doc":{}}],"deletes":["a"]}`, code: code.InvalidRequest, msg: `deletes[0]: document "a" is also touched by inserts[0]`},
	{name: "duplicate-delete", body: `{"deletes":["a","b","a"]}`, code: code.InvalidRequest, msg: `deletes[2]: document "a" is also touched by deletes[0]`},
	{name: "duplicate-transform", body: `{"transforms":[{"id":"a","ops":[{"op":"$unset","path":"x"}]},{"id":"a","ops":[{"op":"$unset","path":"y"}]}]}`, code: code.InvalidRequest, msg: "also touched by transforms[0]"},
	{name: "too-many-docs", body: deletesBody(table.BatchDocsMax + 1), code: code.InvalidRequest, msg: fmt.Sprintf("max %d", table.BatchDocsMax)},
	{name: "non-object-doc-array", body: `{"inserts":[{"id":"a","doc":[1]}]}`, code: code.InvalidRequest, msg: "inserts[0]: doc must be a JSON object, not an array"},
	{name: "non-object-doc-number", body: `{"inserts":[{"id":"a","doc":1}]}`, code: code.InvalidRequest, msg: "doc must be a JSON object, not a number"},
	{name: "non-object-doc-string", body: `{"inserts":[{"id":"a","doc":"x"}]}`, code: code.InvalidRequest, msg: "doc must be a JSON object, not a string"},
	{name: "non-object-doc-boolean", body: `{"inserts":[{"id":"a","doc":false}]}`, code: code.InvalidRequest, msg: "doc must be a JSON object, not a boolean"},
	{name: "null-doc", body: `{"inserts":[{"id":"a","doc":null}]}`, code: code.InvalidRequest, msg: "doc must be a JSON object, not null"},
	{name: "missing-doc", body: `{"inserts":[{"id":"a"}]}`, code: code.InvalidRequest, msg: "doc must be a JSON object and is missing"},
	{name: "doc-number-101-digits", body: `{"inserts":[{"id":"a","doc":{"n":` + nines100 + `9}}]}`, code: code.InvalidRequest, msg: "number has 101 digits (max 100 before the exponent) at offset 33"},
	{name: "doc-number-101-digits-with-fraction", body: `{"inserts":[{"id":"a","doc":{"n":[0.` + nines100 + `]}}]}`, code: code.InvalidRequest, msg: "number has 101 digits (max 100 before the exponent) at offset 34"},
	{name: "doc-number-exponent-1001", body: `{"inserts":[{"id":"a","doc":{"n":1e-1001}}]}`, code: code.InvalidRequest, msg: "number exponent is beyond ±1000 at offset 33"},
	{name: "doc-number-exponent-huge", body: `{"inserts":[{"id":"a","doc":{"n":1E+99999999999999999999}}]}`, code: code.InvalidRequest, msg: "number exponent is beyond ±1000"},
	{name: "op-value-101-digits", body: `{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":-` + nines100 + `9}]}]}`, code: code.InvalidRequest, msg: "number has 101 digits"},
	{name: "set-value-exponent-1001", body: `{"transforms":[{"id":"a","ops":[{"op":"$set","path":"n","value":{"x":[1e1001]}}]}]}`, code: code.InvalidRequest, msg: "number exponent is beyond ±1000"},
	{name: "doc-too-large", body: `{"inserts":[{"id":"a","doc":{"s":"` + strings.Repeat("x", table.DocBytesMax) + `"}}]}`, code: code.InvalidRequest, msg: "bytes (max"},
	{name: "unknown-op", body: `{"transforms":[{"id":"a","ops":[{"op":"$push","path":"x","value":1}]}]}`, code: code.InvalidRequest, msg: `unknown op "$push"`},
	{name: "op-without-dollar", body: `{"transforms":[{"id":"a","ops":[{"op":"set","path":"x","value":1}]}]}`, code: code.InvalidRequest, msg: "unknown op"},
	{name: "set-missing-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$set","path":"x"}]}]}`, code: code.InvalidRequest, msg: "$set needs a value"},
	{name: "addToSet-missing-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$addToSet","path":"x"}]}]}`, code: code.InvalidRequest, msg: "$addToSet needs a value"},
	{name: "inc-missing-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"x"}]}]}`, code: code.InvalidRequest, msg: "$inc needs a number"},
	{name: "inc-string-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"x","value":"1"}]}]}`, code: code.InvalidRequest, msg: "$inc needs a number"},
	{name: "max-missing-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$max","path":"x"}]}]}`, code: code.InvalidRequest, msg: "$max needs a number or string"},
	{name: "min-object-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$min","path":"x","value":{}}]}]}`, code: code.InvalidRequest, msg: "$min needs a number or string"},
	{name: "unset-with-value", body: `{"transforms":[{"id":"a","ops":[{"op":"$unset","path":"x","value":1}]}]}`, code: code.InvalidRequest, msg: "$unset takes no value"},
	{name: "no-ops", body: `{"transforms":[{"id":"a","ops":[]}]}`, code: code.InvalidRequest, msg: "transforms[0]: 0 ops"},
	{name: "too-many-ops", body: opsBody(table.TransformOpsMax + 1), code: code.InvalidRequest, msg: fmt.Sprintf("%d ops", table.TransformOpsMax+1)},
	{name: "empty-path", body: pathBody(""), code: code.InvalidRequest, msg: "path must be"},
	{name: "path-empty-segment", body: pathBody("a..b"), code: code.InvalidRequest, msg: "empty segment"},
	{name: "path-leading-dot", body: pathBody(".a"), code: code.InvalidRequest, msg: "empty segment"},
	{name: "path-too-deep", body: pathBody(strings.Repeat("a.", table.PathDepthMax) + "a"), code: code.InvalidRequest, msg: "deeper than"},
	{name: "path-too-long", body: pathBody(strings.Repeat("a", table.PathBytesMax+1)), code: code.InvalidRequest, msg: "path must be"},
	{name: "first-error-wins", body: `{"inserts":[{"id":"a","doc":1}],"deletes":["a/b"],"transforms":[{"id":"c","ops":[]}]}`, code: code.InvalidRequest, msg: "inserts[0]: doc must be a JSON object, not a number"},
}

// TestPreflight_RejectsWithDeterministicTypedErrors proves every invalid
// batch gets a *code.Error with the right code, and that the same input
// always yields the identical error (code and message), whether the batch
// is decoded again or reused.
func TestPreflight_RejectsWithDeterministicTypedErrors(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 0)
	before := dump(t, f.db)
	for _, c := range preflightCases {
		t.Run(c.name, func(t *testing.T) {
			tbl := c.table
			if tbl == "" {
				tbl = "t"
			}
			b := decode(t, c.body)
			var first *code.Error
			for i := range 5 {
				if i%2 == 1 {
					b = decode(t, c.body)
				}
				p, err := f.tables.Preflight(ctx, tenant, tbl, b)
				if p != nil {
					t.Fatalf("got a plan for an invalid batch")
				}
				ce := wantCode(t, err, c.code)
				if first == nil {
					first = ce
					if !strings.Contains(ce.Message, c.msg) {
						t.Fatalf("message %q does not contain %q", ce.Message, c.msg)
					}
					continue
				}
				if *ce != *first {
					t.Fatalf("attempt %d: %+v, first %+v", i, *ce, *first)
				}
			}
			if c.table == "" {
				if verr := b.Validate(); verr == nil || *verr != *first {
					t.Fatalf("Validate = %v, Preflight = %v", verr, first)
				}
			}
		})
	}
	if after := dump(t, f.db); after != before {
		t.Fatal("preflight wrote to the store")
	}
}

// TestPreflight_AcceptsLimitsExactly proves the bounds are inclusive: a
// batch at every limit passes.
func TestPreflight_AcceptsLimitsExactly(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 0)
	for name, body := range map[string]string{
		"docs-max":   deletesBody(table.BatchDocsMax),
		"ops-max":    opsBody(table.TransformOpsMax),
		"id-max":     `{"deletes":["` + strings.Repeat("x", table.DocIDBytesMax) + `"]}`,
		"id-charset": `{"deletes":["AZaz09_.:@~-"]}`,
		"depth-max":  pathBody(strings.Repeat("a.", table.PathDepthMax-1) + "a"),
		"path-max":   pathBody(strings.Repeat("a", table.PathBytesMax)),
	} {
		if _, err := f.tables.Preflight(context.Background(), tenant, "t", decode(t, body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDecodeBatch_RejectsMalformedInputAsInvalidRequest proves malformed
// JSON, unknown members at any depth, wrong types and trailing data are all
// invalid_request, deterministically.
func TestDecodeBatch_RejectsMalformedInputAsInvalidRequest(t *testing.T) {
	for name, body := range map[string]string{
		"not-json":            `not json`,
		"empty":               ``,
		"truncated":           `{"inserts":[`,
		"unknown-top-level":   `{"insert":[]}`,
		"unknown-in-insert":   `{"inserts":[{"id":"a","doc":{},"ttl":1}]}`,
		"unknown-in-op":       `{"transforms":[{"id":"a","ops":[{"op":"$set","path":"x","value":1,"extra":true}]}]}`,
		"unknown-in-tr":       `{"transforms":[{"id":"a","ops":[],"bogus":1}]}`,
		"wrong-type-deletes":  `{"deletes":"a"}`,
		"wrong-type-upsert":   `{"transforms":[{"id":"a","ops":[],"upsert":"yes"}]}`,
		"not-an-object":       `[1,2]`,
		"trailing-object":     `{} {}`,
		"trailing-garbage":    `{"deletes":["a"]}x`,
		"trailing-comma":      `{"deletes":["a"]},`,
		"trailing-array":      `{"deletes":["a"]}[]`,
		"trailing-number":     `{} 1`,
		"invalid-utf8-escape": `{"deletes":["\x"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := table.DecodeBatch([]byte(body))
			if b != nil {
				t.Fatalf("decoded %+v", b)
			}
			ce := wantCode(t, err, code.InvalidRequest)
			_, err2 := table.DecodeBatch([]byte(body))
			if ce2 := wantCode(t, err2, code.InvalidRequest); *ce2 != *ce {
				t.Fatalf("not deterministic: %v vs %v", ce, ce2)
			}
		})
	}
	for _, ok := range []string{`{"deletes":["a"]}`, "  {\"deletes\":[\"a\"]}\n\t ", `{"deletes":["a"]}` + "\r\n"} {
		if _, err := table.DecodeBatch([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestCanonical_KeyOrderAndWhitespaceDoNotChangeBytes proves two batches
// with the same documents and ops but different object key order (at any
// depth, in docs, op values and the batch itself) and whitespace have
// identical canonical bytes, and that a different value does not.
func TestCanonical_KeyOrderAndWhitespaceDoNotChangeBytes(t *testing.T) {
	a := `{"inserts":[{"id":"a","doc":{"b":1,"a":{"y":[{"q":1,"p":2}],"x":"<&>"}}}],` +
		`"deletes":["z"],` +
		`"transforms":[{"id":"c","ops":[{"op":"$set","path":"p","value":{"k2":1,"k1":{"n":2,"m":1}}},{"op":"$unset","path":"u"}],"upsert":true}]}`
	b := "{ \"transforms\" : [ { \"upsert\":true, \"ops\":[{\"value\":{\"k1\":{\"m\":1,\"n\":2},\"k2\":1},\"path\":\"p\",\"op\":\"$set\"},{\"path\":\"u\",\"op\":\"$unset\"}], \"id\":\"c\" } ],\n" +
		" \"deletes\":[\"z\"], \"inserts\":[{\"doc\":{\"a\":{\"x\":\"<&>\",\"y\":[{\"p\":2,\"q\":1}]},\"b\":1},\"id\":\"a\"}] }"
	ca, err := decode(t, a).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := decode(t, b).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca, cb) {
		t.Fatalf("canonical bytes differ:\n%s\n%s", ca, cb)
	}
	if !json.Valid(ca) {
		t.Fatalf("canonical form is not JSON: %s", ca)
	}
	// The canonical form is a fixed point and round-trips through DecodeBatch.
	cc, err := decode(t, string(ca)).Canonical()
	if err != nil || !bytes.Equal(cc, ca) {
		t.Fatalf("canonical of canonical differs: %s, %v", cc, err)
	}
	// Plans carry the same canonical bytes.
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 0)
	if pa, pb := f.plan(t, "t", a), f.plan(t, "t", b); !bytes.Equal(pa.Canonical, pb.Canonical) || !bytes.Equal(pa.Canonical, ca) {
		t.Fatalf("plan canonical differs: %s / %s", pa.Canonical, pb.Canonical)
	}
	// A different value is a different request.
	d := strings.Replace(a, `"b":1`, `"b":2`, 1)
	cd, err := decode(t, d).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(cd, ca) {
		t.Fatal("different documents have the same canonical bytes")
	}
}
