package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
)

// The process-level E2E of SEED.txt: real idemd processes on one data
// directory, stopped by SIGKILL or SIGTERM and restarted; every keyed
// answer — a missing table, a commit, an abort for a real conflict — is
// replayed byte for byte by the next process. Every exchange is recorded
// for the contract check against api/openapi.yaml (contract/).

func TestMain(m *testing.M) {
	code := m.Run()
	apitest.RemoveBuilds()
	os.Exit(code)
}

type answer struct {
	name string
	key  string
	tbl  string
	body string
	r    *apitest.Response
}

type problemView struct {
	Code          string `json:"code"`
	Detail        string `json:"detail"`
	Status        int    `json:"status"`
	Retryable     bool   `json:"retryable"`
	RetryWith     string `json:"retry_with"`
	Outcome       string `json:"outcome"`
	TransactionID string `json:"transaction_id"`
}

// TestE2E_RestartReplaysEveryTerminalAnswer is the process-level regression
// of SEED.txt, once per way of stopping the process.
func TestE2E_RestartReplaysEveryTerminalAnswer(t *testing.T) {
	apitest.BuildIdemd(t) // build before the parallel subtests start their clocks
	for _, v := range []struct {
		name   string
		tokens bool
		stop   func(*apitest.Proc)
	}{
		{"SIGKILL", false, (*apitest.Proc).Kill},
		{"SIGTERM", true, (*apitest.Proc).Term},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			var args []string
			c := apitest.NewClient(t, "http://unused")
			if v.tokens {
				file := filepath.Join(t.TempDir(), "tokens")
				if err := os.WriteFile(file, []byte("# e2e\nalice:tok-alice-0123456789\n\nbob:tok-bob-0123456789\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-tokens", file)
				c = c.WithToken("tok-alice-0123456789")
			}
			restartReplays(t, c, data, v.stop, args)
		})
	}
}

func restartReplays(t *testing.T, c *apitest.Client, data string, stop func(*apitest.Proc), args []string) {
	// The first process, deciding in a write of its own, fails its first
	// decision (receipt/decide-before fires once): that request answers 500 and leaves its receipt started
	// with intents prepared on doc x — an open transaction for the next
	// batch on x to conflict with. (A `sleep` term would do the same after
	// a delay: fault.Inject reports any term that fires as an error.)
	p1 := apitest.Start(t, c, data, []string{`GO_FAILPOINTS=receipt/decide-before=1*return(true)`}, append(args, "-separate-decide")...)
	c1 := c.WithBase(p1.Base())
	post := func(cl *apitest.Client, tbl, key, body string) *apitest.Response {
		return cl.Do("POST", "/v1/tables/"+tbl+"/batch", body, "Idempotency-Key", key)
	}
	incX := `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

	var answers []answer
	keep := func(name, tbl, key, body string, r *apitest.Response) *apitest.Response {
		answers = append(answers, answer{name, key, tbl, body, r})
		return r
	}
	// 1. A keyed batch on a missing table: terminal not_applied.
	if r := keep("missing table", "late", "k-missing", incX, post(c1, "late", "k-missing", incX)); r.Status != 404 {
		t.Fatalf("missing table: %d %s", r.Status, r.Body)
	}
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	// 2. Batch A fails its decision and keeps x's intent open.
	if a := post(c1, "t", "k-a", incX); a.Status < 500 {
		t.Fatalf("batch A with the armed failpoint: %d %s", a.Status, a.Body)
	}
	var ra struct {
		State string `json:"state"`
	}
	c1.Do("GET", "/v1/receipts/t/k-a", nil).JSON(t, 200, &ra)
	if ra.State != "started" {
		t.Fatalf("batch A's receipt is %s, want started (intents open)", ra.State)
	}
	// 3. Batch B on x meets A's intent: contention, never a stored
	// refusal — 503 pending, nothing stored, retry with the same key.
	if r := post(c1, "t", "k-b", incX); r.Status != 503 {
		t.Fatalf("batch B behind A's intent: %d %s", r.Status, r.Body)
	}
	// 4. A's retry reconciles it from the retained record: committed once.
	if r := keep("reconciled", "t", "k-a", incX, post(c1, "t", "k-a", incX)); r.Status != 201 {
		t.Fatalf("batch A retried: %d %s", r.Status, r.Body)
	}
	// 5. B's retry, A done, commits; C, $inc on a string, is a real
	// conflict: terminal aborted, its exact code.
	if r := keep("retried", "t", "k-b", incX, post(c1, "t", "k-b", incX)); r.Status != 201 {
		t.Fatalf("batch B retried: %d %s", r.Status, r.Body)
	}
	c1.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"s","doc":{"n":"text"}}]}`).JSON(t, 201, nil)
	incS := `{"transforms":[{"id":"s","ops":[{"op":"$inc","path":"n","value":1}]}]}`
	if r := keep("aborted", "t", "k-c", incS, post(c1, "t", "k-c", incS)); r.Status != 400 {
		t.Fatalf("batch C ($inc on a string): %d %s", r.Status, r.Body)
	}
	// 6. A plain keyed commit, and a fast-path batch.
	commit := `{"inserts":[{"id":"y","doc":{"v":"ü<&>"}}],"deletes":["gone"],"transforms":[{"id":"z","ops":[{"op":"$max","path":"m","value":7}],"upsert":true}]}`
	c1.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"gone","doc":{}}]}`).JSON(t, 201, nil)
	if r := keep("commit", "t", "k-commit", commit, post(c1, "t", "k-commit", commit)); r.Status != 201 {
		t.Fatalf("commit: %d %s", r.Status, r.Body)
	}
	for _, ans := range answers {
		if ans.r.Header.Get("Idempotent-Replayed") != "" || len(ans.r.Header.Get("Idem-Transaction-Id")) != 32 ||
			ans.r.Header.Get("Idempotency-Key") != ans.key {
			t.Fatalf("%s: first answer headers %v", ans.name, ans.r.Header)
		}
	}
	var h1 struct{ Owner string }
	c1.Do("GET", "/healthz", nil).JSON(t, 200, &h1)

	c1.CloseIdleConnections() // a graceful stop would wait for a parked, unused connection
	stop(p1)

	p2 := apitest.Start(t, c, data, nil, args...)
	c2 := c.WithBase(p2.Base())
	var h2 struct{ Owner string }
	c2.Do("GET", "/healthz", nil).JSON(t, 200, &h2)
	if h2.Owner == h1.Owner {
		t.Fatalf("same owner incarnation after restart: %s", h2.Owner)
	}
	// The missing table exists now; its key still answers table_not_found.
	c2.Do("PUT", "/v1/tables/late", nil).JSON(t, 201, nil)
	for _, ans := range answers {
		r := post(c2, ans.tbl, ans.key, ans.body)
		if r.Status != ans.r.Status || !bytes.Equal(r.Body, ans.r.Body) {
			t.Fatalf("%s: replay after restart\n got  %d %s\n want %d %s", ans.name, r.Status, r.Body, ans.r.Status, ans.r.Body)
		}
		if r.Header.Get("Idempotent-Replayed") != "true" ||
			r.Header.Get("Idem-Transaction-Id") != ans.r.Header.Get("Idem-Transaction-Id") ||
			r.Header.Get("Content-Type") != ans.r.Header.Get("Content-Type") || r.Header.Get("Idempotency-Key") != ans.key {
			t.Fatalf("%s: replay headers %v, first %v", ans.name, r.Header, ans.r.Header)
		}
		if r.Status >= 400 {
			var was, is problemView
			if err := json.Unmarshal(ans.r.Body, &was); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(r.Body, &is); err != nil {
				t.Fatal(err)
			}
			if is != was || is.TransactionID != r.Header.Get("Idem-Transaction-Id") {
				t.Fatalf("%s: %+v, first %+v", ans.name, is, was)
			}
		}
	}
	checkProblem(t, answers[0].r.Body, problemView{Code: "table_not_found", Status: 404, RetryWith: "new_key", Outcome: "not_applied",
		Detail: `table "late" does not exist`})
	checkProblem(t, answers[3].r.Body, problemView{Code: "invalid_request", Status: 400, RetryWith: "none",
		Outcome: "aborted", Detail: `transform of "s", ops[0] $inc "n": current value is a string, not a number`})
	for _, i := range []int{1, 2} {
		if string(answers[i].r.Body) != `{"inserted":0,"deleted":0,"transformed":1}` {
			t.Fatalf("%s: body %s", answers[i].name, answers[i].r.Body)
		}
	}
	if string(answers[4].r.Body) != `{"inserted":1,"deleted":1,"transformed":1}` {
		t.Fatalf("committed body %s", answers[4].r.Body)
	}
	// Effects: A once, B once (its retry), C never; the commit's documents are there.
	var x, y struct {
		Doc map[string]any `json:"doc"`
	}
	c2.Do("GET", "/v1/tables/t/docs/x", nil).JSON(t, 200, &x)
	c2.Do("GET", "/v1/tables/t/docs/y", nil).JSON(t, 200, &y)
	if x.Doc["n"] != float64(2) || y.Doc["v"] != "ü<&>" {
		t.Fatalf("docs after restart: x=%v y=%v", x.Doc, y.Doc)
	}
	c2.Do("GET", "/v1/tables/t/docs/gone", nil).Problem(t, 404)
	// The receipt view survives too, and a new key runs against the
	// now-existing table.
	var rv struct {
		State    string `json:"state"`
		Envelope struct {
			Code string `json:"code"`
		} `json:"envelope"`
	}
	c2.Do("GET", "/v1/receipts/t/k-c", nil).JSON(t, 200, &rv)
	if rv.State != "terminal" || rv.Envelope.Code != "invalid_request" {
		t.Fatalf("receipt k-c after restart: %+v", rv)
	}
	post(c2, "late", "k-new", incX).JSON(t, 201, nil)
	if c.Tr.Recorded() == 0 {
		t.Fatal("no exchange was recorded for the contract check")
	}
}

func checkProblem(t *testing.T, body []byte, want problemView) {
	t.Helper()
	var p problemView
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	want.TransactionID = p.TransactionID
	if p != want || len(p.TransactionID) != 32 {
		t.Fatalf("problem %+v, want %+v", p, want)
	}
}

// TestE2E_SIGTERMAsSoonAsListeningIsGraceful: a supervisor may signal as soon
// as it reads the listening line; the process must already be catching the
// signal and stop cleanly (exit 0, "stopped cleanly").
func TestE2E_SIGTERMAsSoonAsListeningIsGraceful(t *testing.T) {
	t.Parallel()
	apitest.Launch(t, t.TempDir(), nil).Term()
}

// TestE2E_UnparsableRequestsAnswerProblems: idemd serves through the API's
// listener, so what net/http answers by itself (a %zz in the path, header
// fields beyond the limit) is a problem with a registered code as well.
func TestE2E_UnparsableRequestsAnswerProblems(t *testing.T) {
	t.Parallel()
	p := apitest.Launch(t, t.TempDir(), nil)
	defer p.Term()
	for _, c := range []struct {
		request string
		status  int
		code    string
	}{
		{"GET /v1/tables/t/docs/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"},
		{"GET /v1/tables HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1100<<10) + "\r\n\r\n", 431, "header_fields_too_large"},
	} {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		go io.WriteString(conn, c.request) // the server may answer before reading it all
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		conn.Close()
		var got struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(body, &got); err != nil || res.StatusCode != c.status ||
			res.Header.Get("Content-Type") != "application/problem+json" || got.Code != c.code || got.Status != c.status {
			t.Fatalf("%d %q %s (%v), want %d %s", res.StatusCode, res.Header.Get("Content-Type"), body, err, c.status, c.code)
		}
	}
}
