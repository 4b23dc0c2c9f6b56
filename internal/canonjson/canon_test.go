package canonjson

import (
	"bytes"
	"encoding/json"
	"strings"
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
	// plain ASCII strings (copied as they are) beside ones that are not
	"\"a\x7fb\"", `{"plain key":"plain ~ value","k\u00e9":"x\ty","<&>":"é"}`, "\"ab\xe2\x80\xa8cd\"",
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
	got, err := Append(nil, in)
	refVal, refErr := Decode(in)
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
	want, err := Marshal(refVal)
	if err != nil {
		t.Fatalf("%q: reference encode: %v", in, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%q:\n got %q\nwant %q", in, got, want)
	}
	again, err := Append(nil, got)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("%q: not idempotent: %q then %q (%v)", in, got, again, err)
	}
}

// BenchmarkAppend_Doc: one of the bench's 190-byte documents, canonicalized.
func BenchmarkAppend_Doc(b *testing.B) {
	doc := []byte(`{"n":1,"pad":"` + strings.Repeat("p", 160) + `","tag":"a-b"}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		var err error
		if dst, err = Append(dst[:0], doc); err != nil {
			b.Fatal(err)
		}
	}
}
