package api_test

import (
	"fmt"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

var tokens = map[string]string{"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"}

func TestAuth_MissingOrUnknownBearerIs401(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: tokens})
	alice := n.c.WithToken("tok-alice")
	if r := alice.Do("PUT", "/v1/tables/t", nil); r.Status != 201 {
		t.Fatalf("create with a token: %d %s", r.Status, r.Body)
	}
	for name, auth := range map[string]string{
		"missing":         "",
		"unknown":         "Bearer nope",
		"other scheme":    "Basic dG9rLWFsaWNlOg==",
		"no token":        "Bearer ",
		"token no scheme": "tok-alice",
	} {
		t.Run(name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/v1/tables/t/batch", incBody},
				{"GET", "/v1/tables", ""},
				{"PUT", "/v1/tables/u", ""},
				{"DELETE", "/v1/tables/t", ""},
				{"GET", "/v1/tables/t/docs/c", ""},
				{"GET", "/v1/receipts/t/k", ""},
			} {
				var body any
				if req.body != "" {
					body = req.body
				}
				r := n.c.Do(req.method, req.path, body, "Authorization", auth, "Idempotency-Key", "k")
				p := r.Problem(t, 401)
				checkProblem(t, p, "unauthenticated", 401, false, "none")
				checkUnbound(t, r, p)
				if r.Header.Get("WWW-Authenticate") != `Bearer realm="idem"` {
					t.Fatalf("%s %s: WWW-Authenticate %q", req.method, req.path, r.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	// Nothing was written by the rejected requests.
	alice.Do("GET", "/v1/tables/t/docs/c", nil).Problem(t, 404)
	// The scheme is case-insensitive (RFC 9110 §11.1).
	if r := n.c.Do("GET", "/v1/tables", nil, "Authorization", "bearer tok-bob"); r.Status != 200 {
		t.Fatalf("lower-case scheme: %d %s", r.Status, r.Body)
	}
	// Health and metrics need no token.
	n.c.Do("GET", "/healthz", nil).JSON(t, 200, nil)
	if r := n.c.Do("GET", "/metrics", nil); r.Status != 200 {
		t.Fatalf("metrics: %d", r.Status)
	}
}

// TestAuth_ReceiptsAreScopedByPrincipal: the same key from two principals,
// each on a table "t" of its own, is two receipts (two transaction IDs, one
// execution in each table), and a principal cannot see another's receipt.
func TestAuth_ReceiptsAreScopedByPrincipal(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: tokens})
	alice, bob, carol := n.c.WithToken("tok-alice"), n.c.WithToken("tok-bob"), n.c.WithToken("tok-carol")
	alice.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	bob.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	a := alice.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "shared")
	b := bob.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "shared")
	a.JSON(t, 201, nil)
	b.JSON(t, 201, nil)
	ta, tb := a.Header.Get("Idem-Transaction-Id"), b.Header.Get("Idem-Transaction-Id")
	if ta == "" || ta == tb || hasHeader(b, "Idempotent-Replayed") {
		t.Fatalf("alice %s, bob %s (bob replayed: %v)", ta, tb, hasHeader(b, "Idempotent-Replayed"))
	}
	for _, c := range []*apitest.Client{alice, bob} {
		var d struct {
			Doc map[string]any `json:"doc"`
		}
		c.Do("GET", "/v1/tables/t/docs/c", nil).JSON(t, 200, &d)
		if d.Doc["n"] != float64(1) {
			t.Fatalf("n = %v, want 1 (one execution in each principal's table)", d.Doc["n"])
		}
	}
	// Each replays their own.
	if r := alice.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "shared"); r.Header.Get("Idem-Transaction-Id") != ta ||
		r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("alice replay %v", r.Header)
	}
	var va, vb receiptView
	alice.Do("GET", "/v1/receipts/t/shared", nil).JSON(t, 200, &va)
	bob.Do("GET", "/v1/receipts/t/shared", nil).JSON(t, 200, &vb)
	if va.TransactionID != ta || vb.TransactionID != tb {
		t.Fatalf("receipt views: alice %s bob %s", va.TransactionID, vb.TransactionID)
	}
	// A key only alice used is invisible to bob and carol; bob's key is
	// invisible to carol.
	alice.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "alice-only").JSON(t, 201, nil)
	for _, c := range []struct {
		who  *apitest.Client
		name string
		key  string
	}{{bob, "bob", "alice-only"}, {carol, "carol", "alice-only"}, {carol, "carol", "shared"}} {
		p := c.who.Do("GET", "/v1/receipts/t/"+c.key, nil).Problem(t, 404)
		if p.Code != "receipt_not_found" {
			t.Fatalf("%s sees %s: %+v", c.name, c.key, p)
		}
	}
}

// TestAuth_APrincipalIsATenant: on every route, another principal's table
// does not exist (404 table_not_found), two principals' tables of one name
// are two tables, and tokens of one principal share its tables.
func TestAuth_APrincipalIsATenant(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: map[string]string{"tok-alice": "alice", "tok-alice-2": "alice", "tok-bob": "bob", "tok-carol": "carol"}})
	alice, alice2, bob, carol := n.c.WithToken("tok-alice"), n.c.WithToken("tok-alice-2"), n.c.WithToken("tok-bob"), n.c.WithToken("tok-carol")
	alice.Do("PUT", "/v1/tables/orders", nil).JSON(t, 201, nil)
	bob.Do("PUT", "/v1/tables/orders", nil).JSON(t, 201, nil) // his own, not alice's (200)
	alice2.Do("PUT", "/v1/tables/orders", nil).JSON(t, 200, nil)

	alice.Do("POST", "/v1/tables/orders/batch", `{"inserts":[{"id":"x","doc":{"by":"alice"}}]}`).JSON(t, 201, nil)
	bob.Do("POST", "/v1/tables/orders/batch", `{"inserts":[{"id":"x","doc":{"by":"bob"}}]}`, "Idempotency-Key", "k").JSON(t, 201, nil)
	alice.Do("POST", "/v1/tables/orders/batch", `{"inserts":[{"id":"y","doc":{"by":"alice"}}]}`, "Idempotency-Key", "k").JSON(t, 201, nil)
	for _, c := range []struct {
		who  *apitest.Client
		want string
	}{{alice, "alice"}, {alice2, "alice"}, {bob, "bob"}} {
		var d struct {
			Doc map[string]string `json:"doc"`
		}
		c.who.Do("GET", "/v1/tables/orders/docs/x", nil).JSON(t, 200, &d)
		if d.Doc["by"] != c.want {
			t.Fatalf("read %v, want %s's document", d.Doc, c.want)
		}
	}
	bob.Do("GET", "/v1/tables/orders/docs/y", nil).Problem(t, 404) // alice's keyed write is not in bob's table

	// Carol has no table of that name: every route says so, and changes nothing.
	notFound := func(r *apitest.Response) {
		t.Helper()
		if p := r.Problem(t, 404); p.Code != "table_not_found" {
			t.Fatalf("carol got %+v, want table_not_found", p)
		}
	}
	notFound(carol.Do("GET", "/v1/tables/orders/docs/x", nil))
	notFound(carol.Do("POST", "/v1/tables/orders/batch", `{"deletes":["x"]}`))
	notFound(carol.Do("POST", "/v1/tables/orders/batch", `{"deletes":["x"]}`, "Idempotency-Key", "k"))
	notFound(carol.Do("DELETE", "/v1/tables/orders", nil))
	var list struct {
		Tables []struct{ Name string } `json:"tables"`
	}
	carol.Do("GET", "/v1/tables", nil).JSON(t, 200, &list)
	if len(list.Tables) != 0 {
		t.Fatalf("carol lists %v", list.Tables)
	}
	alice2.Do("GET", "/v1/tables", nil).JSON(t, 200, &list)
	if len(list.Tables) != 1 || list.Tables[0].Name != "orders" {
		t.Fatalf("alice lists %v", list.Tables)
	}
	// Bob dropping his orders leaves alice's.
	if r := bob.Do("DELETE", "/v1/tables/orders", nil); r.Status != 204 {
		t.Fatalf("bob's drop: %d %s", r.Status, r.Body)
	}
	alice.Do("GET", "/v1/tables/orders/docs/x", nil).JSON(t, 200, nil)
	notFound(bob.Do("GET", "/v1/tables/orders/docs/x", nil))
}

// TestTables_ListPages: GET /v1/tables pages with limit and after.
func TestTables_ListPages(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{})
	for _, name := range []string{"c", "a", "e", "b", "d"} {
		n.c.Do("PUT", "/v1/tables/"+name, nil).JSON(t, 201, nil)
	}
	var got []string
	after := ""
	for page := 0; page < 4; page++ {
		var l struct {
			Tables []struct{ Name string } `json:"tables"`
			Next   string                  `json:"next"`
		}
		path := "/v1/tables?limit=2"
		if after != "" {
			path += "&after=" + after
		}
		n.c.Do("GET", path, nil).JSON(t, 200, &l)
		for _, tb := range l.Tables {
			got = append(got, tb.Name)
		}
		if l.Next == "" {
			break
		}
		after = l.Next
	}
	if fmt.Sprint(got) != "[a b c d e]" {
		t.Fatalf("pages gave %v", got)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "after=a.b"} {
		if p := n.c.Do("GET", "/v1/tables?"+bad, nil).Problem(t, 400); p.Code != "invalid_request" {
			t.Fatalf("%s: %+v", bad, p)
		}
	}
}
