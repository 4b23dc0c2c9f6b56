package etcdtest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// TestIdemd_ARedirectAtAnOwnersAddressIsNeverFollowed: node-a's record
// advertises an address that answers 307 to a trap. node-b, asked for a
// step on node-a's session, forwards it there once; the redirect is not
// followed — the trap never receives the client's body or token — and
// node-b answers the client itself, as for an owner it cannot reach,
// never with the trap's body.
func TestIdemd_ARedirectAtAnOwnersAddressIsNeverFollowed(t *testing.T) {
	var trapped atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trapped.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"trap":"caught"}`)
	}))
	t.Cleanup(trap.Close)
	var redirected atomic.Int64
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, trap.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)

	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:alice-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := apitest.NewClient(t, "http://unused").WithToken("alice-token-0123456789")
	a := startNode(t, cl, c, prefix, "node-a", nil, "-lease-ttl", "10s", "-tokens", tokens, "-advertise", redirect.URL)
	b := startNode(t, cl, c, prefix, "node-b", nil, "-lease-ttl", "10s", "-tokens", tokens)
	ca, cb := cl.WithBase(a.Base()), cl.WithBase(b.Base())
	ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	var s struct {
		ID string `json:"session_id"`
	}
	ca.Do("POST", "/v1/sessions", nil).JSON(t, 201, &s)

	r := cb.Do("POST", "/v1/sessions/"+s.ID+"/batch", `{"table":"t","inserts":[{"id":"d","doc":{}}]}`)
	p := r.Problem(t, 503)
	if !strings.Contains(p.Detail, "held by node node-a, which did not answer here") || r.Header.Get("Idem-Served-By") != "" ||
		strings.Contains(string(r.Body), "trap") {
		t.Fatalf("through node-b: %v %s, want node-b's own 503", r.Header, r.Body)
	}
	if redirected.Load() != 1 || trapped.Load() != 0 {
		t.Fatalf("the advertised address got %d requests and the trap %d; want 1 and 0", redirected.Load(), trapped.Load())
	}
	// The session is whole on its holder: nothing was staged elsewhere.
	var info struct {
		Stages int `json:"stages"`
	}
	ca.Do("GET", "/v1/sessions/"+s.ID, nil).JSON(t, 200, &info)
	if info.Stages != 0 {
		t.Fatalf("the session has %d stages, want 0", info.Stages)
	}
}
