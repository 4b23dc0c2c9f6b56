package table

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

var canonSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `-12.50E-3`, `"x"`,
	`{"b":1,"a":{"z":[1,2,{"y":true,"x":null}],"c":"x\u00e9\n"}}`,
	`{ "a" : [ 1 , 2 ] , "B" : "\u2028\u2029<>&" }`,
	`"\ud83d\ude00 \uD83D\uDE00 \u0001\b\f\n\r\t\"\\\/"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`,
	`{"é":1,"e":2,"E":3,"":4}`,
	`[[[[{"k":[{"j":{}}]}]]]]`,
	`[1e1000,-1e-1000,0.5E+10,` + strings.Repeat("9", NumberDigitsMax) + `]`, `[1e1001]`, `[1` + strings.Repeat("0", NumberDigitsMax) + `]`,
	`{"a":1,"a":2}`, `{"a":1}x`, `{"a" 1}`, `[1,]`, `01`, `1.`, `-`, `"\x"`, "\"a\x01\"", `"\u12"`, `tru`, ``, `  `,
	"\"\xff\"", `{"a":"\ud83d"}`,
}

// TestCanonical_MatchesEncodingJSON proves the hand-written canonicalizer is
// exactly "decode with encoding/json (UseNumber), re-encode with sorted keys
// and no HTML escaping", on every input encoding/json accepts without
// duplicate keys, and rejects what it rejects.
func TestCanonical_MatchesEncodingJSON(t *testing.T) {
	for _, s := range canonSeeds {
		checkCanonical(t, []byte(s))
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkCanonical(t, in) })
}

func checkCanonical(t *testing.T, in []byte) {
	t.Helper()
	got, err := appendCanonical(nil, in)
	refVal, refErr := decodeValue(in)
	if refErr != nil || !json.Valid(in) {
		if err == nil {
			t.Fatalf("%q: canonicalized to %q, but encoding/json rejects it (%v)", in, got, refErr)
		}
		return
	}
	if err != nil {
		for _, stricter := range []string{"duplicate object key", "invalid UTF-8", "nesting", "lone UTF-16 surrogate", "number has", "number exponent"} {
			if strings.Contains(err.Error(), stricter) {
				return // stricter than encoding/json on purpose
			}
		}
		t.Fatalf("%q: rejected (%v), encoding/json accepts it", in, err)
	}
	want, err := marshalValue(refVal)
	if err != nil {
		t.Fatalf("%q: reference encode: %v", in, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%q:\n got %q\nwant %q", in, got, want)
	}
	again, err := appendCanonical(nil, got)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("%q: not idempotent: %q then %q (%v)", in, got, again, err)
	}
}

// TestDecodeBatch_MatchesEncodingJSONShape: the one-pass decoder reads the
// same batch encoding/json does, with canonical documents, and refuses
// members encoding/json would have matched case-insensitively.
func TestDecodeBatch_MatchesEncodingJSONShape(t *testing.T) {
	body := `{"inserts":[{"id":"a","doc":{"b":1, "a":[2]}}],"deletes":["x"],
	  "transforms":[{"id":"c","upsert":true,"ops":[{"op":"$inc","path":"n","value":1},{"op":"$unset","path":"m"}]}]}`
	b, err := DecodeBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(b.Inserts[0].Doc) != `{"a":[2],"b":1}` || b.Deletes[0] != "x" || !b.Transforms[0].Upsert ||
		len(b.Transforms[0].Ops) != 2 || string(b.Transforms[0].Ops[0].Value) != "1" || b.Transforms[0].Ops[1].Value != nil {
		t.Fatalf("decoded %+v", b)
	}
	for _, bad := range []string{`{"INSERTS":[]}`, `{"inserts":[{"id":"a","doc":{},"x":1}]}`, `{"inserts":[],"inserts":[]}`, `[]`, `{"deletes":[1]}`} {
		if _, err := DecodeBatch([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestValidate_SharedBatchIsRaceFree: a validated batch may be shared by
// goroutines (duplicate requests reuse one decoded body); validation is
// computed once and read safely (run under -race).
func TestValidate_SharedBatchIsRaceFree(t *testing.T) {
	b := &Batch{Inserts: []Insert{{ID: "a", Doc: []byte(`{"z":1,"a":2}`)}}}
	var wg sync.WaitGroup
	out := make([][]byte, 8)
	for i := range out {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := b.Canonical()
			if err != nil {
				t.Error(err)
			}
			out[i] = c
		}(i)
	}
	wg.Wait()
	for _, c := range out {
		if string(c) != `{"inserts":[{"id":"a","doc":{"a":2,"z":1}}]}` {
			t.Fatalf("canonical %s", c)
		}
	}
}
