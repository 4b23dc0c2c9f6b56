package api

import (
	"net/http"
	"strings"
)

// hotRoute reports whether r is, by its method and path alone, a request
// the mux routes straight to one of its routes — the batch route or
// /healthz, which carry nearly every request — with no redirect: dispatch
// then skips its own ServeMux.Handler, whose match the mux's ServeHTTP
// repeats anyway (0.2–0.5 µs and an allocation per keyed request against
// hotRoute's 15–30 ns: BenchmarkRouteCheck, 2026-12-05). It only admits shapes whose match is certain:
// a clean path with no escaped or dot segment and a table segment of the
// characters a table name may have. Anything else takes the full check;
// hotroute_internal_test.go holds that every path it admits is routed so.
func hotRoute(r *http.Request) bool {
	if r.URL.RawPath != "" {
		return false // escaped bytes: the mux matches the escaped form
	}
	switch r.Method {
	case http.MethodPost:
		table, ok := strings.CutPrefix(r.URL.Path, "/v1/tables/")
		if !ok {
			return false
		}
		table, ok = strings.CutSuffix(table, "/batch")
		return ok && plainSegment(table)
	case http.MethodGet:
		return r.URL.Path == "/healthz"
	}
	return false
}

// plainSegment reports whether s is one path segment that needs neither
// escaping nor cleaning: letters, digits, '_' and '-' (table.ValidTableName's
// alphabet, so no dot segment), not empty.
func plainSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
