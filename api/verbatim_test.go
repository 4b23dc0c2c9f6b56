package api_test

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
)

// TestBatch_ARetryOfTheSameBytesAnswersAsAParsedRetry: a retry of the very
// bytes the receipt was made from replays without a parse
// (receipt.ReplayVerbatim); its answer — status, body and every header but
// Date — is the one a retry spelling the request differently gets through
// the full parse, with and without Prefer: wait. A bad header is refused
// either way, and other bytes for another batch are still a mismatch.
func TestBatch_ARetryOfTheSameBytesAnswersAsAParsedRetry(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	body := `{"inserts":[{"id":"a","doc":{"x":1}}],"transforms":[{"id":"c","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
	spaced := `{ "transforms": [{"id": "c", "ops": [{"op": "$inc", "path": "n", "value": 1}], "upsert": true}], "inserts": [{"id": "a", "doc": {"x": 1}}] }`
	n.batch("t", "k1", body).JSON(t, 201, nil)
	headersOf := func(h http.Header) map[string][]string {
		out := map[string][]string{}
		for k, v := range h {
			if k != "Date" {
				out[k] = v
			}
		}
		return out
	}
	for _, extra := range [][]string{nil, {"Prefer", "wait=3"}} {
		verbatim := n.batch("t", "k1", body, extra...)
		parsed := n.batch("t", "k1", spaced, extra...)
		if verbatim.Status != 201 || parsed.Status != 201 || !bytes.Equal(verbatim.Body, parsed.Body) {
			t.Fatalf("headers %v: verbatim %d %s, parsed %d %s", extra, verbatim.Status, verbatim.Body, parsed.Status, parsed.Body)
		}
		vh, ph := headersOf(verbatim.Header), headersOf(parsed.Header)
		for k, v := range ph {
			if !slices.Equal(vh[k], v) {
				t.Fatalf("headers %v: %s is %q verbatim, %q parsed", extra, k, vh[k], v)
			}
		}
		if len(vh) != len(ph) || verbatim.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("headers %v: verbatim %v, parsed %v", extra, verbatim.Header, parsed.Header)
		}
		if len(extra) > 0 && verbatim.Header.Get("Preference-Applied") != "wait=3" {
			t.Fatalf("no Preference-Applied on the verbatim replay: %v", verbatim.Header)
		}
	}
	for _, b := range []string{body, spaced} {
		p := n.batch("t", "k1", b, "Repeatability-First-Sent", "not a date").Problem(t, 400)
		if p.Code != "invalid_request" {
			t.Fatalf("a bad Repeatability-First-Sent on a replay: %+v", p)
		}
	}
	if p := n.batch("t", "k1", `{"inserts":[{"id":"b","doc":{}}]}`).Problem(t, 422); p.Code != "idempotency_key_mismatch" {
		t.Fatalf("another batch: %+v", p)
	}
	if d := n.doc("t", "c"); d["n"] != float64(1) {
		t.Fatalf("$inc applied %v times", d["n"])
	}
}
