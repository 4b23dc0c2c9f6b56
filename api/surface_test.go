package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// TestRoutes_NeverRedirect: paths the mux would redirect (a missing
// trailing slash before a {key...} pattern, dot segments, doubled slashes)
// are no routes of ours: 404 not_found, no Location, counted as 404.
func TestRoutes_NeverRedirect(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("orders")
	paths := []string{
		"/v1/receipts/orders",
		"/v1/tables/orders/docs/../batch",
		"/v1/tables/./orders",
		"/v1/tables/orders/docs/a/../b",
		"//v1/tables",
		"/v1/tables//orders",
		"/v1/tables/orders/docs/./x",
	}
	for _, path := range paths {
		r := n.c.Do("GET", path, nil)
		p := r.Problem(t, 404)
		checkProblem(t, p, "not_found", 404, false, "none")
		if hasHeader(r, "Location") {
			t.Fatalf("GET %s: Location %q", path, r.Header.Get("Location"))
		}
	}
	body := string(n.c.Do("GET", "/metrics", nil).Body)
	if strings.Contains(body, `code="307"`) || strings.Contains(body, `code="301"`) {
		t.Fatalf("metrics count a redirect the client never got:\n%s", grepLines(body, "idem_http_requests_total"))
	}
	if want := `idem_http_requests_total{code="404",route="unmatched"} 7`; !strings.Contains(body, want+"\n") {
		t.Fatalf("metrics lack %q:\n%s", want, grepLines(body, "idem_http_requests_total"))
	}
}

// TestConn_UnparsableRequestsAnswerProblems: what net/http answers by
// itself, before any handler (a bad escape in the path, headers beyond
// the limit, an unknown transfer coding, no Host), is a problem with a
// registered code too.
func TestConn_UnparsableRequestsAnswerProblems(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	for _, c := range []struct {
		name, request string
		code          code.Code
		detail        string
	}{
		{"bad escape", "GET /v1/tables/t/docs/%zz HTTP/1.1\r\nHost: x\r\n\r\n", code.InvalidRequest, "could not be parsed"},
		{"no host", "GET /v1/tables HTTP/1.1\r\n\r\n", code.InvalidRequest, "missing required Host header"},
		{"bad request line", "GET\r\n\r\n", code.InvalidRequest, "could not be parsed"},
		{"huge header", "GET /v1/tables HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1100<<10) + "\r\n\r\n", code.HeadersTooLarge, "too large"},
		{"transfer coding", "POST /v1/tables/t/batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", code.NotImplemented, "transfer encoding"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := rawExchange(t, n.ts.Listener.Addr().String(), c.request)
			apitest.RecordUnparsable(t, res.StatusCode, res.Header, body)
			info := code.Lookup(c.code)
			if res.StatusCode != info.Status || res.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %q: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			var p map[string]any
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if p["code"] != string(c.code) || p["status"] != float64(info.Status) || p["type"] != "urn:idem:problem:"+string(c.code) ||
				p["retryable"] != false || p["retry_with"] != nil || !strings.Contains(p["detail"].(string), c.detail) {
				t.Fatalf("problem %s, want code %s with detail containing %q", body, c.code, c.detail)
			}
		})
	}
	metrics := string(n.c.Do("GET", "/metrics", nil).Body)
	for _, want := range []string{
		`idem_http_requests_total{code="400",route="malformed"} 3`,
		`idem_http_requests_total{code="431",route="malformed"} 1`,
		`idem_http_requests_total{code="501",route="malformed"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Fatalf("metrics lack %q:\n%s", want, grepLines(metrics, "idem_http_requests_total"))
		}
	}
}

// rawExchange writes request on a fresh connection and reads one answer;
// the write runs beside the read, since the server may answer and close
// before it has read all of a huge request.
func rawExchange(t *testing.T, addr, request string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.WriteString(conn, request) // may fail once the server hangs up
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	wg.Wait()
	return res, body
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestIdempotencyKey_IsAnSFString: `"abc"` is the key abc, the same one a
// bare abc names; escapes decode; a malformed string is 400 before any
// receipt exists.
func TestIdempotencyKey_IsAnSFString(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	first := n.batch("t", `"abc"`, incBody)
	first.JSON(t, 201, nil)
	if first.Header.Get("Idempotency-Key") != `"abc"` {
		t.Fatalf("echo %q, want the key as sent", first.Header.Get("Idempotency-Key"))
	}
	bare := n.batch("t", "abc", incBody)
	if !bytes.Equal(bare.Body, first.Body) || bare.Header.Get("Idempotent-Replayed") != "true" ||
		bare.Header.Get("Idem-Transaction-Id") != first.Header.Get("Idem-Transaction-Id") {
		t.Fatalf("bare abc is not the key \"abc\": %d %v %s", bare.Status, bare.Header, bare.Body)
	}
	if v := n.receiptView("t", "abc"); v.TransactionID != first.Header.Get("Idem-Transaction-Id") {
		t.Fatalf("receipt of abc: %+v", v)
	}
	esc := n.batch("t", `"a\"b\\c"`, incBody)
	esc.JSON(t, 201, nil)
	if v := n.receiptView("t", `a"b\c`); v.TransactionID != esc.Header.Get("Idem-Transaction-Id") {
		t.Fatalf(`the escapes of "a\"b\\c" were not decoded: %+v`, v)
	}
	for _, bad := range []string{`"abc`, `"ab\c"`, `"abc";p=1`, `"abc" x`, `"a b"`, `""`, "\"caf\xc3\xa9\"", `"` + strings.Repeat("k", 256) + `"`} {
		r := n.batch("t", bad, incBody)
		p := r.Problem(t, 400)
		checkProblem(t, p, "invalid_idempotency_key", 400, false, "none")
		checkUnbound(t, r, p)
	}
}

// TestPreferenceApplied_IsTheWaitGranted: the header states the wait the
// server granted (the asked N cut to -wait-max), on every keyed answer to
// a request that asked, and is absent otherwise.
func TestPreferenceApplied_IsTheWaitGranted(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{waitMax: 2 * time.Second})
	n.createTable("t")
	for i, c := range []struct{ prefer, want string }{
		{"wait=10", "wait=2"},
		{"wait=999999", "wait=2"},
		{"wait=99999999999999999999", ""}, // not a number we read: ignored
		{"wait=1", "wait=1"},
		{"wait=0", "wait=0"},
		{"respond-async, wait=5", "wait=2"},
		{"", ""},
	} {
		key := "k" + string(rune('a'+i))
		var prefer []string
		if c.prefer != "" {
			prefer = []string{"Prefer", c.prefer}
		}
		r := n.batch("t", key, incBody, prefer...)
		r.JSON(t, 201, nil)
		if got := r.Header.Get("Preference-Applied"); got != c.want || (c.want == "") == hasHeader(r, "Preference-Applied") {
			t.Fatalf("Prefer %q: Preference-Applied %q, want %q", c.prefer, got, c.want)
		}
	}
	// The fast path has no wait to grant.
	r := n.batch("t", "", incBody, "Prefer", "wait=5")
	r.JSON(t, 201, nil)
	if hasHeader(r, "Preference-Applied") {
		t.Fatalf("fast path: Preference-Applied %q", r.Header.Get("Preference-Applied"))
	}
}

// TestFailStopped_WritesAre503Unavailable: once the store fail-stops,
// every write answers 503 unavailable (retryable with the same key) — the
// fast path too, even a batch with nothing to write — while terminal
// receipts still replay and reads still serve; the cause is logged once,
// not per request.
func TestFailStopped_WritesAre503Unavailable(t *testing.T) {
	testsupport.SkipOnReferenceStore(t, "it fails the WAL's fsync")
	var logs syncBuffer
	n := newNode(t, config{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	n.createTable("t")
	done := n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`)
	done.JSON(t, 201, nil)

	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("eio")`)
	r := n.batch("t", "k-fsync", `{"inserts":[{"id":"b","doc":{}}]}`)
	disarm()
	if r.Status != 503 {
		t.Fatalf("batch during a failed fsync answered %d %s", r.Status, r.Body)
	}

	for i := 0; i < 20; i++ {
		r := n.batch("t", "fresh", `{"inserts":[{"id":"c","doc":{}}]}`)
		p := r.Problem(t, 503)
		checkProblem(t, p, "unavailable", 503, true, "same_key")
		checkKeyed(t, r, p, "not_applied")
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After: %v", r.Header)
		}
	}
	for _, body := range []string{`{"deletes":["nothing-here"]}`, `{"inserts":[{"id":"d","doc":{}}]}`} {
		r := n.batch("t", "", body)
		p := r.Problem(t, 503)
		checkProblem(t, p, "unavailable", 503, true, "same_key")
		checkUnbound(t, r, p)
	}
	checkProblem(t, n.c.Do("PUT", "/v1/tables/u", nil).Problem(t, 503), "unavailable", 503, true, "same_key")

	again := n.batch("t", "done", `{"inserts":[{"id":"a","doc":{"v":1}}]}`)
	if again.Status != 201 || !bytes.Equal(again.Body, done.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a terminal receipt no longer replays: %d %s", again.Status, again.Body)
	}
	if d := n.doc("t", "a"); d["v"] != float64(1) {
		t.Fatalf("read after fail-stop: %v", d)
	}

	out := logs.String()
	if got := strings.Count(out, "level=ERROR msg=\"api: the store refuses writes"); got != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", got, out)
	}
	if strings.Contains(out, "api: request failed") {
		t.Fatalf("refusals logged as failures:\n%s", out)
	}
	if strings.Contains(out, "no restart needed") || storeRefusals(t, n, "unreachable") != "0" || storeRefusals(t, n, "stopped") == "0" {
		t.Fatalf("a stop counted or logged as a transient loss (stopped %s, unreachable %s):\n%s",
			storeRefusals(t, n, "stopped"), storeRefusals(t, n, "unreachable"), out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBatch_LoneSurrogatesAre400: a lone UTF-16 surrogate escape cannot be
// stored as written, so it is refused before any receipt exists — and two
// different ones under one key are not mistaken for the same request.
func TestBatch_LoneSurrogatesAre400(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	for _, esc := range []string{`\ud800`, `\udc00`, `\ud83dx`} {
		for _, key := range []string{"k", ""} {
			r := n.batch("t", key, `{"inserts":[{"id":"a","doc":{"s":"`+esc+`"}}]}`)
			p := r.Problem(t, 400)
			checkProblem(t, p, "invalid_request", 400, false, "none")
			checkUnbound(t, r, p)
			if !contains(p.Detail, "surrogate") {
				t.Fatalf("%s: detail %q does not name the rule", esc, p.Detail)
			}
		}
	}
	n.noReceipt("t", "k")
	n.batch("t", "k", `{"inserts":[{"id":"a","doc":{"s":"\ud83d\ude00"}}]}`).JSON(t, 201, nil)
	if d := n.doc("t", "a"); d["s"] != "\U0001F600" {
		t.Fatalf("a surrogate pair stored as %q", d["s"])
	}
}

// TestBatch_InvalidTableNameStatesTheRule: both routes name the allowed set.
func TestBatch_InvalidTableNameStatesTheRule(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	for _, key := range []string{"k", ""} {
		p := n.batch("a.b", key, incBody).Problem(t, 400)
		if !contains(p.Detail, `invalid table name "a.b" (1..64 of A-Z a-z 0-9 _ -)`) {
			t.Fatalf("key %q: detail %q", key, p.Detail)
		}
	}
}
