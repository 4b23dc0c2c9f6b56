package idem

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
