package api_test

import (
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
)

type sessionView struct {
	ID        string `json:"session_id"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Stages    int    `json:"stages"`
	Documents int    `json:"documents"`
}

func (n *node) beginSession(c *apitest.Client) sessionView {
	n.t.Helper()
	var s sessionView
	r := c.Do("POST", "/v1/sessions", nil)
	r.JSON(n.t, 201, &s)
	if r.Header.Get("Location") != "/v1/sessions/"+s.ID || s.State != "open" {
		n.t.Fatalf("begin: %v %s", r.Header, r.Body)
	}
	return s
}

// TestSessions_BadInputIsTypedAndChangesNothing: every malformed or
// refused session request is answered with its typed problem, and the
// session is as it was: no stage counted, no document seen.
func TestSessions_BadInputIsTypedAndChangesNothing(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{bodyMax: 64 << 10})
	n.createTable("t")
	s := n.beginSession(n.c)
	base := "/v1/sessions/" + s.ID
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not JSON", "POST", base + "/batch", `{"table":`, 400, "invalid_request"},
		{"no table", "POST", base + "/batch", `{"inserts":[{"id":"a","doc":{}}]}`, 400, "invalid_request"},
		{"both forms", "POST", base + "/batch", `{"table":"t","tables":{"t":{"deletes":["a"]}}}`, 400, "invalid_request"},
		{"unknown op", "POST", base + "/batch", `{"table":"t","transforms":[{"id":"a","ops":[{"op":"$nope","path":"x"}]}]}`, 400, "invalid_request"},
		{"unknown member", "POST", base + "/batch", `{"table":"t","upserts":[]}`, 400, "invalid_request"},
		{"empty batch", "POST", base + "/batch", `{"table":"t"}`, 400, "invalid_request"},
		{"invalid doc id", "POST", base + "/batch", `{"table":"t","deletes":[".."]}`, 400, "invalid_request"},
		{"missing table", "POST", base + "/batch", `{"table":"nope","deletes":["a"]}`, 404, "table_not_found"},
		{"a missing table among others", "POST", base + "/batch", `{"tables":{"t":{"deletes":["a"]},"nope":{"deletes":["b"]}}}`, 404, "table_not_found"},
		{"transform of a missing doc", "POST", base + "/batch", `{"table":"t","transforms":[{"id":"a","ops":[{"op":"$inc","path":"n","value":1}]}]}`, 404, "document_not_found"},
		{"huge body", "POST", base + "/batch", `{"table":"t","inserts":[{"id":"a","doc":{"s":"` + strings.Repeat("x", 70<<10) + `"}}]}`, 413, "payload_too_large"},
		{"unknown session", "POST", "/v1/sessions/s00000000000000000000000000000000/batch", `{"table":"t","deletes":["a"]}`, 404, "session_not_found"},
		{"not a session id", "GET", "/v1/sessions/nope", "", 404, "session_not_found"},
		{"ttl too long", "POST", "/v1/sessions", `{"ttl_seconds":100000}`, 400, "invalid_request"},
		{"ttl zero", "POST", "/v1/sessions", `{"ttl_seconds":0}`, 400, "invalid_request"},
		{"begin: unknown member", "POST", "/v1/sessions", `{"ttl":5}`, 400, "invalid_request"},
		{"commit with a body", "POST", base + "/commit", `{"force":true}`, 400, "invalid_request"},
		{"read: invalid table", "GET", base + "/tables/a.b/docs/x", "", 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			p := n.c.Do(tc.method, tc.path, body).Problem(t, tc.status)
			if p.Code != tc.code {
				t.Fatalf("%s %s: %+v, want %s", tc.method, tc.path, p, tc.code)
			}
		})
	}
	var after sessionView
	n.c.Do("GET", base, nil).JSON(t, 200, &after)
	if after.State != "open" || after.Stages != 0 || after.Documents != 0 {
		t.Fatalf("the session after the refused requests: %+v", after)
	}
	// And it still works.
	n.c.Do("POST", base+"/batch", `{"table":"t","inserts":[{"id":"a","doc":{"v":1}}]}`).JSON(t, 200, nil)
	n.c.Do("POST", base+"/commit", nil).JSON(t, 201, nil)
	if d := n.doc("t", "a"); d["v"] != float64(1) {
		t.Fatalf("committed doc %v", d)
	}
}

// TestSessions_AnotherPrincipalSeesNothing: a session is its principal's:
// to anyone else every route answers session_not_found, and nothing they
// send changes it.
func TestSessions_AnotherPrincipalSeesNothing(t *testing.T) {
	t.Parallel()
	n := newNode(t, config{tokens: tokens})
	alice, bob := n.c.WithToken("tok-alice"), n.c.WithToken("tok-bob")
	alice.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	bob.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	s := n.beginSession(alice)
	base := "/v1/sessions/" + s.ID
	for _, req := range []struct{ method, path, body string }{
		{"GET", base, ""},
		{"POST", base + "/batch", `{"table":"t","inserts":[{"id":"x","doc":{}}]}`},
		{"GET", base + "/tables/t/docs/x", ""},
		{"POST", base + "/commit", ""},
		{"DELETE", base, ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		if p := bob.Do(req.method, req.path, body).Problem(t, 404); p.Code != "session_not_found" {
			t.Fatalf("bob's %s %s: %+v", req.method, req.path, p)
		}
	}
	var v sessionView
	alice.Do("GET", base, nil).JSON(t, 200, &v)
	if v.State != "open" || v.Stages != 0 {
		t.Fatalf("alice's session after bob's requests: %+v", v)
	}
	bob.Do("GET", "/v1/tables/t/docs/x", nil).Problem(t, 404)
}
