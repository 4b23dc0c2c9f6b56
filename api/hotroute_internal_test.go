package api

import (
	"net/http/httptest"
	"testing"
)

// TestHotRoute_AdmitsOnlyWhatTheMuxRoutesSo: every request hotRoute admits
// is one the mux serves with the route of the pattern named, no redirect;
// the near misses (escaped, dot or empty segments, another method, a
// trailing slash) are left to the mux's own match.
func TestHotRoute_AdmitsOnlyWhatTheMuxRoutesSo(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct {
		method, target, pattern string // pattern "": hotRoute must not admit it
	}{
		{"POST", "/v1/tables/orders/batch", "POST /v1/tables/{table}/batch"},
		{"POST", "/v1/tables/Orders_2-x/batch", "POST /v1/tables/{table}/batch"},
		{"POST", "/v1/tables/orders/batch?x=1", "POST /v1/tables/{table}/batch"},
		{"GET", "/healthz", "GET /healthz"},
		{"GET", "/healthz?verbose=1", "GET /healthz"},
		{"POST", "/v1/tables//batch", ""},
		{"POST", "/v1/tables/./batch", ""},
		{"POST", "/v1/tables/../batch", ""},
		{"POST", "/v1/tables/a/b/batch", ""},
		{"POST", "/v1/tables/a%2Fb/batch", ""},
		{"POST", "/v1/tables/a%20b/batch", ""},
		{"POST", "/v1/tables/orders/batch/", ""},
		{"POST", "/v1/tables/orders/batchx", ""},
		{"POST", "/v1//tables/orders/batch", ""},
		{"PUT", "/v1/tables/orders/batch", ""},
		{"HEAD", "/healthz", ""},
		{"POST", "/healthz", ""},
		{"GET", "/healthz/", ""},
		{"GET", "/v1/tables/orders/batch", ""},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		got := hotRoute(r)
		if got != (c.pattern != "") {
			t.Errorf("%s %s: hotRoute = %v, want %v", c.method, c.target, got, !got)
		}
		if !got {
			continue
		}
		h, pattern := s.router.mux.Handler(r)
		if !isRoute(h) || pattern != c.pattern {
			t.Errorf("%s %s: admitted, but the mux serves it with %T under %q, want the route %q", c.method, c.target, h, pattern, c.pattern)
		}
	}
}

// BenchmarkRouteCheck is what dispatch's check of a keyed POST costs: the
// mux's match (before hotRoute, on every request) and hotRoute's.
func BenchmarkRouteCheck(b *testing.B) {
	s := benchServer(b)
	r := httptest.NewRequest("POST", "/v1/tables/orders/batch", nil)
	b.Run("mux", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !isRoute(s.router.muxHandler(r)) {
				b.Fatal("not a route")
			}
		}
	})
	b.Run("hot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !hotRoute(r) {
				b.Fatal("not hot")
			}
		}
	})
}
