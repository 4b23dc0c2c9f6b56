package table_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
)

// fuzzBatchSeeds covers every member, every op, the limits and the usual
// malformations; under plain `go test` they are the whole corpus.
var fuzzBatchSeeds = []string{
	`{"inserts":[{"id":"a","doc":{"x":1}}],"deletes":["b"],"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`,
	`{"transforms":[{"id":"t","ops":[{"op":"$set","path":"a.b.c","value":{"z":[1,{"y":null}],"a":"é"}},{"op":"$unset","path":"old"},{"op":"$max","path":"m","value":"zz"},{"op":"$min","path":"m2","value":-1.5e3},{"op":"$addToSet","path":"tags","value":"x"}]}]}`,
	`{"transforms":[{"upsert":false,"ops":[{"value":1,"path":"n","op":"$inc"}],"id":"c"}],"inserts":[{"doc":{"b":2,"a":1},"id":"a"}]}`,
	`{"inserts":[{"id":"a","doc":{"n":1.0,"m":1e2,"big":123456789012345678901234567890,"neg":-0}}]}`,
	`{"inserts":[{"id":"h","doc":{"<script>":"&amp;","u":"\u2028\u0000\ud83d\ude00"}}]}`,
	`{"inserts":[{"id":"dup","doc":{"a":1,"a":2}}]}`,
	`{"transforms":[{"id":"s","ops":[{"op":"$set","path":"x","value":null}]}]}`,
	`{"INSERTS":[{"ID":"a","DOC":{}}]}`,
	`{"deletes":["a","a"]}`,
	`{"deletes":["a b"]}`,
	`{"deletes":[]}`,
	`{}`,
	`[]`,
	`null`,
	``,
	`{"inserts":[{"id":"a","doc":{}}]} trailing`,
	`{"inserts":[{"id":"a","doc":{}}]}{}`,
	`{"inserts":[{"id":"a","doc":[1]}]}`,
	`{"inserts":[{"id":"a","doc":"x"}]}`,
	`{"inserts":[{"id":"a"}]}`,
	`{"unknown":1}`,
	`{"transforms":[{"id":"a","ops":[]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$push","path":"n","value":1}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":"1"}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n"}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$unset","path":"n","value":1}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$max","path":"n","value":[1]}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$set","path":"a..b","value":1}]}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$set","path":"` + strings.Repeat("p.", 16) + `p","value":1}]}]}`,
	`{"deletes":["` + strings.Repeat("i", table.DocIDBytesMax+1) + `"]}`,
	`{"inserts":[{"id":"a","doc":{"x":1}}`,
	"{\"inserts\":[{\"id\":\"a\",\"doc\":{\"\xff\":\"\xfe\"}}]}",
	`{"inserts":[{"id":"a","doc":{"s":"\ud800","k":"\udc00"}}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$set","path":"\ud83d\ude00","value":"\uD83D\uDE00"}]}]}`,
	`{"inserts":[{"id":"a","doc":{"n":1` + strings.Repeat("0", table.NumberDigitsMax) + `,"e":1e1001}}]}`,
	`{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":1e-1000},{"op":"$addToSet","path":"t","value":[1.0,{"x":1e0}]}]}]}`,
	`{"inserts":[{"id":"a","doc":` + strings.Repeat(`{"a":`, table.DocDepthMax-1) + `{}` + strings.Repeat(`}`, table.DocDepthMax-1) + `}]}`,
	`{"inserts":[{"id":"a","doc":` + strings.Repeat(`[`, table.DocDepthMax+1) + strings.Repeat(`]`, table.DocDepthMax+1) + `}]}`,
}

// FuzzDecodeBatch: decoding, validating and canonicalizing any input never
// panics; failures are typed invalid_request; a valid batch's canonical form
// decodes to a valid batch with the same canonical bytes (so the
// fingerprint of a retry is stable), Validate is deterministic, and the
// same batch built in Go gets the same answer and the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range fuzzBatchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := table.DecodeBatch(data)
		if err != nil {
			var ce *code.Error
			if !errors.As(err, &ce) || ce.Code != code.InvalidRequest || ce.Message == "" {
				t.Fatalf("decode error %v (%T), want a typed invalid_request", err, err)
			}
			return
		}
		// The same batch as a host builds it in Go: its documents and values
		// are canonicalized by Validate rather than by DecodeBatch.
		built := &table.Batch{Inserts: b.Inserts, Deletes: b.Deletes, Transforms: b.Transforms}
		if verr := b.Validate(); verr != nil {
			if verr.Code != code.InvalidRequest || verr.Message == "" {
				t.Fatalf("validate: %v", verr)
			}
			if again := b.Validate(); again == nil || again.Message != verr.Message {
				t.Fatalf("validate is not deterministic: %v then %v", verr, again)
			}
			if built.Validate() == nil {
				t.Fatalf("refused decoded (%v), accepted built", verr)
			}
			return
		}
		canon, err := b.Canonical()
		if err != nil {
			t.Fatalf("a valid batch has no canonical form: %v", err)
		}
		if builtCanon, err := built.Canonical(); err != nil || !bytes.Equal(builtCanon, canon) {
			t.Fatalf("built batch: %q, %v; decoded: %q", builtCanon, err, canon)
		}
		b2, err := table.DecodeBatch(canon)
		if err != nil {
			t.Fatalf("the canonical form does not decode: %v\n%s", err, canon)
		}
		if verr := b2.Validate(); verr != nil {
			t.Fatalf("the canonical form is invalid: %v\n%s", verr, canon)
		}
		canon2, err := b2.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canon, canon2) {
			t.Fatalf("canonical form is not idempotent:\n%s\n%s", canon, canon2)
		}
		if len(b2.Inserts) != len(b.Inserts) || len(b2.Deletes) != len(b.Deletes) || len(b2.Transforms) != len(b.Transforms) {
			t.Fatalf("canonical form changed the batch's shape:\n%s\n%s", data, canon)
		}
		for i := range b.Transforms {
			if len(b2.Transforms[i].Ops) != len(b.Transforms[i].Ops) || b2.Transforms[i].Upsert != b.Transforms[i].Upsert {
				t.Fatalf("transform %d changed:\n%s\n%s", i, data, canon)
			}
		}
	})
}
