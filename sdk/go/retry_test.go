package idem

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackoff_StripesCurveJitteredAndCapped: retry n waits 0.5 s·(1+n²),
// at most 5 s, within ±25 %.
func TestBackoff_StripesCurveJitteredAndCapped(t *testing.T) {
	c := &Client{}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2500 * time.Millisecond, 3: 5 * time.Second, 9: 5 * time.Second} {
		for range 50 {
			if d := c.backoff(n); d < want*3/4 || d > want*5/4 {
				t.Fatalf("backoff(%d) = %v, want %v ± 25%%", n, d, want)
			}
		}
	}
}

// TestRetry_WhatIsRetriedAndWhatIsNot drives the policy with scripted
// answers: same_key problems and transport errors are retried with the
// same key up to MaxRetries, honouring Retry-After; new_key and none
// problems are returned at once.
func TestRetry_WhatIsRetriedAndWhatIsNot(t *testing.T) {
	problem := func(status int, code, retryWith string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(status)
			w.Write([]byte(`{"code":"` + code + `","retryable":` + map[bool]string{true: "true", false: "false"}[retryWith == "same_key"] + `,"retry_with":"` + retryWith + `","transaction_id":"t1","outcome":"pending"}`))
		}
	}
	ok := func(w http.ResponseWriter) {
		w.Header().Set("Idem-Transaction-Id", "t1")
		w.WriteHeader(201)
		w.Write([]byte(`{"inserted":1,"deleted":0,"transformed":0}`))
	}
	for _, c := range []struct {
		name    string
		script  []func(http.ResponseWriter)
		retries int
		wantErr error
		calls   int
	}{
		{"pending twice, then the commit", []func(http.ResponseWriter){problem(503, "idempotency_receipt_pending", "same_key"), problem(503, "idempotency_receipt_pending", "same_key"), ok}, 2, nil, 3},
		{"in progress past the retries", []func(http.ResponseWriter){problem(409, "idempotency_request_in_progress", "same_key"), problem(409, "idempotency_request_in_progress", "same_key")}, 1, ErrRequestInProgress, 2},
		{"a conflict needs a new key: not retried", []func(http.ResponseWriter){problem(409, "transaction_conflict", "new_key"), ok}, 2, ErrTransactionConflict, 1},
		{"a mismatch: not retried", []func(http.ResponseWriter){problem(422, "idempotency_key_mismatch", "none"), ok}, 2, ErrKeyMismatch, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			keys := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				keys[r.Header.Get("Idempotency-Key")] = true
				n := int(calls.Add(1)) - 1
				c.script[min(n, len(c.script)-1)](w)
			}))
			defer srv.Close()
			cl, err := New(srv.URL, Options{MaxRetries: c.retries, Backoff: func(int) time.Duration { return time.Millisecond }})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = cl.Batch(context.Background(), "t", map[string]any{"deletes": []string{"x"}}, nil)
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if int(calls.Load()) != c.calls || len(keys) != 1 {
				t.Fatalf("%d calls with %d distinct keys, want %d calls, one key", calls.Load(), len(keys), c.calls)
			}
			if retried := c.calls - 1; retried > 0 && time.Since(start) < time.Duration(retried)*time.Second {
				t.Fatalf("%d retries in %v: Retry-After (1 s) not honoured", retried, time.Since(start))
			}
		})
	}
}

// TestRetry_TransportErrorsAreRetriedWithTheSameKey: a server that is not
// there yet, then is.
func TestRetry_TransportErrorsAreRetriedWithTheSameKey(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		w.Write([]byte(`{"inserted":0,"deleted":1,"transformed":0}`))
	}))
	addr := srv.Listener.Addr().String()
	srv.Listener.Close() // refused until started below
	var tries atomic.Int64
	cl, _ := New("http://"+addr, Options{MaxRetries: 5, Backoff: func(n int) time.Duration {
		if tries.Add(1) == 2 {
			l, err := netListen(addr)
			if err == nil {
				srv.Listener = l
				srv.Start()
			}
		}
		return 10 * time.Millisecond
	}})
	defer srv.Close()
	res, err := cl.Batch(context.Background(), "t", map[string]any{"deletes": []string{"x"}}, &BatchOptions{Key: "k"})
	if err != nil || res.Deleted != 1 || res.Key != "k" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestRetry_SessionCallsRetryOnlyWhatIsSafe drives the session calls with
// scripted answers: Get, Info and Abort are retried as idempotent calls,
// Commit as a keyed call (under the same key each time, or none: the
// session's), and Stage — not idempotent, unkeyed — only on 429
// overloaded, never after a lost answer or a 5xx.
func TestRetry_SessionCallsRetryOnlyWhatIsSafe(t *testing.T) {
	const id = "s0123456789abcdef0123456789abcdef"
	problem := func(status int, code string, retryable bool, retryWith string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			rw := ""
			if retryWith != "" {
				rw = `,"retry_with":"` + retryWith + `"`
			}
			w.Write([]byte(`{"code":"` + code + `","retryable":` + map[bool]string{true: "true", false: "false"}[retryable] + rw + `}`))
		}
	}
	lost := func(w http.ResponseWriter, _ *http.Request) { // the answer never comes: the connection drops
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	ok := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/sessions/"+id+"/commit":
			w.Header().Set("Idem-Transaction-Id", "t1")
			w.WriteHeader(201)
			w.Write([]byte(`{"inserted":1,"deleted":0,"transformed":0}`))
		case r.URL.Path == "/v1/sessions/"+id+"/tables/t/docs/d":
			w.Write([]byte(`{"id":"d","doc":{"n":1}}`))
		default:
			w.Write([]byte(`{"session_id":"` + id + `","state":"open","created_at":"2025-01-01T00:00:00Z","expires_at":"2025-01-01T00:00:30Z",` +
				`"stages":1,"documents":1,"writes":1,"result":{"inserted":1,"deleted":0,"transformed":0},"staged":[{"table":"t","inserted":1,"deleted":0,"transformed":0}]}`))
		}
	}
	stage := func(s *Session) error {
		_, err := s.Stage(context.Background(), "t", map[string]any{"inserts": []any{map[string]any{"id": "d", "doc": map[string]any{}}}})
		return err
	}
	get := func(s *Session) error { _, err := s.Get(context.Background(), "t", "d"); return err }
	info := func(s *Session) error { _, err := s.Info(context.Background()); return err }
	abort := func(s *Session) error { _, err := s.Abort(context.Background()); return err }
	commit := func(key string) func(*Session) error {
		return func(s *Session) error {
			res, err := s.Commit(context.Background(), &CommitOptions{Key: key})
			if err == nil && (res.Key != map[bool]string{true: id, false: key}[key == ""] || res.TransactionID != "t1") {
				return errors.New("commit result names the wrong key or transaction")
			}
			return err
		}
	}
	type script []func(http.ResponseWriter, *http.Request)
	for _, c := range []struct {
		name    string
		call    func(*Session) error
		script  script
		wantErr error // nil: success; errLost: a transport error
		calls   int
	}{
		{"stage: overloaded, then staged", stage, script{problem(429, "overloaded", true, ""), ok}, nil, 2},
		{"stage: a lost answer is not retried", stage, script{lost, ok}, errLost, 1},
		{"stage: unavailable is not retried", stage, script{problem(503, "unavailable", true, ""), ok}, ErrUnavailable, 1},
		{"stage: internal is not retried", stage, script{problem(500, "internal", true, ""), ok}, ErrInternal, 1},
		{"stage: session_committed", stage, script{problem(409, "session_committed", false, ""), ok}, ErrSessionCommitted, 1},
		{"get: a lost answer, then the document", get, script{lost, ok}, nil, 2},
		{"get: unavailable, then the document", get, script{problem(503, "unavailable", true, ""), ok}, nil, 2},
		{"info: a lost answer, then the session", info, script{lost, ok}, nil, 2},
		{"abort: unavailable, then aborted", abort, script{problem(503, "unavailable", true, ""), ok}, nil, 2},
		{"abort: session_committed", abort, script{problem(409, "session_committed", false, ""), ok}, ErrSessionCommitted, 1},
		{"commit, no key: pending, lost, then the commit", commit(""), script{problem(503, "idempotency_receipt_pending", true, "same_key"), lost, ok}, nil, 3},
		{"commit, a key: in progress, then the commit", commit("k"), script{problem(409, "idempotency_request_in_progress", true, "same_key"), ok}, nil, 2},
		{"commit: a conflict is final", commit(""), script{problem(409, "transaction_conflict", true, "new_key"), ok}, ErrTransactionConflict, 1},
		{"commit: session_aborted is final", commit(""), script{problem(409, "session_aborted", false, "none"), ok}, ErrSessionAborted, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			var mu sync.Mutex
			keys := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys[r.Header.Get("Idempotency-Key")] = true
				mu.Unlock()
				n := int(calls.Add(1)) - 1
				c.script[min(n, len(c.script)-1)](w, r)
			}))
			defer srv.Close()
			cl, err := New(srv.URL, Options{MaxRetries: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
			if err != nil {
				t.Fatal(err)
			}
			err = c.call(cl.Session(id))
			var perr *Error
			switch {
			case c.wantErr == nil && err != nil,
				c.wantErr == errLost && (err == nil || errors.As(err, &perr)),
				c.wantErr != nil && c.wantErr != errLost && !errors.Is(err, c.wantErr):
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if int(calls.Load()) != c.calls || len(keys) != 1 {
				t.Fatalf("%d calls with keys %v, want %d calls under one key", calls.Load(), keys, c.calls)
			}
		})
	}
}

var errLost = errors.New("a transport error")

// TestRetry_ConflictsOnlyWhenOptedIn: a batch's transaction_conflict
// abort (retry_with new_key) is tried again under a new key only with
// Options.ConflictRetries, at most that many times; by default the key's
// first answer stands.
func TestRetry_ConflictsOnlyWhenOptedIn(t *testing.T) {
	conflict := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(409)
		w.Write([]byte(`{"code":"transaction_conflict","retryable":true,"retry_with":"new_key","transaction_id":"t1","outcome":"aborted"}`))
	}
	ok := func(w http.ResponseWriter) {
		w.WriteHeader(201)
		w.Write([]byte(`{"inserted":1,"deleted":0,"transformed":0}`))
	}
	for _, c := range []struct {
		name    string
		retries int
		script  []func(http.ResponseWriter)
		calls   int
		wantErr error
	}{
		{"off by default", 0, []func(http.ResponseWriter){conflict, ok}, 1, ErrTransactionConflict},
		{"opted in: a new key, then the commit", 2, []func(http.ResponseWriter){conflict, conflict, ok}, 3, nil},
		{"opted in, past the retries", 1, []func(http.ResponseWriter){conflict, conflict, ok}, 2, ErrTransactionConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys) - 1
				mu.Unlock()
				c.script[min(n, len(c.script)-1)](w)
			}))
			defer srv.Close()
			cl, err := New(srv.URL, Options{ConflictRetries: c.retries, Backoff: func(int) time.Duration { return time.Millisecond }})
			if err != nil {
				t.Fatal(err)
			}
			res, err := cl.Batch(context.Background(), "t", map[string]any{"deletes": []string{"x"}}, nil)
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			distinct := map[string]bool{}
			for _, k := range keys {
				distinct[k] = true
			}
			if len(keys) != c.calls || len(distinct) != c.calls {
				t.Fatalf("%d calls with keys %v, want %d calls each with its own key", len(keys), keys, c.calls)
			}
			if err == nil && res.Key != keys[len(keys)-1] {
				t.Fatalf("result key %q, want the one that committed, %q", res.Key, keys[len(keys)-1])
			}
		})
	}
}
