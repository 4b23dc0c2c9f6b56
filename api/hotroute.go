package api

import (
	"net/http"
	"strings"

	"github.com/idemdb/idem/table"
)

// hotRoute reports whether r is, by its method and path alone, a request
// the mux routes straight to one of its routes — the batch route or
// /healthz, which carry nearly every request — with no redirect: dispatch
// then skips its own ServeMux.Handler, whose match the mux's ServeHTTP
// repeats anyway (0.2–0.5 µs and an allocation per keyed request against
// hotRoute's 15–30 ns: BenchmarkRouteCheck, 2026-12-05). It admits only
// shapes whose match is certain: a path with no escaped bytes whose table
// segment is a valid table name (table.ValidTableName: no dot, no slash).
// Anything else takes the full check; hotroute_internal_test.go holds
// that every path it admits is routed so.
func hotRoute(r *http.Request) bool {
	if r.URL.RawPath != "" {
		return false // escaped bytes: the mux matches the escaped form
	}
	switch r.Method {
	case http.MethodPost:
		name, ok := strings.CutPrefix(r.URL.Path, "/v1/tables/")
		if !ok {
			return false
		}
		name, ok = strings.CutSuffix(name, "/batch")
		return ok && table.ValidTableName(name)
	case http.MethodGet:
		return r.URL.Path == "/healthz"
	}
	return false
}
