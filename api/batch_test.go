package api_test

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

const incBody = `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

func TestBatch_FastPathCommitsWithoutReceipt(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	r := n.batch("t", "", `{"inserts":[{"id":"a","doc":{"x":1}},{"id":"b","doc":{"y":"z"}}]}`)
	var res result
	r.JSON(t, 201, &res)
	if res != (result{Inserted: 2}) || string(r.Body) != `{"inserted":2,"deleted":0,"transformed":0}` {
		t.Fatalf("fast result %s", r.Body)
	}
	for _, h := range []string{"Idempotency-Key", "Idem-Transaction-Id", "Idempotent-Replayed", "Preference-Applied"} {
		if hasHeader(r, h) {
			t.Fatalf("fast path answered with %s: %v", h, r.Header)
		}
	}
	r = n.batch("t", "", `{"deletes":["b"],"transforms":[{"id":"a","ops":[{"op":"$inc","path":"x","value":2},{"op":"$addToSet","path":"tags","value":"q"}]}]}`)
	if string(r.Body) != `{"inserted":0,"deleted":1,"transformed":1}` {
		t.Fatalf("fast result %d %s", r.Status, r.Body)
	}
	if d := n.doc("t", "a"); d["x"] != float64(3) || len(d["tags"].([]any)) != 1 {
		t.Fatalf("doc a = %v", d)
	}
	if p := n.c.Do("GET", "/v1/tables/t/docs/b", nil).Problem(t, 404); p.Code != "document_not_found" {
		t.Fatalf("deleted doc: %+v", p)
	}
}

// TestBatch_KeyedReplayIsByteForByte: the first answer is the committed
// envelope; every retry replays it byte for byte, marked
// Idempotent-Replayed, without applying the batch again — also when the
// retry spells the same request differently (object keys reordered).
func TestBatch_KeyedReplayIsByteForByte(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	body := `{"inserts":[{"id":"a","doc":{"x":1,"y":[1,2]}}],"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	first := n.batch("t", "k1", body)
	var res result
	first.JSON(t, 201, &res)
	if res != (result{Inserted: 1, Transformed: 1}) {
		t.Fatalf("result %s", first.Body)
	}
	txn := first.Header.Get("Idem-Transaction-Id")
	if first.Header.Get("Idempotency-Key") != "k1" || len(txn) != 32 || hasHeader(first, "Idempotent-Replayed") {
		t.Fatalf("first answer headers %v", first.Header)
	}
	reordered := `{"transforms":[{"upsert":true,"ops":[{"value":1,"path":"n","op":"$inc"}],"id":"c"}],"inserts":[{"doc":{"y":[1,2],"x":1},"id":"a"}]}`
	for i, b := range []string{body, body, reordered} {
		again := n.batch("t", "k1", b)
		if again.Status != 201 || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replay %d: %d %s, want %s", i, again.Status, again.Body, first.Body)
		}
		if again.Header.Get("Idempotent-Replayed") != "true" || again.Header.Get("Idem-Transaction-Id") != txn ||
			again.Header.Get("Idempotency-Key") != "k1" {
			t.Fatalf("replay %d headers %v", i, again.Header)
		}
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("$inc applied %v times", d["n"])
	}
	v := n.receiptView("t", "k1")
	if v.State != "terminal" || v.TransactionID != txn || v.Owner != "" || v.Envelope == nil ||
		v.Envelope.Status != 201 || v.Envelope.Outcome != "committed" || string(v.Envelope.Result) != string(first.Body) {
		t.Fatalf("receipt view %+v", v)
	}
	// The same key on another table is another receipt.
	n.createTable("u")
	other := n.batch("u", "k1", body)
	if other.Status != 201 || hasHeader(other, "Idempotent-Replayed") || other.Header.Get("Idem-Transaction-Id") == txn {
		t.Fatalf("same key, other table: %d %v", other.Status, other.Header)
	}
}

func TestBatch_KeyMismatchIs422(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	first := n.batch("t", "k", incBody)
	first.JSON(t, 201, nil)
	r := n.batch("t", "k", `{"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":2}],"upsert":true}]}`)
	p := r.Problem(t, 422)
	checkProblem(t, p, "idempotency_key_mismatch", 422, false, "none")
	// This request was not applied; the original, which committed, is
	// reported in its own member, not as this answer's transaction.
	var body struct {
		Outcome  string `json:"outcome"`
		Original struct {
			TransactionID string `json:"transaction_id"`
			State         string `json:"state"`
			Outcome       string `json:"outcome"`
		} `json:"original_receipt"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Outcome != "not_applied" || p.Members["transaction_id"] || hasHeader(r, "Idem-Transaction-Id") {
		t.Fatalf("mismatch answer claims a transaction: %s %v", r.Body, r.Header)
	}
	if o := body.Original; o.TransactionID != first.Header.Get("Idem-Transaction-Id") || o.State != "terminal" || o.Outcome != "committed" {
		t.Fatalf("original_receipt %+v, want the committed original %s", o, first.Header.Get("Idem-Transaction-Id"))
	}
	if r.Header.Get("Idempotency-Key") != "k" || hasHeader(r, "Idempotent-Replayed") {
		t.Fatalf("mismatch headers %v", r.Header)
	}
	// The receipt keeps its first answer.
	if again := n.batch("t", "k", incBody); !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after mismatch: %d %s", again.Status, again.Body)
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("n = %v", d["n"])
	}
}

// TestBatch_InvalidRequestCreatesNoReceipt: malformed or invalid input on the
// keyed route is 400 before any receipt exists, so a corrected retry with
// the same key executes.
func TestBatch_InvalidRequestCreatesNoReceipt(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	cases := []struct{ name, body, detail string }{
		{"malformed JSON", `{"inserts":[{"id":"a","doc":{"x":1}}`, "malformed batch body"},
		{"not an object", `[1,2]`, "malformed batch body"},
		{"trailing data", `{"deletes":["a"]} {"deletes":["b"]}`, "trailing data"},
		{"unknown field", `{"inserts":[{"id":"a","doc":{}}],"upserts":[]}`, "unknown field"},
		{"unknown field in op", `{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":1,"by":2}]}]}`, "unknown field"},
		{"invalid op", `{"transforms":[{"id":"a","ops":[{"op":"$push","path":"n","value":1}]}]}`, "unknown op"},
		{"$inc of a string", `{"transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":"1"}]}]}`, "needs a number"},
		{"$unset with a value", `{"transforms":[{"id":"a","ops":[{"op":"$unset","path":"n","value":1}]}]}`, "takes no value"},
		{"empty path segment", `{"transforms":[{"id":"a","ops":[{"op":"$set","path":"a..b","value":1}]}]}`, "empty segment"},
		{"empty batch", `{}`, "batch is empty"},
		{"invalid doc id", `{"deletes":["a b"]}`, "invalid document id"},
		{"duplicate doc", `{"inserts":[{"id":"a","doc":{}}],"deletes":["a"]}`, "also touched"},
		{"doc not an object", `{"inserts":[{"id":"a","doc":[1]}]}`, "must be a JSON object"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "bad-" + string(rune('a'+i))
			for _, k := range []string{"", key} { // fast path, then keyed
				r := n.batch("t", k, tc.body)
				p := r.Problem(t, 400)
				checkProblem(t, p, "invalid_request", 400, false, "none")
				checkUnbound(t, r, p)
				if !strings.Contains(p.Detail, tc.detail) {
					t.Fatalf("detail %q lacks %q", p.Detail, tc.detail)
				}
				if got := r.Header.Get("Idempotency-Key"); got != k {
					t.Fatalf("Idempotency-Key echo %q, want %q", got, k)
				}
			}
			n.noReceipt("t", key)
			fixed := `{"transforms":[{"id":"fix-` + key + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
			ok := n.batch("t", key, fixed)
			ok.JSON(t, 201, nil)
			if hasHeader(ok, "Idempotent-Replayed") {
				t.Fatal("corrected retry was answered as a replay")
			}
			if v := n.receiptView("t", key); v.State != "terminal" || v.Envelope.Outcome != "committed" {
				t.Fatalf("receipt after corrected retry: %+v", v)
			}
		})
	}
	// Invalid for the table, not just malformed: bad table names are 400
	// too, without a receipt.
	r := n.batch("bad.table", "k", incBody)
	checkProblem(t, r.Problem(t, 400), "invalid_request", 400, false, "none")
	// Looking up its receipt is 400 too: no such table name can exist.
	p := n.receipt("bad.table", "k").Problem(t, 400)
	checkProblem(t, p, "invalid_request", 400, false, "none")
	if !contains(p.Detail, "A-Z a-z 0-9 _ -") {
		t.Fatalf("detail %q does not state the rule", p.Detail)
	}
}

func TestBatch_InvalidIdempotencyKey(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	long := strings.Repeat("k", 256)
	for name, headers := range map[string][]string{
		"empty":     {"Idempotency-Key", ""},
		"256 chars": {"Idempotency-Key", long},
		"space":     {"Idempotency-Key", "a b"},
		"non-ASCII": {"Idempotency-Key", "ключ"},
		"tab":       {"Idempotency-Key", "a\tb"},
		"twice":     {"Idempotency-Key", "a", "Idempotency-Key", "b"},
	} {
		t.Run(name, func(t *testing.T) {
			r := n.c.Do("POST", "/v1/tables/t/batch", incBody, headers...)
			p := r.Problem(t, 400)
			checkProblem(t, p, "invalid_idempotency_key", 400, false, "none")
			checkUnbound(t, r, p)
			if hasHeader(r, "Idempotency-Key") {
				t.Fatalf("an invalid key was echoed: %v", r.Header)
			}
		})
	}
	// The receipt route checks keys the same way.
	p := n.receipt("t", long).Problem(t, 400)
	checkProblem(t, p, "invalid_idempotency_key", 400, false, "none")
	// The bounds are inclusive: 255 visible ASCII characters are a key.
	edge := strings.Repeat("~", 254) + "!"
	n.batch("t", edge, incBody).JSON(t, 201, nil)
	if v := n.receiptView("t", edge); v.State != "terminal" {
		t.Fatalf("255-char key: %+v", v)
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("n = %v", d["n"])
	}
}

// TestBatch_TableNotFoundReplaysAfterCreate: a keyed batch on a missing
// table is terminal not_applied; creating the table later does not change
// the key's answer.
func TestBatch_TableNotFoundReplaysAfterCreate(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	fast := n.batch("late", "", incBody)
	p := fast.Problem(t, 404)
	checkProblem(t, p, "table_not_found", 404, false, "new_key")
	checkUnbound(t, fast, p)

	first := n.batch("late", "k", incBody)
	p = first.Problem(t, 404)
	checkProblem(t, p, "table_not_found", 404, false, "new_key")
	checkKeyed(t, first, p, "not_applied")
	if hasHeader(first, "Idempotent-Replayed") || first.Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("first answer headers %v", first.Header)
	}
	n.createTable("late")
	again := n.batch("late", "k", incBody)
	if again.Status != 404 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Header.Get("Idem-Transaction-Id") != p.TransactionID {
		t.Fatalf("replay after create: %d %s %v", again.Status, again.Body, again.Header)
	}
	v := n.receiptView("late", "k")
	if v.State != "terminal" || v.Envelope.Code != "table_not_found" || v.Envelope.Outcome != "not_applied" ||
		v.Envelope.Message != p.Detail || v.Envelope.RetryWith != "new_key" {
		t.Fatalf("receipt view %+v", v)
	}
	// A new key executes against the new table.
	n.batch("late", "k2", incBody).JSON(t, 201, nil)

	// Other routes.
	checkProblem(t, n.c.Do("GET", "/v1/tables/nope/docs/a", nil).Problem(t, 404), "table_not_found", 404, false, "new_key")
	checkProblem(t, n.c.Do("DELETE", "/v1/tables/nope", nil).Problem(t, 404), "table_not_found", 404, false, "new_key")
}

func TestBatch_DocumentNotFound(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	r := n.c.Do("GET", "/v1/tables/t/docs/missing", nil)
	checkProblem(t, r.Problem(t, 404), "document_not_found", 404, false, "new_key")
	// A transform without upsert of a missing document: the participant
	// votes no, the coordinator aborts, the receipt stores it.
	body := `{"transforms":[{"id":"missing","ops":[{"op":"$set","path":"a","value":1}]}]}`
	first := n.batch("t", "k", body)
	p := first.Problem(t, 404)
	checkProblem(t, p, "document_not_found", 404, false, "new_key")
	checkKeyed(t, first, p, "aborted")
	again := n.batch("t", "k", body)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Status, again.Body)
	}
	fast := n.batch("t", "", body)
	checkUnbound(t, fast, fast.Problem(t, 404))
	// Invalid ids on the read route are 400.
	checkProblem(t, n.c.Do("GET", "/v1/tables/t/docs/a%20b", nil).Problem(t, 400), "invalid_request", 400, false, "none")
}

// openIntent begins a transaction on doc id without deciding it: its
// intent stays open, in every other writer's way, and returns its
// participants for a test that decides it.
func (n *node) openIntent(tbl, id string) []twopc.Participant {
	n.t.Helper()
	ctx := context.Background()
	b, err := table.DecodeBatch([]byte(`{"transforms":[{"id":"` + id + `","ops":[{"op":"$set","path":"held","value":true}],"upsert":true}]}`))
	if err != nil {
		n.t.Fatal(err)
	}
	plan, err := n.svc.Tables().Preflight(ctx, "anonymous", tbl, b)
	if err != nil {
		n.t.Fatal(err)
	}
	parts := make([]twopc.Participant, len(plan.Shards))
	for i, s := range plan.Shards {
		parts[i] = s
	}
	res, err := n.svc.Coordinator().Begin(ctx, twopc.Txn{ID: "open-intent-" + id, Participants: parts}, nil)
	if err != nil || !res.Prepared {
		n.t.Fatalf("begin: %+v %v", res, err)
	}
	return parts
}

// TestBatch_AHeldDocumentIsPendingNeverRefused: a keyed batch on a
// document an open transaction holds is contention, not a conflict: 503
// idempotency_receipt_pending with Retry-After, nothing stored; once the
// holder is decided, the same key commits. The fast path, which has no key
// to come back with, still answers transaction_conflict.
func TestBatch_AHeldDocumentIsPendingNeverRefused(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	n.batch("t", "", `{"inserts":[{"id":"x","doc":{"v":1}}]}`).JSON(t, 201, nil)
	parts := n.openIntent("t", "x")

	body := `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"v","value":1}]}]}`
	first := n.batch("t", "k", body)
	p := first.Problem(t, 503)
	checkProblem(t, p, "idempotency_receipt_pending", 503, true, "same_key")
	if !hasHeader(first, "Retry-After") || hasHeader(first, "Idempotent-Replayed") {
		t.Fatalf("pending headers %v", first.Header)
	}
	n.c.Do("GET", "/v1/receipts/t/k", nil).Problem(t, 404)
	fast := n.batch("t", "", body)
	fp := fast.Problem(t, 409)
	checkProblem(t, fp, "transaction_conflict", 409, true, "new_key")
	checkUnbound(t, fast, fp)
	// Reads never see the open intent.
	if d := n.doc("t", "x"); d["v"] != float64(1) || d["held"] != nil {
		t.Fatalf("doc x = %v", d)
	}
	// Other documents are not held.
	n.batch("t", "k2", incBody).JSON(t, 201, nil)

	if err := n.svc.Coordinator().Decide(context.Background(), "open-intent-x", parts, twopc.Aborted{Code: code.TransactionAborted}, nil); err != nil {
		t.Fatal(err)
	}
	n.batch("t", "k", body).JSON(t, 201, nil)
	if d := n.doc("t", "x"); d["v"] != float64(2) || d["held"] != nil {
		t.Fatalf("doc x = %v, want the retried increment once and the holder's abort", d)
	}
}

func TestBatch_PayloadTooLarge(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{bodyMax: 1024})
	n.createTable("t")
	var big bytes.Buffer
	big.WriteString(`{"inserts":[{"id":"a","doc":{"pad":"`)
	big.WriteString(strings.Repeat("x", 2048))
	big.WriteString(`"}}]}`)
	for _, key := range []string{"", "k"} {
		r := n.batch("t", key, big.String())
		p := r.Problem(t, 413)
		checkProblem(t, p, "payload_too_large", 413, false, "none")
		checkUnbound(t, r, p)
		if r.Header.Get("Idempotency-Key") != key {
			t.Fatalf("key echo %q, want %q", r.Header.Get("Idempotency-Key"), key)
		}
	}
	n.noReceipt("t", "k")
	r := n.c.Do("PUT", "/v1/tables/u", `{"shards":1,"pad":"`+strings.Repeat("y", 2048)+`"}`)
	checkProblem(t, r.Problem(t, 413), "payload_too_large", 413, false, "none")
	// At the limit, the same key then works.
	n.batch("t", "k", incBody).JSON(t, 201, nil)
}

// TestBatch_RefusedTransformIsTerminalInvalidRequest: a transform the stored
// document refuses ($inc on a string) is decided by the participant's vote:
// on the keyed route a terminal aborted invalid_request.
func TestBatch_RefusedTransformIsTerminalInvalidRequest(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	n.batch("t", "", `{"inserts":[{"id":"s","doc":{"n":"text"}}]}`).JSON(t, 201, nil)
	body := `{"transforms":[{"id":"s","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	first := n.batch("t", "k", body)
	p := first.Problem(t, 400)
	checkProblem(t, p, "invalid_request", 400, false, "none")
	checkKeyed(t, first, p, "aborted")
	again := n.batch("t", "k", body)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	var raw map[string]any
	if err := json.Unmarshal(first.Body, &raw); err != nil || raw["outcome"] != "aborted" {
		t.Fatalf("body %s", first.Body)
	}
}

// TestBatch_ABodyThatIsNotJSONIs415: a body whose Content-Type is not JSON,
// or that has none, is refused before anything else — no receipt, no write
// — on every route that takes one; JSON with parameters and
// application/*+json are read as JSON.
func TestBatch_ABodyThatIsNotJSONIs415(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	body := `{"inserts":[{"id":"a","doc":{"v":1}}]}`
	for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data; boundary=x", "json", "application/json;;", ""} {
		for _, key := range []string{"", fmt.Sprint("k", i)} {
			var hdr []string
			if key != "" {
				hdr = []string{"Idempotency-Key", key}
			}
			r := n.c.Do("POST", "/v1/tables/t/batch", body, append(hdr, "Content-Type", ct)...)
			checkProblem(t, r.Problem(t, 415), "unsupported_media_type", 415, false, "none")
			if key != "" {
				if p := n.c.Do("GET", "/v1/receipts/t/"+key, nil).Problem(t, 404); p.Code != "receipt_not_found" {
					t.Fatalf("%s: a refused body left a receipt: %+v", ct, p)
				}
			}
		}
		r := n.c.Do("PUT", "/v1/tables/u", `{"shards":2}`, "Content-Type", ct)
		checkProblem(t, r.Problem(t, 415), "unsupported_media_type", 415, false, "none")
	}
	n.c.Do("GET", "/v1/tables/t/docs/a", nil).Problem(t, 404)
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/merge-patch+json"} {
		id := fmt.Sprintf("d%d", i)
		n.c.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"`+id+`","doc":{}}]}`, "Content-Type", ct).JSON(t, 201, nil)
		n.c.Do("GET", "/v1/tables/t/docs/"+id, nil).JSON(t, 200, nil)
	}
}
