package api_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/internal/apitest"
)

// newRelayPair is a forwardPair whose n-a is advertised behind a proxy
// that hands n-a's answers back with their body replaced by body(), if
// body is set: the owner's status and signed fields stay, so n-b takes
// the answer for the owner's (the signature covers no body).
func newRelayPair(t *testing.T, body func() []byte) *forwardPair {
	t.Helper()
	var target atomic.Pointer[url.URL]
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp := httputil.NewSingleHostReverseProxy(target.Load())
		rp.ModifyResponse = func(resp *http.Response) error {
			if body != nil {
				b := body()
				resp.Body = io.NopCloser(bytes.NewReader(b))
				resp.ContentLength = int64(len(b))
				resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
			}
			return nil
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	return newForwardPair(t, func(own string) string {
		u, err := url.Parse(own)
		if err != nil {
			t.Fatal(err)
		}
		target.Store(u)
		return proxy.URL
	}, clusterSecret)
}

// jsonOfSize is a JSON string n bytes long (n >= 2).
func jsonOfSize(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }

// TestForward_AnAnswerIsRelayedWholeUpToItsBound: the owner's answer is
// relayed whole, with the fields idemd sets on it, up to
// forwardAnswerBytesMax bytes; one byte more and nothing of it is relayed
// (a cut answer would be a wrong one): n-b answers itself.
func TestForward_AnAnswerIsRelayedWholeUpToItsBound(t *testing.T) {
	// The proxy's bodies are made up: no exchange of this test is one the
	// spec describes.
	atBound := newRelayPair(t, func() []byte { return jsonOfSize(api.ForwardAnswerBytesMax) })
	atBound.cb.Tr.Rec = apitest.Unrecorded(t)
	r := atBound.cb.Do("POST", atBound.session(t), stageBody)
	if r.Status != 200 || r.Header.Get("Idem-Served-By") != "n-a" || len(r.Body) != api.ForwardAnswerBytesMax ||
		r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("an answer of %d bytes, the bound: %d, %d bytes, Idem-Served-By %q, Content-Type %q; want 200, it whole, n-a, application/json",
			api.ForwardAnswerBytesMax, r.Status, len(r.Body), r.Header.Get("Idem-Served-By"), r.Header.Get("Content-Type"))
	}
	beyond := newRelayPair(t, func() []byte { return jsonOfSize(api.ForwardAnswerBytesMax + 1) })
	beyond.cb.Tr.Rec = apitest.Unrecorded(t)
	answeredHere(t, beyond.cb.Do("POST", beyond.session(t), stageBody), "xxxx")
}

// TestForward_TheOwnersRefusalIsRelayed: a step only the owner can refuse
// (400: $inc on a string the session staged) is the owner's answer too,
// relayed with its status and problem type: only redirects (3xx) are
// never relayed.
func TestForward_TheOwnersRefusalIsRelayed(t *testing.T) {
	p := newRelayPair(t, nil)
	path := p.session(t)
	if r := p.ca.Do("POST", path, `{"table":"t","inserts":[{"id":"d","doc":{"n":"s"}}]}`); r.Status != 200 {
		t.Fatalf("staging at the owner: %d %s", r.Status, r.Body)
	}
	r := p.cb.Do("POST", path, `{"table":"t","transforms":[{"id":"d","ops":[{"op":"$inc","path":"n","value":1}]}]}`)
	if r.Status != 400 || r.Header.Get("Idem-Served-By") != "n-a" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a step the owner refuses: %d %v %s; want the owner's 400 problem relayed", r.Status, r.Header, r.Body)
	}
}

// TestForward_ACommitIsRelayedWithItsTransaction: a commit sent to n-b of
// a session n-a holds is forwarded, and n-a's answer, of the transaction
// the commit binds, is relayed: the transaction check refuses only
// another's.
func TestForward_ACommitIsRelayedWithItsTransaction(t *testing.T) {
	p := newRelayPair(t, nil)
	path := p.session(t)
	if r := p.ca.Do("POST", path, stageBody); r.Status != 200 {
		t.Fatalf("staging at the owner: %d %s", r.Status, r.Body)
	}
	commit := strings.TrimSuffix(path, "/batch") + "/commit"
	r := p.cb.Do("POST", commit, "", "Idempotency-Key", "commit-1")
	if r.Status != 201 || r.Header.Get("Idem-Served-By") != "n-a" || r.Header.Get("Idem-Transaction-Id") == "" {
		t.Fatalf("a commit through n-b: %d %v %s; want n-a's answer relayed, with its transaction", r.Status, r.Header, r.Body)
	}
}
