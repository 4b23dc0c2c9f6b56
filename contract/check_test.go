package contract

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemcode "github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/apitest"
)

func TestLoad_SpecIsValidOpenAPI31(t *testing.T) {
	s := MustLoad(t)
	if s.Doc.OpenAPI != "3.1.0" || !s.Doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", s.Doc.OpenAPI)
	}
}

// problem renders a problem of code with the title the code registry
// gives it (code.Info.Title).
func problem(code string, status int, retryable bool, retryWith, extra string) string {
	return fmt.Sprintf(`{"type":"urn:idem:problem:%s","title":"%s","status":%d,"detail":"d","code":"%s","retryable":%v,"retry_with":"%s"%s}`,
		code, idemcode.Lookup(idemcode.Code(code)).Title, status, code, retryable, retryWith, extra)
}

const (
	jsonCT    = "application/json"
	problemCT = "application/problem+json"
	batchOK   = `{"inserted":1,"deleted":0,"transformed":0}`
	txn       = "0123456789abcdef0123456789abcdef"
)

// TestCheck_AcceptsConformingAndRejectsDeviatingExchanges proves the
// checker is not vacuous: each deviation from the spec is reported.
func TestCheck_AcceptsConformingAndRejectsDeviatingExchanges(t *testing.T) {
	s := MustLoad(t)
	okBody := `{"inserts":[{"id":"a","doc":{"x":1}}]}`
	cases := []struct {
		name    string
		method  string
		path    string
		reqBody string
		reqHdr  []string
		status  int
		header  []string
		body    string
		wantErr string // "" = must pass
	}{
		{name: "fast commit", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT}, body: batchOK},
		{name: "keyed commit with headers", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			reqHdr: []string{"Idempotency-Key", "k", "Prefer", "wait=5"}, status: 201,
			header: []string{"Content-Type", jsonCT, "Idempotency-Key", "k", "Idem-Transaction-Id", txn,
				"Idempotent-Replayed", "true", "Preference-Applied", "wait=5"}, body: batchOK},
		{name: "legacy empty result", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT}, body: `{}`},
		{name: "result lacks a member", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT}, body: `{"inserted":1,"deleted":0}`, wantErr: "doesn't match schema"},
		{name: "undeclared header", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT, "X-Extra", "1"}, body: batchOK, wantErr: "undeclared headers X-Extra"},
		{name: "Retry-After on a commit", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT, "Retry-After", "1"}, body: batchOK, wantErr: "undeclared headers Retry-After"},
		{name: "replayed header not true", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 201, header: []string{"Content-Type", jsonCT, "Idempotent-Replayed", "false"}, body: batchOK, wantErr: "Idempotent-Replayed"},
		{name: "undocumented status", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 418, header: []string{"Content-Type", jsonCT}, body: `{}`, wantErr: "not documented"},
		{name: "problem as plain JSON", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", jsonCT}, body: problem("table_not_found", 404, false, "new_key", ""), wantErr: "Content-Type"},
		{name: "problem", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", problemCT}, body: problem("table_not_found", 404, false, "new_key", "")},
		{name: "keyed problem", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody, reqHdr: []string{"Idempotency-Key", "k"},
			status: 404, header: []string{"Content-Type", problemCT, "Idempotency-Key", "k", "Idem-Transaction-Id", txn},
			body: problem("table_not_found", 404, false, "new_key", `,"outcome":"not_applied","transaction_id":"`+txn+`"`)},
		{name: "problem status differs from its code's", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", problemCT}, body: problem("table_not_found", 409, false, "new_key", ""), wantErr: "doesn't match schema"},
		{name: "problem retry_with differs from its code's", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", problemCT}, body: problem("table_not_found", 404, false, "same_key", ""), wantErr: "doesn't match schema"},
		{name: "code not on this route", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", problemCT}, body: problem("receipt_not_found", 404, false, "none", ""), wantErr: "doesn't match schema"},
		{name: "problem with an unknown member", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 404, header: []string{"Content-Type", problemCT}, body: problem("table_not_found", 404, false, "new_key", `,"extra":1`), wantErr: "doesn't match schema"},
		{name: "overloaded without Retry-After", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 429, header: []string{"Content-Type", problemCT},
			body: problem("overloaded", 429, true, "same_key", `,"outcome":"pending","transaction_id":"`+txn+`"`), wantErr: `"Retry-After" missing`},
		{name: "overloaded pending without transaction", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 429, header: []string{"Content-Type", problemCT, "Retry-After", "1"},
			body: problem("overloaded", 429, true, "same_key", `,"outcome":"pending"`), wantErr: "doesn't match schema"},
		{name: "overloaded at the principal's quota", method: "POST", path: "/v1/tables/t/batch", reqBody: okBody,
			status: 429, header: []string{"Content-Type", problemCT, "Retry-After", "1"},
			body: problem("overloaded", 429, true, "same_key", "")},
		{name: "invalid request accepted", method: "POST", path: "/v1/tables/t/batch",
			reqBody: `{"transforms":[{"id":"a","ops":[{"op":"$push","path":"n","value":1}]}]}`,
			status:  201, header: []string{"Content-Type", jsonCT}, body: batchOK, wantErr: "spec rejects"},
		{name: "invalid request rejected", method: "POST", path: "/v1/tables/t/batch",
			reqBody: `{"transforms":[{"id":"a","ops":[{"op":"$push","path":"n","value":1}]}]}`,
			status:  400, header: []string{"Content-Type", problemCT}, body: problem("invalid_request", 400, false, "none", "")},
		{name: "no content", method: "DELETE", path: "/v1/tables/t", status: 204},
		{name: "body on no content", method: "DELETE", path: "/v1/tables/t", status: 204,
			header: []string{"Content-Type", jsonCT}, body: `{}`, wantErr: "declares no content"},
		{name: "empty body where content is declared", method: "GET", path: "/v1/tables", status: 200, wantErr: "empty body"},
		{name: "unrouted path", method: "GET", path: "/v9/x", status: 404,
			header: []string{"Content-Type", problemCT}, body: problem("not_found", 404, false, "none", "")},
		{name: "unrouted path answered 200", method: "GET", path: "/v9/x", status: 200,
			header: []string{"Content-Type", jsonCT}, body: `{}`, wantErr: "want status 404"},
		{name: "method not allowed", method: "POST", path: "/v1/tables", status: 405,
			header: []string{"Content-Type", problemCT, "Allow", "GET, HEAD"}, body: problem("method_not_allowed", 405, false, "none", "")},
		{name: "method not allowed without Allow", method: "POST", path: "/v1/tables", status: 405,
			header: []string{"Content-Type", problemCT}, body: problem("method_not_allowed", 405, false, "none", ""), wantErr: `"Allow" missing`},
		{name: "receipt view", method: "GET", path: "/v1/receipts/t/a%2Fb", status: 200, header: []string{"Content-Type", jsonCT},
			body: `{"transaction_id":"` + txn + `","state":"started","created":"2024-01-01T00:00:00Z","owner":"node-0","debt":false}`},
		{name: "terminal receipt without envelope", method: "GET", path: "/v1/receipts/t/k", status: 200, header: []string{"Content-Type", jsonCT},
			body: `{"transaction_id":"` + txn + `","state":"terminal","created":"2024-01-01T00:00:00Z","debt":false}`, wantErr: "doesn't match schema"},
		{name: "metrics", method: "GET", path: "/metrics", status: 200,
			header: []string{"Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"}, body: "idem_x 1\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.reqBody))
			if c.reqBody != "" {
				req.Header.Set("Content-Type", jsonCT)
			}
			for i := 0; i < len(c.reqHdr); i += 2 {
				req.Header.Add(c.reqHdr[i], c.reqHdr[i+1])
			}
			h := http.Header{}
			for i := 0; i < len(c.header); i += 2 {
				h.Add(c.header[i], c.header[i+1])
			}
			err := s.Check(Exchange{Request: req, RequestBody: []byte(c.reqBody), Status: c.status, Header: h, Body: []byte(c.body)})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("conforming exchange rejected: %v", err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("deviation not reported (want %q)", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("error %v, want it to mention %q", err, c.wantErr)
			}
		})
	}
}

// TestRecorder_MismatchesAreCheckedAndNamed: what apitest's client
// records (one file per client under IDEM_CONTRACT_DIR) is what the
// contract check reads, and a deviating response is reported with the test
// that got it; nothing is recorded without the variable.
func TestRecorder_MismatchesAreCheckedAndNamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", jsonCT)
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"status":"ok","owner":"node-0/1"}`))
			return
		}
		_, _ = w.Write([]byte(`{"tables":[{"name":"t"}]}`)) // shards missing
	}))
	defer srv.Close()

	t.Setenv(apitest.EnvDir, "")
	off := apitest.NewClient(t, srv.URL)
	off.Do("GET", "/healthz", nil)
	if off.Tr.Recorded() != 1 {
		t.Fatalf("recording off: counted %d exchanges, want 1", off.Tr.Recorded())
	}

	dir := t.TempDir()
	t.Setenv(apitest.EnvDir, dir)
	c := apitest.NewClient(t, srv.URL)
	if r := c.Do("GET", "/healthz", nil); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	r := c.Do("GET", "/v1/tables?x=%2F", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"name":"t"`) {
		t.Fatalf("the body was not passed through: %d %s", r.Status, r.Body)
	}
	apitest.RecordUnparsable(t, 400, http.Header{"Content-Type": {jsonCT}}, []byte(`{}`))
	if c.Tr.Recorded() != 2 {
		t.Fatalf("recorded %d exchanges, want 2", c.Tr.Recorded())
	}
	recs, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %+v", len(recs), recs)
	}
	ms := MustLoad(t).CheckRecords(recs)
	if len(ms) != 2 {
		t.Fatalf("mismatches %v, want the tables list and the unparsable answer", ms)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"contract " + t.Name() + ": GET /v1/tables?x=%2F → 200", "shards",
		"(unparsable request) → 400", "Content-Type has unexpected value"} {
		if !strings.Contains(all, want) {
			t.Errorf("mismatches lack %q:\n%s", want, all)
		}
	}
	for _, rec := range recs {
		if rec.Kind == apitest.KindExchange && (rec.Method != "GET" || rec.Status != 200 || len(rec.Body) == 0 || rec.Test != t.Name()) {
			t.Errorf("record %+v", rec)
		}
	}
}
