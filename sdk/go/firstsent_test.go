package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestBatch_SendsTheFirstAttemptsTimeOnEveryAttempt: every attempt of a
// key carries Repeatability-First-Sent, an HTTP-date of the call's first
// attempt, identical across retries; a caller's FirstSent is sent as given.
func TestBatch_SendsTheFirstAttemptsTimeOnEveryAttempt(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Repeatability-First-Sent"))
		n := len(got)
		mu.Unlock()
		if n%3 != 0 { // two refusals a retry gets past, then the answer
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(503)
			w.Write([]byte(`{"code":"unavailable","status":503,"retryable":true,"retry_with":"same_key"}`))
			return
		}
		w.WriteHeader(201)
		w.Write([]byte(`{"inserted":1,"deleted":0,"transformed":0}`))
	}))
	defer srv.Close()
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	cl, _ := New(srv.URL, Options{MaxRetries: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	before := time.Now().Truncate(time.Second)
	if _, err := cl.Batch(context.Background(), "t", map[string]any{"deletes": []string{"x"}}, &BatchOptions{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	seen := sent()
	if len(seen) != 3 || seen[0] == "" || seen[1] != seen[0] || seen[2] != seen[0] {
		t.Fatalf("Repeatability-First-Sent on the attempts: %q, want one value on all three", seen)
	}
	at, err := http.ParseTime(seen[0])
	if err != nil || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("Repeatability-First-Sent %q (%v): not an HTTP-date of the call's first attempt", seen[0], err)
	}
	orig := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := cl.Batch(context.Background(), "t", map[string]any{"deletes": []string{"x"}}, &BatchOptions{Key: "k", FirstSent: orig}); err != nil {
		t.Fatal(err)
	}
	for _, g := range sent() {
		if g != "Tue, 01 Dec 2026 10:00:00 GMT" {
			t.Fatalf("with FirstSent %v an attempt sent %q", orig, g)
		}
	}
}
