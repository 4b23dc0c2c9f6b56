package api

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/receipt"
)

// TestSpec_IsValidOpenAPI31 loads api/openapi.yaml with kin-openapi and
// validates it as an OpenAPI 3.1 document (JSON Schema 2020-12 schemas).
func TestSpec_IsValidOpenAPI31(t *testing.T) {
	spec, err := apitest.Load("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Doc.OpenAPI != "3.1.0" || !spec.Doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", spec.Doc.OpenAPI)
	}
	if err := spec.Doc.Validate(context.Background(), openapi3.EnableSchemaPatternValidation()); err != nil {
		t.Fatal(err)
	}
}

// serverRoutes returns the patterns server.go registers with s.route, read
// from the source so that a new route cannot be missed.
func serverRoutes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "route" || len(call.Args) != 2 {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Fatalf("s.route with a non-literal pattern at %v", call.Pos())
		}
		p, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		return true
	})
	sort.Strings(out)
	return out
}

var restWildcard = regexp.MustCompile(`\{([a-z]+)\.\.\.\}`)

// specRoutes returns "METHOD /path" for every operation of the spec, in
// ServeMux syntax ({name...} where the server routes the rest of the path).
func specRoutes(doc *openapi3.T, rest map[string]bool) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			p := path
			for name := range rest {
				p = strings.Replace(p, "{"+name+"}", "{"+name+"...}", 1)
			}
			out = append(out, method+" "+p)
		}
	}
	sort.Strings(out)
	return out
}

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

// TestSpec_RoutesMatchServer: every route server.go registers is an
// operation of the spec and vice versa, and a request built from each
// operation's path template is routed by the server's mux to exactly that
// pattern.
func TestSpec_RoutesMatchServer(t *testing.T) {
	spec := apitest.MustLoad(t)
	registered := serverRoutes(t)
	rest := map[string]bool{}
	for _, p := range registered {
		for _, m := range restWildcard.FindAllStringSubmatch(p, -1) {
			rest[m[1]] = true
		}
	}
	documented := specRoutes(spec.Doc, rest)
	if strings.Join(registered, "\n") != strings.Join(documented, "\n") {
		t.Fatalf("routes differ\nserver.go:\n  %s\nopenapi.yaml:\n  %s",
			strings.Join(registered, "\n  "), strings.Join(documented, "\n  "))
	}
	if len(registered) != 8 {
		t.Fatalf("%d routes: %v", len(registered), registered)
	}
	s := newTestServer(t)
	sample := strings.NewReplacer("{table}", "t1", "{id}", "doc-1", "{key}", "a%2Fb")
	for path, item := range spec.Doc.Paths.Map() {
		for method := range item.Operations() {
			r := httptest.NewRequest(method, sample.Replace(path), nil)
			_, pattern := s.mux.Handler(r)
			want := method + " " + path
			for name := range rest {
				want = strings.Replace(want, "{"+name+"}", "{"+name+"...}", 1)
			}
			if pattern != want {
				t.Errorf("%s %s is routed to %q, want %q", method, r.URL.Path, pattern, want)
			}
		}
	}
}

// TestSpec_ErrorCodesMatchRegistry: the spec's ErrorCode enum is exactly
// code.All(), and each code's Problem branch fixes the status, retryable,
// retry_with, type and title the server renders.
func TestSpec_ErrorCodesMatchRegistry(t *testing.T) {
	spec := apitest.MustLoad(t)
	schemas := spec.Doc.Components.Schemas
	var enum []string
	for _, v := range schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	var all []string
	for _, c := range code.All() {
		all = append(all, string(c))
	}
	sort.Strings(enum)
	sort.Strings(all)
	if strings.Join(enum, ",") != strings.Join(all, ",") {
		t.Fatalf("ErrorCode enum %v\ncode.All() %v", enum, all)
	}
	branches := map[string]*openapi3.Schema{}
	for _, ref := range schemas["Problem"].Value.OneOf {
		b := ref.Value
		c, _ := b.Properties["code"].Value.Const.(string)
		if _, dup := branches[c]; dup || c == "" {
			t.Fatalf("Problem.oneOf branch %s: code %q missing or repeated", ref.Ref, c)
		}
		branches[c] = b
	}
	table := schemas["ErrorCode"].Value.Description
	for _, c := range code.All() {
		b := branches[string(c)]
		if b == nil {
			t.Errorf("no Problem.oneOf branch for %s", c)
			continue
		}
		info := code.Lookup(c)
		want := map[string]any{
			"status": float64(info.Status), "retryable": info.Retryable, "retry_with": string(info.RetryWith),
			"type": problemTypeBase + string(c), "title": title(c),
		}
		for member, v := range want {
			got := b.Properties[member].Value.Const
			if n, ok := got.(int); ok {
				got = float64(n)
			}
			if n, ok := got.(uint64); ok {
				got = float64(n)
			}
			if fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("%s: spec %s = %v (%T), server %v", c, member, got, got, v)
			}
		}
		row := fmt.Sprintf("| %s | %d | %v | %s |", c, info.Status, info.Retryable, info.RetryWith)
		if !strings.Contains(table, row) {
			t.Errorf("ErrorCode description lacks the row %q", row)
		}
	}
}

// TestWriteError_UnknownErrorsAreInternal: errors without a code answer
// 500 internal (retryable), with a message by kind; a store that accepts no
// writes is 503 unavailable; coded errors keep their code. An unkeyed
// answer has no retry_with. Every answer matches the spec of the batch
// route.
func TestWriteError_UnknownErrorsAreInternal(t *testing.T) {
	spec := apitest.MustLoad(t)
	s := newTestServer(t)
	for _, c := range []struct {
		err    error
		code   code.Code
		detail string
	}{
		{errors.New("boom"), code.Internal, "internal error"},
		{fmt.Errorf("apply: %w", engine.ErrAmbiguous), code.Internal, "the write's outcome is unknown"},
		{engine.ErrFailStopped, code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts"},
		{engine.ErrClosed, code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts"},
		{context.DeadlineExceeded, code.Internal, "the request timed out"},
		{fmt.Errorf("wrapped: %w", code.Errorf(code.TableNotFound, "table %q does not exist", "t")), code.TableNotFound, `table "t" does not exist`},
	} {
		req := httptest.NewRequest("POST", "/v1/tables/t/batch", strings.NewReader(`{"deletes":["a"]}`))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.writeError(w, req, c.err)
		res := w.Result()
		body := w.Body.Bytes()
		info := code.Lookup(c.code)
		want := fmt.Sprintf(`{"type":"urn:idem:problem:%s","title":%q,"status":%d,"detail":%q,"code":"%s","retryable":%v}`,
			c.code, title(c.code), info.Status, c.detail, c.code, info.Retryable)
		if res.StatusCode != info.Status || string(body) != want || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%v: %d %s\nwant %d %s", c.err, res.StatusCode, body, info.Status, want)
		}
		if err := spec.Check(apitest.Exchange{Request: req, RequestBody: []byte(`{"deletes":["a"]}`),
			Status: res.StatusCode, Header: res.Header, Body: body}); err != nil {
			t.Errorf("%v: %v", c.err, err)
		}
	}
	if code.Lookup(code.Internal) != (code.Info{Status: http.StatusInternalServerError, Retryable: true, RetryWith: code.SameKey, Title: "Internal error"}) {
		t.Fatalf("internal: %+v", code.Lookup(code.Internal))
	}
}
