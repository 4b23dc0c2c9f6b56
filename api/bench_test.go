package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
)

// The server's own CPU and allocations per request, without the network
// or a client (cmd/bench measures those): compare runs with benchstat.

func benchServer(b *testing.B) *Server {
	b.Helper()
	db, err := engine.Open(b.TempDir(), engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := receipt.Open(context.Background(), db, receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	s := New(svc, Options{Logger: quiet})
	if w := serve(s, "PUT", "/v1/tables/t", ""); w.Code != http.StatusCreated {
		b.Fatalf("create table: %d %s", w.Code, w.Body)
	}
	return s
}

func serve(s *Server, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// benchBatch is the http suite's batch: 10 documents of about 190 bytes.
func benchBatch() string {
	var b strings.Builder
	b.WriteString(`{"inserts":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"d` + string(rune('a'+i)) + `","doc":{"n":1,"pad":"` + strings.Repeat("p", 160) + `"}}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// BenchmarkServer_ReplayPOST: a keyed POST whose receipt is terminal —
// decode, fingerprint, lookup, the stored envelope written back.
func BenchmarkServer_ReplayPOST(b *testing.B) {
	s := benchServer(b)
	body := benchBatch()
	if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"); w.Code != http.StatusCreated {
		b.Fatalf("first POST: %d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"); w.Code != http.StatusCreated {
			b.Fatalf("replay: %d", w.Code)
		}
	}
}

// BenchmarkServer_Healthz: the floor of an answer through the server's
// routing, metrics and problem-free path.
func BenchmarkServer_Healthz(b *testing.B) {
	s := benchServer(b)
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(s, "GET", "/healthz", ""); w.Code != http.StatusOK {
			b.Fatalf("healthz: %d", w.Code)
		}
	}
}

// BenchmarkServer_KeyedPOST: a keyed POST with a new key — decode, the
// receipt created terminal with the batch in one write, the envelope
// written — through the server on an engine in a temporary directory.
func BenchmarkServer_KeyedPOST(b *testing.B) {
	s := benchServer(b)
	body := benchBatch()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if w := serve(s, "POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k"+strconv.Itoa(i)); w.Code != http.StatusCreated {
			b.Fatalf("POST: %d %s", w.Code, w.Body)
		}
	}
}
