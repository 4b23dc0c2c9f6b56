// Package api is Idem's HTTP interface (docs/design.md §8): tables, documents, the
// batch route with optional Idempotency-Key, receipts, health and metrics.
// Errors are RFC 9457 problem details; keyed answers are the receipt's
// stored envelope, rendered the same way every time.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// Options configure a Server. Zero fields take defaults.
type Options struct {
	// Tokens maps bearer tokens to principals; nil means a single Anonymous
	// principal. Server.SetTokens replaces them while serving.
	Tokens map[string]string
	// BodyBytesMax caps a request body (default 1 MiB); larger → 413.
	BodyBytesMax int64
	// RequestTimeout bounds the work of one request (default 60s; a keyed
	// request's Prefer wait is bounded separately by the service).
	RequestTimeout time.Duration
	// BodyTimeout bounds reading a request's body (default 10s); a body
	// still arriving then is answered 408 request_timeout and its
	// connection closed, so a slow sender holds a connection that long at
	// most, not the whole RequestTimeout.
	BodyTimeout time.Duration
	// StoreCollectors are the store's own metrics, registered beside the
	// API's (for engine.DB: enginemetrics.New(db.Stats)).
	StoreCollectors []prometheus.Collector
	// Health, if set, is checked by /healthz: an error answers 503
	// unavailable (e.g. the engine fail-stopped and needs a restart).
	Health func() error
	// Admins are the principals that may act as operators: list every
	// principal's receipts and resolve a stuck one (admin.go). On a server
	// without tokens the single principal is one.
	Admins []string
	// Forward, if set with a secret, sends a keyed request whose receipt
	// another live node holds to that node, and accepts requests other
	// nodes forward (forward.go); nil answers it here and serves every
	// request as a client's.
	Forward *Forwarding
	// Backup, if set, takes a backup of the store under idemd's
	// -backup-dir (backup.go); nil answers POST /v1/admin/backup 501.
	Backup BackupFunc
	Logger *slog.Logger
}

const (
	defaultBodyBytesMax   = 1 << 20
	defaultRequestTimeout = 60 * time.Second
	// defaultBodyTimeout lets a client at 100 KiB/s send a default-sized
	// (1 MiB) body.
	defaultBodyTimeout = 10 * time.Second
)

// Server serves the API for one receipt service, or for the services of
// a deployment's store shards (NewSharded).
type Server struct {
	// svc is shards[0]: what every shard has alike (its bounds, -wait-max,
	// -session-ttl-max) is read from it.
	svc *receipt.Service
	// shards are the services of the store shards, in the shard map's
	// order; one without sharding (shardroute.go).
	shards  []*receipt.Service
	opts    Options
	tokens  atomic.Pointer[tokenSet] // nil: every request is Anonymous
	mux     *http.ServeMux
	handler http.Handler
	metrics *metrics
	// unmatched answers, and records, a request no pattern matches.
	unmatched http.Handler
	// unavailable counts writes refused by a store that accepts none.
	unavailable unavailableLog
	// unhealthyLogged gates the log of /healthz's 503s.
	unhealthyLogged logGate
	// forwarder forwards requests to their owners; nil: forwarding is off.
	forwarder *forwarder
}

// New builds the server and its routes, on one receipt service.
func New(svc *receipt.Service, opts Options) *Server {
	return NewSharded([]*receipt.Service{svc}, opts)
}

// NewSharded builds the server on the services of every store shard, in
// the shard map's order (1..StoreShardsMax of them): each request goes to
// its shard's (shardroute.go).
func NewSharded(shards []*receipt.Service, opts Options) *Server {
	if len(shards) < 1 || len(shards) > StoreShardsMax {
		panic(fmt.Sprintf("api: %d store shards, not 1..%d", len(shards), StoreShardsMax))
	}
	if opts.BodyBytesMax <= 0 {
		opts.BodyBytesMax = defaultBodyBytesMax
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultRequestTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = defaultBodyTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{svc: shards[0], shards: slices.Clone(shards), opts: opts, mux: http.NewServeMux(), forwarder: newForwarder(opts.Forward)}
	if opts.Forward != nil && s.forwarder == nil {
		opts.Logger.Warn("api: forwarding is off: its cluster secret is shorter than " + strconv.Itoa(ClusterSecretBytesMin) + " bytes")
	}
	if opts.Tokens != nil {
		set := tokenSet(maps.Clone(opts.Tokens))
		s.tokens.Store(&set)
	}
	s.metrics = newMetrics(s.shards, opts.StoreCollectors, opts.Health)
	s.metrics.reg.MustRegister(s.refusalCollectors()...)
	auth := func(h http.HandlerFunc) http.Handler { return s.authenticate(h) }
	s.route("PUT /v1/tables/{table}", auth(s.putTable))
	s.route("DELETE /v1/tables/{table}", auth(s.deleteTable))
	s.route("GET /v1/tables", auth(s.listTables))
	s.route("POST /v1/tables/{table}/batch", auth(s.batch))
	s.route("GET /v1/tables/{table}/docs/{id}", auth(s.getDoc))
	s.route("GET /v1/receipts/{table}/{key...}", auth(s.getReceipt))
	s.route("GET /v1/receipts", auth(s.listReceipts))
	s.route("POST /v1/admin/receipts/{txn_id}/resolve", auth(s.resolveReceipt))
	s.route("POST /v1/admin/backup", auth(s.backup))
	s.route("POST /v1/sessions", auth(s.beginSession))
	s.route("GET /v1/sessions/{id}", auth(s.getSession))
	s.route("GET /v1/sessions/{id}/receipt", auth(s.getSessionReceipt))
	s.route("DELETE /v1/sessions/{id}", auth(s.abortSession))
	s.route("POST /v1/sessions/{id}/batch", auth(s.stageSession))
	s.route("GET /v1/sessions/{id}/tables/{table}/docs/{doc}", auth(s.readSessionDoc))
	s.route("POST /v1/sessions/{id}/commit", auth(s.commitSession))
	s.route("GET /healthz", http.HandlerFunc(s.healthz))
	s.route("GET /metrics", s.metrics.handler())
	s.unmatched = s.metrics.instrument(unmatchedRoute, http.HandlerFunc(s.noRoute))
	s.handler = http.HandlerFunc(s.dispatch)
	return s
}

// route registers h for pattern, recorded in the request metrics under
// the pattern. Every registered handler is a *route, so dispatch can tell a
// direct match from the mux's own redirects and fallbacks.
func (s *Server) route(pattern string, h http.Handler) {
	s.mux.Handle(pattern, &route{h: s.metrics.instrument(pattern, h)})
}

// route is one registered pattern's handler.
type route struct{ h http.Handler }

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.h.ServeHTTP(w, r) }

// unmatchedRoute labels the metrics of requests no pattern matched.
const unmatchedRoute = "unmatched"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// dispatch serves a request through its route, or answers a problem when
// none matches; either way the request is recorded (metrics.instrument),
// labelled by the status the client got. It never redirects: the mux would
// send a path that is not canonical (dot segments, doubled slashes) or
// lacks a trailing slash elsewhere with a 307, which an API client either
// does not follow or follows to a 404. Such a path is not one of ours and
// gets 404 here. Internal headers are checked first (admitInternal), so
// that no route sees one a client sent.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	w, r = s.admitInternal(w, r)
	if h, _ := s.mux.Handler(r); isRoute(h) {
		// Serve through the mux (not the route) so that it sets the path
		// values.
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		s.mux.ServeHTTP(w, r.WithContext(&requestCtx{Context: ctx}))
		return
	}
	s.unmatched.ServeHTTP(w, r)
}

func isRoute(h http.Handler) bool { _, ok := h.(*route); return ok }

// noRoute answers a request no pattern matches: 405 where the path has
// routes for other methods (as the mux's fallback would say), else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeProblem(w, code.MethodNotAllowed, r.Method+" is not allowed on "+r.URL.EscapedPath())
		return
	}
	writeProblem(w, code.NotFound, "no route for "+r.URL.EscapedPath())
}

// statusProbe captures what the mux's fallback handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// readBody reads at most BodyBytesMax bytes of a JSON body within
// BodyTimeout; a larger body is answered 413, a slower one 408, one whose
// Content-Type is not JSON 415.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) // not every writer (a test's) has a connection
	body, err := readAllSized(s.bodyReader(w, r), r.ContentLength, s.opts.BodyBytesMax)
	_ = rc.SetReadDeadline(time.Time{})
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeProblem(w, code.PayloadTooLarge, "request body exceeds "+strconv.FormatInt(s.opts.BodyBytesMax, 10)+" bytes")
		return nil, false
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read side is past its deadline: it cannot
		// carry another request.
		w.Header().Set("Connection", "close")
		writeProblem(w, code.RequestTimeout, "the request body did not arrive within "+s.opts.BodyTimeout.String())
		return nil, false
	case err != nil:
		writeProblem(w, code.InvalidRequest, "reading the request body failed")
		return nil, false
	}
	if ct := r.Header.Get("Content-Type"); len(body) > 0 && !isJSON(ct) {
		msg := fmt.Sprintf("the body must be JSON (Content-Type application/json or application/*+json), not %q", ct)
		if ct == "" {
			msg = "a body needs Content-Type: application/json"
		}
		writeProblem(w, code.UnsupportedMedia, msg)
		return nil, false
	}
	return body, true
}

// bodyReader is r's body bounded by BodyBytesMax. A body whose
// Content-Length is within the bound needs no MaxBytesReader: net/http
// reads no byte past the length, and readAllSized refuses more than max
// from a reader that would (a request built in-process). A larger or
// unannounced (chunked) one goes through it: past the bound it answers
// 413 and has the connection closed, its rest unread.
func (s *Server) bodyReader(w http.ResponseWriter, r *http.Request) io.Reader {
	if r.ContentLength > 0 && r.ContentLength <= s.opts.BodyBytesMax {
		return r.Body
	}
	return http.MaxBytesReader(w, r.Body, s.opts.BodyBytesMax)
}

// readAllSized is io.ReadAll with the buffer sized once from the
// request's Content-Length (when it is within max), instead of grown from
// 512 bytes with a copy at each doubling. The length is only a hint: more
// is read if it comes, up to max (then *http.MaxBytesError).
func readAllSized(r io.Reader, hint, max int64) ([]byte, error) {
	if hint <= 0 || hint > max {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, hint+1) // +1: EOF is seen without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return b, &http.MaxBytesError{Limit: max}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow as ReadAll would
		}
	}
}

// isJSON reports whether a Content-Type names JSON: application/json or
// any application/*+json, parameters (charset) allowed. A body without a
// Content-Type is not: curl -d, for one, would otherwise pass a form for
// JSON; every client of ours says what it sends.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // what every client of ours sends: no parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// writeError answers an error from the service layer: typed codes keep
// their status; anything else is internal (and logged).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	writeCodeError(w, s.classify(r, err))
}

// classify turns a failure of the service layer into its problem: typed
// codes keep theirs; a store that fail-stopped (or is closing) is
// unavailable, counted and logged once; anything else is internal and
// logged.
func (s *Server) classify(r *http.Request, err error) *code.Error {
	var ce *code.Error
	switch {
	case errors.As(err, &ce):
		s.noteRefusal(ce.Code)
		return ce
	case errors.Is(err, store.ErrNoSpace):
		s.noteUnavailable(err)
		return &code.Error{Code: code.StoreFull, RetryAfter: noSpaceRetryAfter,
			Message: "the store is out of space (etcd's NOSPACE alarm): nothing was written; writes resume once space is freed, with no restart; retry later with the same key"}
	case errors.Is(err, store.ErrFailStopped), errors.Is(err, store.ErrClosed):
		s.noteUnavailable(err)
		return code.Errorf(code.Unavailable, "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts")
	case errors.Is(err, store.ErrUnavailable):
		s.noteUnavailable(err)
		return code.Errorf(code.Unavailable, "the store cannot be reached (this node is cut off from it); retry, through another node if you can")
	}
	msg := "internal error"
	switch {
	case errors.Is(err, store.ErrAmbiguous):
		msg = "the write's outcome is unknown"
	case errors.Is(err, context.DeadlineExceeded):
		msg = "the request timed out"
	case errors.Is(err, store.ErrCorruption):
		// Never an envelope, never a new execution: the operator's
		// idemctl check names the damaged file.
		msg = "stored data this request needs is damaged (idemctl check names it)"
	}
	s.opts.Logger.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return code.Errorf(code.Internal, "%s", msg)
}

func (s *Server) health() error {
	if s.opts.Health == nil {
		return nil
	}
	return s.opts.Health()
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Health != nil {
		if err := s.opts.Health(); err != nil {
			s.noteUnhealthy(err)
			writeProblem(w, code.Unavailable, healthDetail(err))
			return
		}
	}
	h := healthJSON{Status: "ok", Owner: s.svc.Owner().String()}
	if f, until, ok := s.svc.Restored(); ok {
		h.Restored = &restoredJSON{RestoredAt: f.RestoredAt.UTC(), BackupTime: f.BackupTime.UTC(), FenceUntil: until.UTC()}
	}
	if len(s.shards) > 1 {
		for _, svc := range s.shards {
			sh := shardHealthJSON{Owner: svc.Owner().String()}
			if f, until, ok := svc.Restored(); ok {
				sh.Restored = &restoredJSON{RestoredAt: f.RestoredAt.UTC(), BackupTime: f.BackupTime.UTC(), FenceUntil: until.UTC()}
			}
			h.Shards = append(h.Shards, sh)
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// healthJSON is /healthz's answer. Owner and Restored are shard 0's;
// Shards, on a sharded deployment only, says each shard's.
type healthJSON struct {
	Status   string            `json:"status"`
	Owner    string            `json:"owner"`
	Restored *restoredJSON     `json:"restored,omitempty"`
	Shards   []shardHealthJSON `json:"shards,omitempty"`
}

// shardHealthJSON is one store shard's part of /healthz: this node's
// incarnation there, and its restore fence.
type shardHealthJSON struct {
	Owner    string        `json:"owner"`
	Restored *restoredJSON `json:"restored,omitempty"`
}

// restoredJSON says the store was restored from a backup, and how long its
// restore fence lasts.
type restoredJSON struct {
	RestoredAt time.Time `json:"restored_at"`
	BackupTime time.Time `json:"backup_time"`
	FenceUntil time.Time `json:"fence_until"`
}
