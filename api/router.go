package api

import (
	"net/http"

	"github.com/idemdb/idem/code"
)

// router is the routing of requests to their handlers: the mux of the
// registered patterns, each instrumented, and the answer to a request none
// matches. Internal headers are checked (peers.admitInternal) before any
// route sees the request.
type router struct {
	mux     *http.ServeMux
	metrics *metrics
	peers   *peers
	opts    *Options
	// unmatched answers, and records, a request no pattern matches.
	unmatched http.Handler
}

// route registers h for pattern, recorded in the request metrics under
// the pattern. Every registered handler is a *route, so dispatch can tell a
// direct match from the mux's own redirects and fallbacks.
func (s *router) route(pattern string, h http.Handler) {
	s.mux.Handle(pattern, &route{h: s.metrics.instrument(pattern, h)})
}

// route is one registered pattern's handler.
type route struct{ h http.Handler }

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.h.ServeHTTP(w, r) }

// unmatchedRoute labels the metrics of requests no pattern matched.
const unmatchedRoute = "unmatched"

// dispatch serves a request through its route, or answers a problem when
// none matches; either way the request is recorded (metrics.instrument),
// labelled by the status the client got. It never redirects: the mux would
// send a path that is not canonical (dot segments, doubled slashes) or
// lacks a trailing slash elsewhere with a 307, which an API client either
// does not follow or follows to a 404. Such a path is not one of ours and
// gets 404 here. Internal headers are checked first (admitInternal), so
// that no route sees one a client sent.
func (s *router) dispatch(w http.ResponseWriter, r *http.Request) {
	w, r = s.peers.admitInternal(w, r)
	if hotRoute(r) || isRoute(s.muxHandler(r)) {
		// Serve through the mux (not the route) so that it sets the path
		// values.
		ctx := newRequestCtx(r.Context(), s.opts.RequestTimeout)
		defer ctx.end()
		s.mux.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	s.unmatched.ServeHTTP(w, r)
}

// muxHandler is the handler the mux would serve r with.
func (s *router) muxHandler(r *http.Request) http.Handler {
	h, _ := s.mux.Handler(r)
	return h
}

func isRoute(h http.Handler) bool { _, ok := h.(*route); return ok }

// noRoute answers a request no pattern matches: 405 where the path has
// routes for other methods (as the mux's fallback would say), else 404.
func (s *router) noRoute(w http.ResponseWriter, r *http.Request) {
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
