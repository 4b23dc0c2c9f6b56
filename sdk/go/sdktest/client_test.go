package sdktest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
	idem "github.com/idemdb/idem/sdk/go"
)

// The SDK against a real idemd process each test starts (apitest builds
// it from this repository), never a mock.

func TestMain(m *testing.M) {
	code := m.Run()
	apitest.RemoveBuilds()
	os.Exit(code)
}

var ctx = context.Background()

type server struct {
	t    *testing.T
	data string
	addr string
	proc *apitest.Proc
}

// startServer runs idemd on a fixed free port (so that a restart keeps
// the address the client has) and data dir, with env (GO_FAILPOINTS).
func startServer(t *testing.T, env ...string) *server {
	t.Helper()
	s := &server{t: t, data: t.TempDir(), addr: apitest.FreeAddr(t)}
	s.start(env...)
	return s
}

func (s *server) start(env ...string) {
	s.t.Helper()
	c := apitest.NewClient(s.t, "http://"+s.addr)
	s.proc = apitest.Start(s.t, c, s.data, env, "-addr", s.addr, "-lease-ttl", "2s", "-maintain-interval", "100ms", "-separate-decide")
}

func (s *server) client(t *testing.T, o idem.Options) *idem.Client {
	t.Helper()
	c, err := idem.New("http://"+s.addr, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func inc(id string) map[string]any {
	return map[string]any{
		"inserts":    []any{map[string]any{"id": "mark-" + id, "doc": map[string]any{}}},
		"transforms": []any{map[string]any{"id": "ctr-" + id, "ops": []any{map[string]any{"op": "$inc", "path": "n", "value": 1}}, "upsert": true}},
	}
}

func counter(t *testing.T, c *idem.Client, table, id string) int {
	t.Helper()
	raw, err := c.Doc(ctx, table, "ctr-"+id)
	if errors.Is(err, idem.ErrDocumentNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ N int }
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d.N
}

// awaitStarted polls until key's receipt is started: its call is past
// Begin and held up in its decision.
func awaitStarted(t *testing.T, s *server, table, key string) {
	t.Helper()
	probe := apitest.NewClient(t, "http://"+s.addr)
	defer probe.CloseIdleConnections()
	testsupport.Poll(t, "the receipt started (its decision held up)", testsupport.Patience, func() bool {
		r, err := probe.Try("GET", "/v1/receipts/"+table+"/"+key, nil)
		return err == nil && r.Status == 200 && bytes.Contains(r.Body, []byte(`"state":"started"`))
	})
}

func TestBatch_CommitReplayMismatchAndNotApplied(t *testing.T) {
	s := startServer(t)
	c := s.client(t, idem.Options{})
	if created, err := c.CreateTable(ctx, "orders", 0); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	first, err := c.Batch(ctx, "orders", inc("a"), &idem.BatchOptions{Key: "k1"})
	if err != nil || first.Replayed || first.Inserted != 1 || first.Transformed != 1 || len(first.TransactionID) != 32 || first.Key != "k1" {
		t.Fatalf("commit: %+v %v", first, err)
	}
	again, err := c.Batch(ctx, "orders", inc("a"), &idem.BatchOptions{Key: "k1"})
	if err != nil || !again.Replayed || again.TransactionID != first.TransactionID || again.Inserted != 1 {
		t.Fatalf("replay: %+v %v", again, err)
	}
	_, err = c.Batch(ctx, "orders", inc("other"), &idem.BatchOptions{Key: "k1"})
	var e *idem.Error
	if !errors.Is(err, idem.ErrKeyMismatch) || !errors.As(err, &e) || e.Status != 422 || e.Outcome != "not_applied" || e.Retryable {
		t.Fatalf("mismatch: %v (%+v)", err, e)
	}
	// A key the SDK makes is one per call: two calls, two applications.
	one, err1 := c.Batch(ctx, "orders", inc("b"), nil)
	two, err2 := c.Batch(ctx, "orders", inc("b"), nil)
	if err1 != nil || err2 != nil || one.Key == two.Key || one.Replayed || two.Replayed {
		t.Fatalf("generated keys: %+v %v / %+v %v", one, err1, two, err2)
	}
	if n := counter(t, c, "orders", "b"); n != 2 {
		t.Fatalf("two calls without a key applied %d times, want 2", n)
	}

	// not_applied on a missing table, replayed as is after it exists.
	_, err = c.Batch(ctx, "late", inc("x"), &idem.BatchOptions{Key: "k-late"})
	if !errors.Is(err, idem.ErrTableNotFound) || !errors.As(err, &e) || e.Outcome != "not_applied" || e.TransactionID == "" {
		t.Fatalf("missing table: %v (%+v)", err, e)
	}
	if _, err := c.CreateTable(ctx, "late", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.Batch(ctx, "late", inc("x"), &idem.BatchOptions{Key: "k-late"})
	if !errors.Is(err, idem.ErrTableNotFound) {
		t.Fatalf("the same key after the table exists: %v, want the stored table_not_found", err)
	}
}

// TestBatch_InProgressWaitsOrAnswersTyped: while a first call's decision
// is held up (4 s), the same key answers in progress at once — typed,
// same_key — or, with Wait, the first call's commit.
func TestBatch_InProgressWaitsOrAnswersTyped(t *testing.T) {
	testsupport.RequireFailpoints(t)
	s := startServer(t, `GO_FAILPOINTS=receipt/decide-before=1*sleep(4000)`)
	c := s.client(t, idem.Options{MaxRetries: -1})
	if _, err := c.CreateTable(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan *idem.Result, 1)
	go func() {
		r, err := c.Batch(ctx, "t", inc("k"), &idem.BatchOptions{Key: "k"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	awaitStarted(t, s, "t", "k")
	var e *idem.Error
	if _, err := c.Batch(ctx, "t", inc("k"), &idem.BatchOptions{Key: "k"}); !errors.As(err, &e) {
		t.Fatalf("the same key while the first call is in progress: %v, want a problem", err)
	}
	if !errors.Is(e, idem.ErrRequestInProgress) || e.RetryWith != "same_key" || !e.Retryable || e.Outcome != "pending" {
		t.Fatalf("in progress: %+v", e)
	}
	waited, err := c.Batch(ctx, "t", inc("k"), &idem.BatchOptions{Key: "k", Wait: 20 * time.Second})
	first := <-done
	if err != nil || first == nil || waited.TransactionID != first.TransactionID || waited.Inserted != 1 {
		t.Fatalf("with a wait: %+v %v; first %+v", waited, err, first)
	}
	if n := counter(t, c, "t", "k"); n != 1 {
		t.Fatalf("applied %d times", n)
	}
}

// TestBatch_ARetryAcrossAServerRestartAppliesOnce: the server is killed
// (SIGKILL) while the call waits on its decision; the SDK's retries meet
// connection refusals, then the restarted server, which has finished the
// receipt: the call returns the commit, applied once.
func TestBatch_ARetryAcrossAServerRestartAppliesOnce(t *testing.T) {
	testsupport.RequireFailpoints(t)
	s := startServer(t, `GO_FAILPOINTS=receipt/decide-before=1*sleep(30000)`)
	c := s.client(t, idem.Options{MaxRetries: 50, Backoff: func(int) time.Duration { return 100 * time.Millisecond }})
	if _, err := c.CreateTable(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res *idem.Result
	go func() {
		var err error
		res, err = c.Batch(ctx, "t", inc("k"), &idem.BatchOptions{Key: "k"})
		done <- err
	}()
	awaitStarted(t, s, "t", "k")
	s.proc.Kill()
	s.start() // the same data dir and address; no failpoint this time
	if err := <-done; err != nil {
		t.Fatalf("the call across the restart: %v", err)
	}
	if res.Inserted != 1 || res.TransactionID == "" {
		t.Fatalf("result %+v", res)
	}
	if n := counter(t, c, "t", "k"); n != 1 {
		t.Fatalf("applied %d times across the restart, want 1", n)
	}
}

// TestBatch_TheContextBoundsTheCallRetriesIncluded: a deadline ends a call
// whose decision is held up, whatever retries are left.
func TestBatch_TheContextBoundsTheCallRetriesIncluded(t *testing.T) {
	testsupport.RequireFailpoints(t)
	s := startServer(t, `GO_FAILPOINTS=receipt/decide-before=1*sleep(10000)`)
	c := s.client(t, idem.Options{MaxRetries: 5})
	if _, err := c.CreateTable(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Batch(cctx, "t", inc("k"), &idem.BatchOptions{Key: "k"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the call outlived its context by %v", d)
	}
}
