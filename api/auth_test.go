package api_test

import (
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

// TestAuth_ReceiptsAreScopedByPrincipal: the same key from two principals
// is two receipts (two transaction IDs, the batch applied twice), and a
// principal cannot see another's receipt.
func TestAuth_ReceiptsAreScopedByPrincipal(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: tokens})
	alice, bob, carol := n.c.WithToken("tok-alice"), n.c.WithToken("tok-bob"), n.c.WithToken("tok-carol")
	alice.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	a := alice.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "shared")
	b := bob.Do("POST", "/v1/tables/t/batch", incBody, "Idempotency-Key", "shared")
	a.JSON(t, 201, nil)
	b.JSON(t, 201, nil)
	ta, tb := a.Header.Get("Idem-Transaction-Id"), b.Header.Get("Idem-Transaction-Id")
	if ta == "" || ta == tb || hasHeader(b, "Idempotent-Replayed") {
		t.Fatalf("alice %s, bob %s (bob replayed: %v)", ta, tb, hasHeader(b, "Idempotent-Replayed"))
	}
	var d struct {
		Doc map[string]any `json:"doc"`
	}
	carol.Do("GET", "/v1/tables/t/docs/c", nil).JSON(t, 200, &d)
	if d.Doc["n"] != float64(2) {
		t.Fatalf("n = %v, want 2 (two principals, two executions)", d.Doc["n"])
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
