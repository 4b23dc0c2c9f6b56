package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store/memstore"
)

// Forwarding between two API servers on one store: n-a holds a session,
// n-b is asked for a step on it and forwards it to the address n-a's node
// record advertises — n-a itself, or whatever a test puts there instead.

var clusterSecret = []byte("0123456789abcdef0123456789abcdef-test")

// forwardPair is n-a and n-b. seen records the requests that reached
// n-a's own server.
type forwardPair struct {
	a, b   *httptest.Server
	ca, cb *apitest.Client
	mu     sync.Mutex
	seen   []*http.Request
}

// newForwardPair starts n-a, advertising advertise(n-a's own URL), and
// n-b, forwarding with secretB.
func newForwardPair(t *testing.T, advertise func(own string) string, secretB []byte) *forwardPair {
	t.Helper()
	st := memstore.New()
	p := &forwardPair{}
	lnA, lnB := listen(t), listen(t)
	own := "http://" + lnA.Addr().String()
	open := func(node, adv string) *receipt.Service {
		svc, err := receipt.Open(context.Background(), st, receipt.Options{Node: node, Advertise: adv,
			MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		return svc
	}
	srvA := api.New(open("n-a", advertise(own)), api.Options{Logger: quiet, Forward: &api.Forwarding{Node: "n-a", Secret: clusterSecret}})
	srvB := api.New(open("n-b", "http://"+lnB.Addr().String()), api.Options{Logger: quiet, Forward: &api.Forwarding{Node: "n-b", Secret: secretB}})
	p.a = serve(t, lnA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Clone(context.Background()))
		p.mu.Unlock()
		srvA.ServeHTTP(w, r)
	}))
	p.b = serve(t, lnB, srvB)
	p.ca = apitest.NewClient(t, p.a.URL)
	p.cb = p.ca.WithBase(p.b.URL)
	p.ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	return p
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func serve(t *testing.T, ln net.Listener, h http.Handler) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// session begins a session on n-a and returns its stage path.
func (p *forwardPair) session(t *testing.T) string {
	t.Helper()
	var s struct {
		ID string `json:"session_id"`
	}
	p.ca.Do("POST", "/v1/sessions", nil).JSON(t, 201, &s)
	return "/v1/sessions/" + s.ID + "/batch"
}

func (p *forwardPair) reachedA() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.seen...)
}

const stageBody = `{"table":"t","inserts":[{"id":"d","doc":{}}]}`

// answeredHere checks r is n-b's own answer for a session n-a holds: 503
// naming n-a, nothing relayed.
func answeredHere(t *testing.T, r *apitest.Response, notIn string) {
	t.Helper()
	p := r.Problem(t, 503)
	if !strings.Contains(p.Detail, "held by node n-a, which did not answer here") || r.Header.Get("Idem-Served-By") != "" ||
		r.Header.Get("Set-Cookie") != "" || (notIn != "" && strings.Contains(string(r.Body), notIn)) {
		t.Fatalf("answered %v %s; want n-b's own 503 and nothing relayed", r.Header, r.Body)
	}
}

// TestForward_AStepIsForwardedWithTheClientsHeadersAndRelayedSigned: the
// owner gets the client's Authorization, Content-Type, Prefer and
// Repeatability-First-Sent, with n-b's signature; the client gets the
// owner's answer, Idem-Served-By n-a, and none of the internal headers.
func TestForward_AStepIsForwardedWithTheClientsHeadersAndRelayedSigned(t *testing.T) {
	p := newForwardPair(t, func(own string) string { return own }, clusterSecret)
	path := p.session(t)
	const sent = "Tue, 01 Dec 2026 10:00:00 GMT"
	r := p.cb.Do("POST", path, stageBody, "Repeatability-First-Sent", sent, "Prefer", "wait=1")
	if r.Status != 200 || r.Header.Get("Idem-Served-By") != "n-a" {
		t.Fatalf("a step through n-b: %d %v %s, want n-a's answer relayed", r.Status, r.Header, r.Body)
	}
	for _, h := range []string{"Idem-Answered-By", "Idem-Answer-Signature", "Idem-Forward-Signature", "Idem-Forwarded-By"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("the client got %s: %q", h, v)
		}
	}
	seen := p.reachedA()
	got := seen[len(seen)-1]
	want := map[string]string{"Repeatability-First-Sent": sent, "Prefer": "wait=1", "Content-Type": "application/json",
		"Authorization": "", "Idem-Forwarded-By": "n-b"}
	for h, v := range want {
		if got.Header.Get(h) != v {
			t.Errorf("the owner got %s %q, want %q", h, got.Header.Get(h), v)
		}
	}
	if !strings.HasPrefix(got.Header.Get("Idem-Forward-Signature"), "t=") {
		t.Errorf("the owner got no signature: %v", got.Header)
	}
}

// TestForward_ARedirectIsNeverFollowed: the owner's address answers 307
// to a trap. The trap never gets a request (the client's body and token
// stay home), and the client gets n-b's own answer, not the trap's.
func TestForward_ARedirectIsNeverFollowed(t *testing.T) {
	var trapped atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trapped.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"trap":true}`)
	}))
	t.Cleanup(trap.Close)
	var redirected atomic.Int64
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, trap.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	p := newForwardPair(t, func(string) string { return redirect.URL }, clusterSecret)
	answeredHere(t, p.cb.Do("POST", p.session(t), stageBody, "Authorization", "Bearer secret-token"), "trap")
	if redirected.Load() != 1 || trapped.Load() != 0 {
		t.Fatalf("the redirecting address got %d requests, the trap %d; want 1 and 0", redirected.Load(), trapped.Load())
	}
}

// TestForward_OnlyTheOwnersSignedAnswerIsRelayed: what answers at the
// owner's address without the owner's signature — JSON naming the owner
// even, or a teapot setting a cookie — is never relayed.
func TestForward_OnlyTheOwnersSignedAnswerIsRelayed(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"200 JSON naming the owner, unsigned", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idem-Answered-By", "n-a#1")
			w.Header().Set("Idem-Answer-Signature", "v1="+strings.Repeat("00", 32))
			fmt.Fprint(w, `{"internal":"secrets"}`)
		}},
		{"418 text/plain with a cookie", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Set-Cookie", "session=stolen")
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprint(w, "internal teapot")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				c.answer(w)
			}))
			t.Cleanup(other.Close)
			p := newForwardPair(t, func(string) string { return other.URL }, clusterSecret)
			answeredHere(t, p.cb.Do("POST", p.session(t), stageBody), "internal")
			if asked.Load() != 1 {
				t.Fatalf("the owner's address was asked %d times, want 1", asked.Load())
			}
		})
	}
}

// TestForward_AnotherSecretsAnswerIsNotRelayed: a node with another
// secret forwards, but the owner takes its request for a client's (and
// does not sign), so n-b relays nothing.
func TestForward_AnotherSecretsAnswerIsNotRelayed(t *testing.T) {
	p := newForwardPair(t, func(own string) string { return own }, []byte(strings.Repeat("x", api.ClusterSecretBytesMin)))
	answeredHere(t, p.cb.Do("POST", p.session(t), stageBody), "")
	if n := len(p.reachedA()); n != 3 { // the table, the session, the forwarded step
		t.Fatalf("n-a got %d requests, want 3", n)
	}
}

// TestForward_WithoutASecretForwardingIsOff: a secret shorter than
// ClusterSecretBytesMin turns forwarding off: n-a is not asked.
func TestForward_WithoutASecretForwardingIsOff(t *testing.T) {
	p := newForwardPair(t, func(own string) string { return own }, clusterSecret[:api.ClusterSecretBytesMin-1])
	answeredHere(t, p.cb.Do("POST", p.session(t), stageBody), "")
	if n := len(p.reachedA()); n != 2 {
		t.Fatalf("n-a got %d requests, want 2 (no forwarded step)", n)
	}
}

// sign is a forwarded request's signature as the wire format says
// (forwardauth.go): HMAC-SHA256 over method, URI, body digest, time, node.
func sign(secret []byte, method, uri, body string, unix int64, node string) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "idem-forward-v1\n%s\n%s\n%x\n%d\n%s", method, uri, sha256.Sum256([]byte(body)), unix, node)
	return "t=" + strconv.FormatInt(unix, 10) + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// TestForward_InternalHeadersAClientSendsAreDropped: a client that says
// it is a node — no signature, a wrong one, one signed with another
// secret, one older than the skew window — is served as a client: its
// step is still forwarded to the holder, and each is counted.
func TestForward_InternalHeadersAClientSendsAreDropped(t *testing.T) {
	p := newForwardPair(t, func(own string) string { return own }, clusterSecret)
	path := p.session(t)
	now := time.Now().Unix()
	cases := map[string][]string{
		"no signature":   {"Idem-Forwarded-By", "n-x"},
		"malformed":      {"Idem-Forwarded-By", "n-x", "Idem-Forward-Signature", "t=1,v1=zz"},
		"another secret": {"Idem-Forwarded-By", "n-x", "Idem-Forward-Signature", sign([]byte(strings.Repeat("y", 32)), "POST", path, stageBody, now, "n-x")},
		"another body":   {"Idem-Forwarded-By", "n-x", "Idem-Forward-Signature", sign(clusterSecret, "POST", path, "{}", now, "n-x")},
		"another node":   {"Idem-Forwarded-By", "n-y", "Idem-Forward-Signature", sign(clusterSecret, "POST", path, stageBody, now, "n-x")},
		"too old":        {"Idem-Forwarded-By", "n-x", "Idem-Forward-Signature", sign(clusterSecret, "POST", path, stageBody, now-120, "n-x")},
		"signature only": {"Idem-Forward-Signature", sign(clusterSecret, "POST", path, stageBody, now, "")},
	}
	for name, headers := range cases {
		r := p.cb.Do("POST", path, stageBody, headers...)
		if r.Status != 200 || r.Header.Get("Idem-Served-By") != "n-a" {
			t.Fatalf("%s: %d %v %s, want forwarded to n-a as a client's step", name, r.Status, r.Header, r.Body)
		}
	}
	if got := scrape(t, p.cb, `idem_forward_refused_total{what="request"}`); got != len(cases) {
		t.Fatalf("refused requests counted %d, want %d", got, len(cases))
	}
}

// TestForward_ASignedForwardedRequestIsNotForwardedAgain: a request that
// proves a node forwarded it is answered where it lands, never sent on
// (no loop), and its answer is signed by the node that gave it.
func TestForward_ASignedForwardedRequestIsNotForwardedAgain(t *testing.T) {
	p := newForwardPair(t, func(own string) string { return own }, clusterSecret)
	path := p.session(t)
	sig := sign(clusterSecret, "POST", path, stageBody, time.Now().Unix(), "n-x")
	r := p.cb.Do("POST", path, stageBody, "Idem-Forwarded-By", "n-x", "Idem-Forward-Signature", sig)
	answeredHere(t, r, "")
	if n := len(p.reachedA()); n != 2 {
		t.Fatalf("n-a got %d requests, want 2: the forwarded step went on", n)
	}
	if by := r.Header.Get("Idem-Answered-By"); by != "n-b#1" || !strings.HasPrefix(r.Header.Get("Idem-Answer-Signature"), "v1=") {
		t.Fatalf("the answer to a forwarded request: answered by %q, signature %q", by, r.Header.Get("Idem-Answer-Signature"))
	}
}

// scrape reads one sample of /metrics.
func scrape(t *testing.T, c *apitest.Client, series string) int {
	t.Helper()
	for _, line := range strings.Split(string(c.Do("GET", "/metrics", nil).Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}
