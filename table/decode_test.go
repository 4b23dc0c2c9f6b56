package table

import (
	"sync"
	"testing"
)

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

// TestDecodeBatch_OwnsWhatItReturns: a decoded batch shares nothing with
// the decodes after it (the inserts' scratch is reused between bodies) nor
// with the body it came from (its strings are the decoder's own bytes):
// changing the body or decoding other bodies leaves it as it was.
func TestDecodeBatch_OwnsWhatItReturns(t *testing.T) {
	body := []byte(`{"inserts":[{"id":"a1","doc":{"n":1}},{"id":"b2","doc":{"n":2}}],"deletes":["c3"]}`)
	first, err := DecodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = ' '
	}
	for range 4 {
		if _, err := DecodeBatch([]byte(`{"inserts":[{"id":"zz","doc":{"m":9}},{"id":"yy","doc":{}},{"id":"xx","doc":[]}],"deletes":["ww"]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if len(first.Inserts) != 2 || first.Inserts[0].ID != "a1" || string(first.Inserts[0].Doc) != `{"n":1}` ||
		first.Inserts[1].ID != "b2" || string(first.Inserts[1].Doc) != `{"n":2}` || first.Deletes[0] != "c3" {
		t.Fatalf("the first batch changed: %+v", first)
	}
	if empty, err := DecodeBatch([]byte(`{"inserts":[],"deletes":["d"]}`)); err != nil || empty.Inserts != nil {
		t.Fatalf("no inserts: %+v, %v; want Inserts nil, as before", empty, err)
	}
}
