package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// How far a request travels between nodes: one hop at most, and only to
// the incarnation that holds what it asks for. The checks return their
// violations, so that the self-test (selftest_test.go) can require them
// to catch the planted bugs.

// ringHopsMax is where the ring's address stops relaying: a request
// forwarded that many times is in a loop. It answers 508 from then on, so
// that a loop ends fast and the check can count it.
const ringHopsMax = 4

// openNode opens a receipt service on store as node, advertising adv.
func openNode(t *testing.T, st store.Store, node, adv string) *receipt.Service {
	t.Helper()
	svc, err := receipt.Open(context.Background(), st, receipt.Options{Node: node, Advertise: adv,
		MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func forwarding(node string) api.Options {
	return api.Options{Logger: quiet, Forward: &api.Forwarding{Node: node, Secret: clusterSecret}}
}

// beginSession begins a session through c and returns its stage path.
func beginSession(t *testing.T, c *apitest.Client) string {
	t.Helper()
	var s struct {
		ID string `json:"session_id"`
	}
	c.Do("POST", "/v1/sessions", nil).JSON(t, 201, &s)
	return "/v1/sessions/" + s.ID + "/batch"
}

// ringAddress is the address n-x advertises: it relays a forwarded
// request to the node after its sender in the ring n-a → n-b → n-c → n-a,
// counting each (the check resets the count per request), and answers
// 508 past ringHopsMax.
type ringAddress struct {
	next    map[string]*url.URL
	relayed atomic.Int64
	proxy   *httputil.ReverseProxy
}

func newRingAddress(next map[string]string) *ringAddress {
	ra := &ringAddress{next: map[string]*url.URL{}}
	for from, to := range next {
		ra.next[from], _ = url.Parse(to)
	}
	ra.proxy = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(ra.next[r.In.Header.Get("Idem-Forwarded-By")])
		r.Out.Host = r.In.Host
	}}
	return ra
}

func (ra *ringAddress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ra.relayed.Add(1) > ringHopsMax || ra.next[r.Header.Get("Idem-Forwarded-By")] == nil {
		w.WriteHeader(http.StatusLoopDetected)
		return
	}
	ra.proxy.ServeHTTP(w, r)
}

// forwardLoopViolations: three nodes n-a, n-b, n-c and a session held by
// n-x, whose node record advertises an address that sends a request on
// to the node after its sender in a ring (a stale load balancer, say):
// every node believes the owner is another node, so a request forwarded
// again would go round. A step asked of each node must be answered by
// that node itself (n-x is not reachable there) after exactly one
// forwarded hop.
func forwardLoopViolations(t *testing.T) []string {
	t.Helper()
	st := memstore.New()
	ring := []string{"n-a", "n-b", "n-c"}
	base := map[string]string{}
	for _, n := range ring {
		ln := listen(t)
		base[n] = "http://" + ln.Addr().String()
		serve(t, ln, api.New(openNode(t, st, n, base[n]), forwarding(n)))
	}
	ra := newRingAddress(map[string]string{"n-a": base["n-b"], "n-b": base["n-c"], "n-c": base["n-a"]})
	lnRing, lnX := listen(t), listen(t)
	serve(t, lnRing, ra)
	serve(t, lnX, api.New(openNode(t, st, "n-x", "http://"+lnRing.Addr().String()), forwarding("n-x")))
	cx := apitest.NewClient(t, "http://"+lnX.Addr().String())
	cx.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	path := beginSession(t, cx)
	var out []string
	for _, n := range ring {
		ra.relayed.Store(0)
		r := cx.WithBase(base[n]).Do("POST", path, stageBody)
		hops := ra.relayed.Load()
		if hops != 1 || r.Status != 503 || !strings.Contains(string(r.Body), "held by node n-x") || r.Header.Get("Idem-Served-By") != "" {
			out = append(out, fmt.Sprintf("a step asked of %s: %d hops (want 1), answered %d %s (served by %q)",
				n, hops, r.Status, r.Body, r.Header.Get("Idem-Served-By")))
		}
	}
	return out
}

// TestForward_NodesThatDisagreeOnTheOwnerForwardOneHop: see
// forwardLoopViolations.
func TestForward_NodesThatDisagreeOnTheOwnerForwardOneHop(t *testing.T) {
	for _, v := range forwardLoopViolations(t) {
		t.Error(v)
	}
}

// ownerRestartViolations: n-a's first incarnation holds a session and
// dies (its lease still runs); n-a restarts under the same node ID, a new
// incarnation advertising a new address, which holds nothing of it. A
// step asked of n-b for that session must not be forwarded to the new
// incarnation as if it held the claim: n-b answers it itself, and the new
// incarnation is never asked. Locate says so too: the old incarnation has
// no address, the new one its own.
func ownerRestartViolations(t *testing.T) []string {
	t.Helper()
	st := memstore.New()
	ln1 := listen(t)
	old := openNode(t, st, "n-a", "http://"+ln1.Addr().String())
	srv1 := serve(t, ln1, api.New(old, forwarding("n-a")))
	c1 := apitest.NewClient(t, srv1.URL)
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	path := beginSession(t, c1)
	srv1.Close() // the process dies: nothing released, its lease runs on
	old.Close()

	ln2, lnB := listen(t), listen(t)
	restarted := openNode(t, st, "n-a", "http://"+ln2.Addr().String())
	var asked atomic.Int64
	srv2 := api.New(restarted, forwarding("n-a"))
	serve(t, ln2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		srv2.ServeHTTP(w, r)
	}))
	b := openNode(t, st, "n-b", "http://"+lnB.Addr().String())
	serve(t, lnB, api.New(b, forwarding("n-b")))

	var out []string
	if restarted.Owner() == old.Owner() {
		t.Fatalf("the restart kept the incarnation %s", old.Owner())
	}
	ctx := context.Background()
	if addr, err := b.Locate(ctx, old.Owner()); err != nil || addr != "" {
		out = append(out, fmt.Sprintf("Locate(%s), a dead incarnation: %q %v, want none", old.Owner(), addr, err))
	}
	if addr, err := b.Locate(ctx, restarted.Owner()); err != nil || addr != "http://"+ln2.Addr().String() {
		out = append(out, fmt.Sprintf("Locate(%s), the live one: %q %v, want its address", restarted.Owner(), addr, err))
	}
	r := c1.WithBase("http://"+lnB.Addr().String()).Do("POST", path, stageBody)
	if asked.Load() != 0 || r.Status != 503 || !strings.Contains(string(r.Body), "held by node n-a") || r.Header.Get("Idem-Served-By") != "" {
		out = append(out, fmt.Sprintf("a step on the dead incarnation's session, asked of n-b: the new incarnation was asked %d times (want 0); answered %d %s (served by %q)",
			asked.Load(), r.Status, r.Body, r.Header.Get("Idem-Served-By")))
	}
	return out
}

// TestForward_ARestartedOwnerIsNotForwardedItsPredecessorsClaims: see
// ownerRestartViolations.
func TestForward_ARestartedOwnerIsNotForwardedItsPredecessorsClaims(t *testing.T) {
	for _, v := range ownerRestartViolations(t) {
		t.Error(v)
	}
}
