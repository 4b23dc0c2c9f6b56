package table_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// stringPositions are every place a request body holds a string; %s is the
// string's content.
var stringPositions = map[string]string{
	"member-name":        `{"%s":[]}`,
	"insert-member-name": `{"inserts":[{"%s":"a","doc":{}}]}`,
	"insert-id":          `{"inserts":[{"id":"%s","doc":{}}]}`,
	"doc-value":          `{"inserts":[{"id":"a","doc":{"s":"%s"}}]}`,
	"doc-key":            `{"inserts":[{"id":"a","doc":{"%s":1}}]}`,
	"doc-nested-key":     `{"inserts":[{"id":"a","doc":{"a":[{"b":1,"%s":2}]}}]}`,
	"doc-array-element":  `{"inserts":[{"id":"a","doc":{"a":[1,"%s"]}}]}`,
	"delete-id":          `{"deletes":["%s"]}`,
	"transform-id":       `{"transforms":[{"id":"%s","ops":[{"op":"$unset","path":"p"}]}]}`,
	"op-name":            `{"transforms":[{"id":"a","ops":[{"op":"%s","path":"p"}]}]}`,
	"op-path":            `{"transforms":[{"id":"a","ops":[{"op":"$unset","path":"%s"}]}]}`,
	"op-value":           `{"transforms":[{"id":"a","ops":[{"op":"$max","path":"p","value":"%s"}]}]}`,
	"op-value-key":       `{"transforms":[{"id":"a","ops":[{"op":"$set","path":"p","value":{"%s":true}}]}]}`,
}

// TestDecodeBatch_RefusesLoneSurrogatesEverywhere: a \u escape of half a
// UTF-16 pair anywhere in a body is invalid_request naming the escape.
// encoding/json would read U+FFFD, so "\ud800" and "\udc00" would be one
// request and the second would replay the first; refused, no receipt can
// exist for either.
func TestDecodeBatch_RefusesLoneSurrogatesEverywhere(t *testing.T) {
	lone := map[string]string{ // content → the escape named
		`\ud800`:                 `\ud800`,
		`\udc00`:                 `\udc00`,
		`\uDBFF`:                 `\uDBFF`,
		`x\uDFFFy`:               `\uDFFF`,
		`\ud800\u0041`:           `\ud800`,
		`\ud800\ud800`:           `\ud800`,
		`\udc00\ud800`:           `\udc00`,
		`\ud83d`:                 `\ud83d`,
		`\ud83dx\ude00`:          `\ud83d`,
		`\ud83d\n`:               `\ud83d`,
		`ok \ud83d\ude00 \ude00`: `\ude00`,
	}
	for pos, tmpl := range stringPositions {
		for content, named := range lone {
			body := fmt.Sprintf(tmpl, content)
			_, err := table.DecodeBatch([]byte(body))
			ce := wantCode(t, err, code.InvalidRequest)
			want := "lone UTF-16 surrogate escape " + named + " (only a high-low pair encodes a character) at offset "
			if !strings.Contains(ce.Message, want) {
				t.Errorf("%s %s: %q, want it to contain %q", pos, content, ce.Message, want)
			}
		}
	}
}

// TestDecodeBatch_RefusesInvalidUTF8Everywhere: raw bytes that are not
// UTF-8 (including an encoded surrogate) are invalid_request naming the
// byte and its offset.
func TestDecodeBatch_RefusesInvalidUTF8Everywhere(t *testing.T) {
	for pos, tmpl := range stringPositions {
		for _, content := range []string{"\xff", "a\xc3(", "\xed\xa0\x80", `\n` + "\x80"} {
			body := fmt.Sprintf(tmpl, content)
			off := strings.Index(body, content) + strings.IndexFunc(content, func(r rune) bool { return r == '\uFFFD' })
			_, err := table.DecodeBatch([]byte(body))
			ce := wantCode(t, err, code.InvalidRequest)
			want := fmt.Sprintf("invalid UTF-8 byte 0x%02x in string at offset %d", body[off], off)
			if !strings.Contains(ce.Message, want) {
				t.Errorf("%s %q: %q, want it to contain %q", pos, content, ce.Message, want)
			}
		}
	}
}

// TestValidate_StructBatchRefusesBadTextToo: a batch built in Go (not
// decoded) is held to the same rules by Validate, before any receipt.
func TestValidate_StructBatchRefusesBadTextToo(t *testing.T) {
	for name, c := range map[string]struct {
		b   *table.Batch
		msg string
	}{
		"doc-lone-surrogate": {&table.Batch{Inserts: []table.Insert{{ID: "a", Doc: []byte(`{"k":"\udc00"}`)}}},
			`inserts[0]: doc is not acceptable JSON: lone UTF-16 surrogate escape \udc00 (only a high-low pair encodes a character) at offset 6`},
		"value-lone-surrogate": {&table.Batch{Transforms: []table.Transform{{ID: "a", Ops: []table.Op{{Op: "$set", Path: "p", Value: []byte(`["\ud800"]`)}}}}},
			`transforms[0].ops[0]: value is not acceptable JSON: lone UTF-16 surrogate escape \ud800 (only a high-low pair encodes a character) at offset 2`},
		"path-invalid-utf8": {&table.Batch{Transforms: []table.Transform{{ID: "a", Ops: []table.Op{{Op: "$unset", Path: "p\xff"}}}}},
			`transforms[0].ops[0]: path "p\xff" is not valid UTF-8`},
		"doc-101-digits": {&table.Batch{Inserts: []table.Insert{{ID: "a", Doc: []byte(`{"n":1.` + nines100 + `}`)}}},
			`inserts[0]: doc is not acceptable JSON: number has 101 digits (max 100 before the exponent) at offset 5`},
		"doc-boolean": {&table.Batch{Inserts: []table.Insert{{ID: "a", Doc: []byte(` true`)}}},
			`inserts[0]: doc must be a JSON object, not a boolean`},
	} {
		err := c.b.Validate()
		if err == nil || err.Code != code.InvalidRequest || err.Message != c.msg {
			t.Errorf("%s: %v, want invalid_request %q", name, err, c.msg)
		}
	}
}

// TestInsert_ValidTextIsStoredAsUTF8: surrogate pairs (either case) are a
// character, stored as its UTF-8; numbers at the limits are stored as written.
func TestInsert_ValidTextIsStoredAsUTF8(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 0)
	edge := `{"big":` + nines100 + `,"frac":-0.` + nines100[1:] + `,"hi":1E+1000,"lo":-1e-1000}`
	for body, want := range map[string]string{
		`{"inserts":[{"id":"a","doc":{"\ud83d\ude00":"\uD83D\uDE00"}}]}`:                                               `{"😀":"😀"}`,
		`{"inserts":[{"id":"a","doc":` + edge + `}]}`:                                                                  edge,
		`{"transforms":[{"id":"a","upsert":true,"ops":[{"op":"$set","path":"\ud83d\ude00","value":"\ud83d\ude00"}]}]}`: `{"😀":"😀"}`,
	} {
		f.mustFast(t, "t", `{"deletes":["a"]}`)
		f.mustFast(t, "t", body)
		if got := f.doc(t, "t", "a"); got != want {
			t.Errorf("%s: stored %s, want %s", body, got, want)
		}
	}
}

// nested is n objects, each the only member of the one around it.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
}

// TestDepth_TransformResultHasTheInsertLimit: the deepest document an insert
// accepts (docDepthMax levels, counted from the document itself) can be
// built by $set, read back and inserted again; one level deeper is refused
// both ways, naming the limit.
func TestDepth_TransformResultHasTheInsertLimit(t *testing.T) {
	f := newFixture(t, twopc.Options{})
	f.create(t, "t", 0)
	deepest, deeper := nested(table.DocDepthMax), nested(table.DocDepthMax+1)
	f.mustFast(t, "t", `{"inserts":[{"id":"ins","doc":`+deepest+`}]}`)
	if got := f.doc(t, "t", "ins"); got != deepest {
		t.Fatalf("stored %s", got)
	}
	path16 := strings.TrimSuffix(strings.Repeat("a.", table.PathDepthMax), ".")
	for _, c := range []struct{ path, value string }{
		{"a", nested(table.DocDepthMax - 1)},
		{path16, nested(table.DocDepthMax - table.PathDepthMax)},
	} {
		set := fmt.Sprintf(`{"transforms":[{"id":"set","upsert":true,"ops":[{"op":"$set","path":%q,"value":%s}]}]}`, c.path, c.value)
		f.mustFast(t, "t", `{"deletes":["set"]}`)
		f.mustFast(t, "t", set)
		got := f.doc(t, "t", "set")
		if got != deepest {
			t.Fatalf("$set %s built %s, want %s", c.path, got, deepest)
		}
		f.mustFast(t, "t", `{"inserts":[{"id":"again","doc":`+got+`}]}`)

		// One level deeper: $set refuses it, so does an insert.
		f.mustFast(t, "t", `{"deletes":["set"]}`)
		over := strings.Replace(set, c.value, `{"a":`+c.value+`}`, 1)
		_, err := f.fast(t, "t", over)
		ce := wantCode(t, err, code.InvalidRequest)
		if want := `transform of "set": the result nests deeper than 64 levels (the limit for any document)`; ce.Message != want {
			t.Fatalf("$set %s one deeper: %q, want %q", c.path, ce.Message, want)
		}
	}
	_, err := table.DecodeBatch([]byte(`{"inserts":[{"id":"ins","doc":` + deeper + `}]}`))
	ce := wantCode(t, err, code.InvalidRequest)
	if want := "nesting deeper than 64 levels (the limit for any document or value)"; !strings.Contains(ce.Message, want) {
		t.Fatalf("insert one deeper: %q", ce.Message)
	}
	b := &table.Batch{Inserts: []table.Insert{{ID: "x", Doc: []byte(deepest)}}}
	if err := b.Validate(); err != nil {
		t.Fatalf("a Go batch of the deepest document: %v", err)
	}
	b = &table.Batch{Inserts: []table.Insert{{ID: "x", Doc: []byte(deeper)}}}
	if err := b.Validate(); err == nil || !strings.Contains(err.Message, "nesting deeper than 64 levels") {
		t.Fatalf("a Go batch one deeper: %v", err)
	}
}
