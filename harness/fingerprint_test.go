package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/vfs/memfs"
)

// The request fingerprint (docs/design.md §4, §5): a key bound to one request
// answers any other request 422 idempotency_key_mismatch — whatever field
// tells them apart — and the same request, spelled differently, is the
// same request. Black-box, through receipt.Service.

// fingerprintBatches is how many random batches each field is varied on.
const fingerprintBatches = 24

// batchFields are the fields a variant changes, one at a time. The table
// is not in the batch but in the request: another table is another
// receipt (the binding covers it), never the first one's answer.
var batchFields = []string{"table", "insert id", "insert doc", "delete ids", "transform id", "op", "path", "value", "upsert"}

// randomBatch draws a valid batch with at least one insert, delete and
// transform (each with at least one op).
func randomBatch(rng *rand.Rand) *table.Batch {
	b := &table.Batch{}
	for i := range 1 + rng.IntN(2) {
		b.Inserts = append(b.Inserts, table.Insert{ID: fmt.Sprintf("i%d-%d", i, rng.IntN(1000)),
			Doc: json.RawMessage(fmt.Sprintf(`{"a":%d,"b":{"c":"%d"},"d":[%d,true]}`, rng.IntN(100), rng.IntN(100), rng.IntN(100)))})
	}
	for i := range 1 + rng.IntN(2) {
		b.Deletes = append(b.Deletes, fmt.Sprintf("x%d-%d", i, rng.IntN(1000)))
	}
	for i := range 1 + rng.IntN(2) {
		tr := table.Transform{ID: fmt.Sprintf("t%d-%d", i, rng.IntN(1000)), Upsert: rng.IntN(2) == 0}
		for j := range 1 + rng.IntN(2) {
			tr.Ops = append(tr.Ops, table.Op{Op: table.OpInc, Path: fmt.Sprintf("n%d", j), Value: json.RawMessage(fmt.Sprint(1 + rng.IntN(9)))})
		}
		b.Transforms = append(b.Transforms, tr)
	}
	return b
}

// cloneBatch copies the exported fields (a validated Batch must not change).
func cloneBatch(b *table.Batch) *table.Batch {
	c := &table.Batch{Deletes: append([]string(nil), b.Deletes...)}
	c.Inserts = append(c.Inserts, b.Inserts...)
	for _, tr := range b.Transforms {
		tr.Ops = append([]table.Op(nil), tr.Ops...)
		c.Transforms = append(c.Transforms, tr)
	}
	return c
}

// vary returns b with field changed (and the table the variant goes to).
func vary(b *table.Batch, field string) (*table.Batch, string) {
	v, tbl := cloneBatch(b), "t"
	switch field {
	case "table":
		tbl = "u"
	case "insert id":
		v.Inserts[0].ID += "z"
	case "insert doc":
		v.Inserts[0].Doc = json.RawMessage(strings.Replace(string(v.Inserts[0].Doc), `"a":`, `"a":1`, 1))
	case "delete ids":
		v.Deletes[0] += "z"
	case "transform id":
		v.Transforms[0].ID += "z"
	case "op":
		v.Transforms[0].Ops[0].Op = table.OpMax
	case "path":
		v.Transforms[0].Ops[0].Path += "z"
	case "value":
		v.Transforms[0].Ops[0].Value = json.RawMessage("10")
	case "upsert":
		v.Transforms[0].Upsert = !v.Transforms[0].Upsert
	}
	return v, tbl
}

// respell returns b as the same request written differently: documents'
// members in another order, with whitespace.
func respell(b *table.Batch) *table.Batch {
	v := cloneBatch(b)
	for i, in := range v.Inserts {
		var doc map[string]json.RawMessage
		_ = json.Unmarshal(in.Doc, &doc)
		v.Inserts[i].Doc = json.RawMessage(fmt.Sprintf(`{ "d" : %s , "b":%s,"a": %s }`, doc["d"], doc["b"], doc["a"]))
	}
	return v
}

// fingerprintViolations runs the property on fresh services and lists what
// broke it.
func fingerprintViolations(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	db, err := engine.Open("/data", engine.Options{FS: memfs.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc, err := receipt.Open(ctx, db, receipt.Options{MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for _, tbl := range []string{"t", "u"} {
		if _, _, err := svc.Tables().Create(ctx, principal, tbl, 4); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(13, 0xf1))
	var out []string
	exec := func(key, tbl string, b *table.Batch) receipt.Answer {
		// As idemd's API sends it: the bytes' digest kept, a verbatim
		// replay tried first.
		body, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		digest := receipt.BodyDigest(body)
		if ans, ok := svc.ReplayVerbatim(ctx, principal, tbl, key, time.Time{}, digest); ok {
			return ans
		}
		ans, err := svc.Execute(ctx, receipt.Request{Principal: principal, Table: tbl, Key: key, Batch: b, BodyDigest: digest})
		if err != nil {
			t.Fatalf("execute %s: %v", key, err)
		}
		return ans
	}
	for i := range fingerprintBatches {
		base := randomBatch(rng)
		key := fmt.Sprintf("same-%d", i)
		if first := exec(key, "t", base); !first.Terminal {
			t.Fatalf("%s: no terminal answer: %+v", key, first)
		}
		if again := exec(key, "t", respell(base)); !again.Replayed {
			out = append(out, fmt.Sprintf("%s: the same batch respelled is not replayed: %d %s", key, again.Status, again.Code))
		}
		for _, field := range batchFields {
			key := fmt.Sprintf("vary-%d-%s", i, strings.ReplaceAll(field, " ", "-"))
			if first := exec(key, "t", base); !first.Terminal {
				t.Fatalf("%s: no terminal answer: %+v", key, first)
			}
			v, tbl := vary(base, field)
			ans := exec(key, tbl, v)
			switch {
			case tbl != "t" && ans.Replayed:
				out = append(out, fmt.Sprintf("%s: a batch on another table replayed the first table's answer", key))
			case tbl == "t" && (ans.Code != code.KeyMismatch || ans.Status != 422):
				out = append(out, fmt.Sprintf("%s: a batch differing in its %s got %d %s (replayed=%v), want 422 %s",
					key, field, ans.Status, ans.Code, ans.Replayed, code.KeyMismatch))
			}
		}
	}
	return out
}

// TestFingerprint_BatchesDifferingInOneFieldAreMismatched: for random valid
// batches, a second batch under the same key that differs in any one field
// — an insert's id or document, a delete id, a transform's id, op, path,
// value or upsert — is refused 422 idempotency_key_mismatch; the same key
// on another table is another receipt; the same batch spelled differently
// replays.
func TestFingerprint_BatchesDifferingInOneFieldAreMismatched(t *testing.T) {
	for _, v := range fingerprintViolations(t) {
		t.Error(v)
	}
}
