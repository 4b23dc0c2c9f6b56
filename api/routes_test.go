package api_test

import (
	"net/url"
	"strings"
	"testing"
)

func TestTables_CreateListDrop(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	type tbl struct {
		Name   string `json:"name"`
		Shards int    `json:"shards"`
	}
	var got tbl
	n.c.Do("PUT", "/v1/tables/a", nil).JSON(t, 201, &got)
	if got != (tbl{"a", 4}) {
		t.Fatalf("created %+v", got)
	}
	// A re-PUT asking for no shard count, or for the one the table has,
	// is idempotent.
	for _, body := range []any{nil, `{}`, `{"shards":0}`, `{"shards":4}`} {
		n.c.Do("PUT", "/v1/tables/a", body).JSON(t, 200, &got)
		if got != (tbl{"a", 4}) {
			t.Fatalf("re-PUT %v: %+v", body, got)
		}
	}
	n.c.Do("PUT", "/v1/tables/b", `{"shards":2}`).JSON(t, 201, &got)
	if got != (tbl{"b", 2}) {
		t.Fatalf("created %+v", got)
	}
	for _, bad := range []struct{ path, body string }{
		{"/v1/tables/c", `{"shards":257}`},
		{"/v1/tables/c", `{"shards":-1}`},
		{"/v1/tables/c", `{"shards":"x"}`},
		{"/v1/tables/c", `[1]`},
		{"/v1/tables/c", `{"shards":2,"replicas":3}`},
		{"/v1/tables/c", `{"shard":2}`},
		{"/v1/tables/c", `{"shards":2} {}`},
		{"/v1/tables/bad.name", ``},
		{"/v1/tables/" + strings.Repeat("n", 65), ``},
	} {
		var body any
		if bad.body != "" {
			body = bad.body
		}
		p := n.c.Do("PUT", bad.path, body).Problem(t, 400)
		checkProblem(t, p, "invalid_request", 400, false, "none")
	}
	// Nothing was created by the refused bodies.
	n.c.Do("PUT", "/v1/tables/c", `{"shards":2,"replicas":3}`).Problem(t, 400)
	var list struct {
		Tables []tbl `json:"tables"`
	}
	n.c.Do("GET", "/v1/tables", nil).JSON(t, 200, &list)
	if len(list.Tables) != 2 || list.Tables[0] != (tbl{"a", 4}) || list.Tables[1] != (tbl{"b", 2}) {
		t.Fatalf("list %+v", list)
	}
	n.batch("a", "", `{"inserts":[{"id":"x","doc":{}}]}`).JSON(t, 201, nil)
	if r := n.c.Do("DELETE", "/v1/tables/a", nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("drop: %d %s", r.Status, r.Body)
	}
	checkProblem(t, n.c.Do("DELETE", "/v1/tables/a", nil).Problem(t, 404), "table_not_found", 404, false, "new_key")
	checkProblem(t, n.c.Do("DELETE", "/v1/tables/bad.name", nil).Problem(t, 400), "invalid_request", 400, false, "none")
	n.c.Do("GET", "/v1/tables", nil).JSON(t, 200, &list)
	if len(list.Tables) != 1 {
		t.Fatalf("after drop: %+v", list)
	}
	// Recreated, the table is empty.
	n.createTable("a")
	checkProblem(t, n.c.Do("GET", "/v1/tables/a/docs/x", nil).Problem(t, 404), "document_not_found", 404, false, "new_key")
}

// TestTables_RePutWithOtherSettingsIs409: a create that asks an existing
// table for another shard count is refused as such, never answered 200 as
// if the count were in force; the table is unchanged, and the detail names
// the setting and both values.
func TestTables_RePutWithOtherSettingsIs409(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.c.Do("PUT", "/v1/tables/a", `{"shards":2}`).JSON(t, 201, nil)
	p := n.c.Do("PUT", "/v1/tables/a", `{"shards":8}`).Problem(t, 409)
	checkProblem(t, p, "table_settings_conflict", 409, false, "none")
	if !contains(p.Detail, "shards 2") || !contains(p.Detail, "shards 8") {
		t.Fatalf("detail %q does not name the setting and both values", p.Detail)
	}
	// Unchanged, and the same request as the creation is still a 200.
	var got struct {
		Shards int `json:"shards"`
	}
	n.c.Do("PUT", "/v1/tables/a", `{"shards":2}`).JSON(t, 200, &got)
	if got.Shards != 2 {
		t.Fatalf("shards %d after a refused re-PUT", got.Shards)
	}
	// A default-shard table conflicts with an explicit other count too.
	n.c.Do("PUT", "/v1/tables/b", nil).JSON(t, 201, nil)
	checkProblem(t, n.c.Do("PUT", "/v1/tables/b", `{"shards":1}`).Problem(t, 409), "table_settings_conflict", 409, false, "none")
}

// TestRoutes_UnmatchedAnswerProblems: unknown paths and methods answer
// problem bodies (not the mux's plain text), 405 with Allow.
func TestRoutes_UnmatchedAnswerProblems(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	for _, path := range []string{"/", "/v1", "/v1/nope", "/v1/tables/t/batch/extra", "/v2/tables"} {
		p := n.c.Do("GET", path, nil).Problem(t, 404)
		checkProblem(t, p, "not_found", 404, false, "none")
	}
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/v1/tables", "GET, HEAD"},
		{"PATCH", "/v1/tables/t", "DELETE, PUT"},
		{"GET", "/v1/tables/t/batch", "POST"},
		{"DELETE", "/v1/receipts/t/k", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		r := n.c.Do(c.method, c.path, nil)
		p := r.Problem(t, 405)
		checkProblem(t, p, "method_not_allowed", 405, false, "none")
		if r.Header.Get("Allow") != c.allow {
			t.Fatalf("%s %s: Allow %q, want %q", c.method, c.path, r.Header.Get("Allow"), c.allow)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: tokens})
	var h struct {
		Status string `json:"status"`
		Owner  string `json:"owner"`
	}
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if h.Status != "ok" || h.Owner != n.svc.Owner().String() {
		t.Fatalf("healthz %+v", h)
	}
}

// TestReceipt_KeyWithReservedCharacters: keys may hold "/", "?", "#" and
// "%"; the receipt route takes them percent-encoded.
func TestReceipt_KeyWithReservedCharacters(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	n.createTable("t")
	for _, key := range []string{"a/b", "a/b/c", "q?x=1", "h#1", "p%41", "~!$&'()*+,;=:@"} {
		r := n.batch("t", key, `{"inserts":[{"id":"d","doc":{}}]}`)
		r.JSON(t, 201, nil)
		v := n.receiptView("t", key)
		if v.TransactionID != r.Header.Get("Idem-Transaction-Id") || v.State != "terminal" {
			t.Fatalf("key %q: receipt %+v, answer %v", key, v, r.Header)
		}
		if esc := url.PathEscape(key); esc == key && strings.ContainsAny(key, "/?#%") {
			t.Fatalf("key %q was not escaped", key)
		}
	}
}
