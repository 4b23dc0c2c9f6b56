// Package contract checks Idem's HTTP API against its OpenAPI document,
// api/openapi.yaml: the tests of the root module (api, cmd/idemd) and of
// harness record every exchange they make (internal/apitest, with
// IDEM_CONTRACT_DIR set), and this module's TestRecordedExchangesMatchTheSpec
// checks each record here. It is a module of its own so that kin-openapi
// stays out of the root go.mod (and so out of the module graph of every
// program linking engine or receipt); `make test` runs the recording tests
// first and this check after them.
//
// The checks (Spec.Check) are kin-openapi's openapi3filter request and
// response validation (JSON Schema 2020-12 for this 3.1 document) plus what
// openapi3filter leaves out:
//   - the response status must be documented for the operation;
//   - every response header that is not transport-level (Content-Type,
//     Content-Length, Date, …) must be declared on that response;
//   - a non-empty body needs declared content, declared content needs a body;
//   - a request the spec rejects must not be answered 2xx/3xx (the server
//     may be stricter than the spec, never looser);
//   - paths and methods the spec does not route are checked against the
//     document's NoRoute (404) and MethodNotAllowed (405) responses.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/idemdb/idem/internal/apitest"
)

// SpecFile is the spec's path relative to the module root.
const SpecFile = "api/openapi.yaml"

// Names of the components/responses that answer unrouted requests.
const (
	NoRouteResponse          = "NoRoute"
	MethodNotAllowedResponse = "MethodNotAllowed"
	// UnparsableResponse answers, for any path, a request the HTTP layer
	// cannot parse (it never reaches a route).
	UnparsableResponse = "Unparsable"
	// AtConnectionCapResponse answers, for any path, a connection past
	// the node's -max-connections (it never reaches a route).
	AtConnectionCapResponse = "AtConnectionCap"
)

// transportHeaders are response headers that belong to HTTP itself rather
// than to the API contract; they need no declaration.
var transportHeaders = map[string]bool{
	"Content-Type":      true,
	"Content-Length":    true,
	"Content-Encoding":  true,
	"Date":              true,
	"Connection":        true,
	"Keep-Alive":        true,
	"Transfer-Encoding": true,
	"Trailer":           true,
	"Vary":              true,
	// Between nodes only: the owner's signature on its answer to a
	// forwarded request, which the forwarding node checks and strips
	// before its client sees the answer (api/forwardauth.go).
	"Idem-Answered-By":      true,
	"Idem-Answer-Signature": true,
}

// Spec is a loaded, validated OpenAPI document with a router over it.
type Spec struct {
	Doc  *openapi3.T
	Path string

	router           routers.Router
	noRoute          *openapi3.Response
	methodNotAllowed *openapi3.Response
	unparsable       *openapi3.Response
	atConnectionCap  *openapi3.Response
}

// Load reads, resolves and validates the document at path.
func Load(path string) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("contract: load %s: %w", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("contract: validate %s: %w", path, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("contract: %s is OpenAPI %s, want 3.1", path, doc.OpenAPI)
	}
	// Route on paths alone: the tests' servers listen on ephemeral ports,
	// not on the document's server URL.
	routed := *doc
	routed.Servers = nil
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("contract: router: %w", err)
	}
	s := &Spec{Doc: doc, Path: path, router: router}
	for name, dst := range map[string]**openapi3.Response{
		NoRouteResponse: &s.noRoute, MethodNotAllowedResponse: &s.methodNotAllowed, UnparsableResponse: &s.unparsable,
		AtConnectionCapResponse: &s.atConnectionCap,
	} {
		ref := doc.Components.Responses[name]
		if ref == nil || ref.Value == nil {
			return nil, fmt.Errorf("contract: %s has no components/responses/%s", path, name)
		}
		*dst = ref.Value
	}
	return s, nil
}

var (
	loadOnce  sync.Once
	loaded    *Spec
	loadedErr error
)

// MustLoad loads the module's api/openapi.yaml once per process.
func MustLoad(t testing.TB) *Spec {
	t.Helper()
	loadOnce.Do(func() {
		root, err := apitest.ModuleRoot()
		if err != nil {
			loadedErr = err
			return
		}
		loaded, loadedErr = Load(filepath.Join(root, SpecFile))
	})
	if loadedErr != nil {
		t.Fatal(loadedErr)
	}
	return loaded
}

// Exchange is one request and the response it got.
type Exchange struct {
	Request     *http.Request // its Body is ignored: see RequestBody
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// Check validates an exchange against the spec and returns every mismatch
// found (nil if none). HEAD requests are not described and not checked.
func (s *Spec) Check(ex Exchange) error {
	req := ex.Request
	if req.Method == http.MethodHead {
		return nil
	}
	if atConnectionCap(ex) {
		return s.checkUnrouted(ex, http.StatusServiceUnavailable, AtConnectionCapResponse, s.atConnectionCap)
	}
	ctx := context.Background()
	route, params, err := s.router.FindRoute(withBody(req, ex.RequestBody))
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return s.checkUnrouted(ex, http.StatusNotFound, NoRouteResponse, s.noRoute)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return s.checkUnrouted(ex, http.StatusMethodNotAllowed, MethodNotAllowedResponse, s.methodNotAllowed)
	case err != nil:
		return fmt.Errorf("route: %w", err)
	}
	// The gorillamux router matches the escaped path and returns path
	// parameters still percent-encoded; openapi3filter validates them as
	// given. The server sees them decoded, and so must the schemas.
	for name, v := range params {
		if dec, err := url.PathUnescape(v); err == nil {
			params[name] = dec
		}
	}
	var errs []error
	vreq := withBody(req, ex.RequestBody)
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err == nil &&
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json") {
		// The spec lists the media range application/*+json, which
		// kin-openapi does not match: such a body is checked as the JSON
		// it is.
		vreq.Header = vreq.Header.Clone()
		vreq.Header.Set("Content-Type", "application/json")
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if rerr := openapi3filter.ValidateRequest(ctx, in); rerr != nil && ex.Status < 400 {
		errs = append(errs, fmt.Errorf("the server answered %d to a request the spec rejects: %w", ex.Status, rerr))
	}
	ref := route.Operation.Responses.Status(ex.Status)
	if ref == nil || ref.Value == nil {
		return errors.Join(append(errs, fmt.Errorf("status %d is not documented for %s %s", ex.Status, route.Method, route.Path))...)
	}
	errs = append(errs, s.checkResponse(in, ex, ref.Value)...)
	return errors.Join(errs...)
}

// atConnectionCap reports whether ex is the answer to a connection past the
// node's cap: a 503 overloaded, which no route answers.
func atConnectionCap(ex Exchange) bool {
	var p struct{ Code string }
	return ex.Status == http.StatusServiceUnavailable && json.Unmarshal(ex.Body, &p) == nil && p.Code == "overloaded"
}

// CheckUnparsable validates the answer to a request the HTTP layer could
// not parse (so no Request exists for it) against the document's
// Unparsable response.
func (s *Spec) CheckUnparsable(status int, header http.Header, body []byte) error {
	req, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		return err
	}
	return s.checkUnrouted(Exchange{Request: req, Status: status, Header: header, Body: body}, status, UnparsableResponse, s.unparsable)
}

// checkUnrouted checks the answer to a request the spec does not route.
func (s *Spec) checkUnrouted(ex Exchange, want int, name string, resp *openapi3.Response) error {
	if ex.Status != want {
		return fmt.Errorf("%s %s is not routed by the spec (%s): want status %d, got %d",
			ex.Request.Method, ex.Request.URL.Path, name, want, ex.Status)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(openapi3.WithStatus(want, &openapi3.ResponseRef{Value: resp}))
	in := &openapi3filter.RequestValidationInput{
		Request: withBody(ex.Request, ex.RequestBody),
		Route:   &routers.Route{Spec: s.Doc, Path: ex.Request.URL.Path, Method: ex.Request.Method, Operation: op},
	}
	return errors.Join(s.checkResponse(in, ex, resp)...)
}

func (s *Spec) checkResponse(in *openapi3filter.RequestValidationInput, ex Exchange, resp *openapi3.Response) []error {
	var errs []error
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 ex.Status,
		Header:                 ex.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(ex.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, err)
	}
	declared := map[string]bool{}
	for name := range resp.Headers {
		declared[http.CanonicalHeaderKey(name)] = true
	}
	var undeclared []string
	for name := range ex.Header {
		if c := http.CanonicalHeaderKey(name); !transportHeaders[c] && !declared[c] {
			undeclared = append(undeclared, c)
		}
	}
	if len(undeclared) > 0 {
		sort.Strings(undeclared)
		errs = append(errs, fmt.Errorf("response %d has undeclared headers %s", ex.Status, strings.Join(undeclared, ", ")))
	}
	switch {
	case len(ex.Body) > 0 && len(resp.Content) == 0:
		errs = append(errs, fmt.Errorf("response %d has a body (%q) but declares no content", ex.Status, clip(ex.Body)))
	case len(ex.Body) > 0 && ex.Header.Get("Content-Type") == "":
		errs = append(errs, fmt.Errorf("response %d has a body but no Content-Type", ex.Status))
	case len(ex.Body) == 0 && len(resp.Content) > 0:
		errs = append(errs, fmt.Errorf("response %d declares content but has an empty body", ex.Status))
	}
	return errs
}

// CheckRecord checks one recorded exchange (see apitest.Record).
func (s *Spec) CheckRecord(rec apitest.Record) error {
	switch rec.Kind {
	case apitest.KindUnparsable:
		return s.CheckUnparsable(rec.Status, rec.Header, rec.Body)
	case apitest.KindExchange:
	default:
		return fmt.Errorf("record of unknown kind %q", rec.Kind)
	}
	u, err := url.ParseRequestURI(rec.URI)
	if err != nil {
		return fmt.Errorf("recorded URI %q: %w", rec.URI, err)
	}
	req := &http.Request{Method: rec.Method, URL: u, RequestURI: rec.URI, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.RequestHeader, Host: "idem.test"}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	header := rec.Header
	if header == nil {
		header = http.Header{}
	}
	return s.Check(Exchange{Request: req, RequestBody: rec.RequestBody, Status: rec.Status, Header: header, Body: rec.Body})
}

// withBody returns a shallow copy of r reading body.
func withBody(r *http.Request, body []byte) *http.Request {
	c := r.Clone(context.Background())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c
}

func clip(b []byte) string {
	const max = 300
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
