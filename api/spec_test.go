package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// The spec's own checks (a valid OpenAPI 3.1 document, its operations
// exactly server.go's routes, its ErrorCode enum and Problem branches
// exactly the code registry) and the check of every recorded exchange live
// in the contract module (contract/), which alone requires kin-openapi.
// What stays here needs the package's unexported symbols.

// serverRoutes returns the patterns server.go registers with s.route, read
// from the source so that a new route cannot be missed.
func serverRoutes(t *testing.T) []string {
	t.Helper()
	routes, err := apitest.ServerRoutes("server.go")
	if err != nil {
		t.Fatal(err)
	}
	return routes
}

var restWildcard = regexp.MustCompile(`\{([a-z]+)\.\.\.\}`)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := receipt.Open(context.Background(), db, receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return New(svc, Options{Logger: quiet})
}

// TestServer_RoutesArePatterns: a request built from each pattern server.go
// registers is routed by the server's mux to exactly that pattern (the
// contract module checks that the patterns are the spec's operations).
func TestServer_RoutesArePatterns(t *testing.T) {
	registered := serverRoutes(t)
	if len(registered) != 18 {
		t.Fatalf("%d routes: %v", len(registered), registered)
	}
	s := newTestServer(t)
	sample := strings.NewReplacer("{table}", "t1", "{id}", "doc-1", "{doc}", "doc-2", "{key...}", "a%2Fb", "{key}", "a%2Fb", "{txn_id}", "00112233445566778899aabbccddeeff")
	for _, pattern := range registered {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			t.Fatalf("pattern %q has no method", pattern)
		}
		r := httptest.NewRequest(method, sample.Replace(path), nil)
		if _, got := s.router.mux.Handler(r); got != pattern {
			t.Errorf("%s %s is routed to %q, want %q", method, r.URL.Path, got, pattern)
		}
	}
	if restWildcard.FindString(strings.Join(registered, " ")) == "" {
		t.Fatalf("no route takes the rest of the path: %v", registered)
	}
}

// TestProblem_TypeAndTitleAreTheRegistrys: the contract module checks the
// spec's Problem branches against "urn:idem:problem:"+code and the code
// registry's titles; the server renders exactly those.
func TestProblem_TypeAndTitleAreTheRegistrys(t *testing.T) {
	if problemTypeBase != "urn:idem:problem:" {
		t.Fatalf("problemTypeBase %q", problemTypeBase)
	}
	for _, c := range code.All() {
		if title(c) != code.Lookup(c).Title || title(c) == "" {
			t.Errorf("%s: title %q, registry %q", c, title(c), code.Lookup(c).Title)
		}
	}
}

// TestWriteError_UnknownErrorsAreInternal: errors without a code answer
// 500 internal (retryable), with a message by kind; a store that accepts no
// writes is 503 unavailable; coded errors keep their code. An unkeyed
// answer has no retry_with. Every answer is recorded for the contract check
// (against the spec of the batch route).
func TestWriteError_UnknownErrorsAreInternal(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct {
		err    error
		code   code.Code
		detail string
	}{
		{errors.New("boom"), code.Internal, "internal error"},
		{fmt.Errorf("apply: %w", store.ErrAmbiguous), code.Internal, "the write's outcome is unknown"},
		{store.ErrFailStopped, code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts"},
		{store.ErrClosed, code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts"},
		{context.DeadlineExceeded, code.Internal, "the request timed out"},
		{fmt.Errorf("wrapped: %w", code.Errorf(code.TableNotFound, "table %q does not exist", "t")), code.TableNotFound, `table "t" does not exist`},
	} {
		req := httptest.NewRequest("POST", "/v1/tables/t/batch", strings.NewReader(`{"deletes":["a"]}`))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.failures.writeError(w, req, c.err)
		res := w.Result()
		body := w.Body.Bytes()
		info := code.Lookup(c.code)
		want := fmt.Sprintf(`{"type":"urn:idem:problem:%s","title":%q,"status":%d,"detail":%q,"code":"%s","retryable":%v}`,
			c.code, title(c.code), info.Status, c.detail, c.code, info.Retryable)
		if res.StatusCode != info.Status || string(body) != want || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%v: %d %s\nwant %d %s", c.err, res.StatusCode, body, info.Status, want)
		}
		apitest.RecordExchange(t, req, []byte(`{"deletes":["a"]}`), res.StatusCode, res.Header, body)
	}
	if code.Lookup(code.Internal) != (code.Info{Status: http.StatusInternalServerError, Retryable: true, RetryWith: code.SameKey, Title: "Internal error"}) {
		t.Fatalf("internal: %+v", code.Lookup(code.Internal))
	}
}
