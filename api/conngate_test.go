package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// gateTimeout bounds every wait of these tests on an answer.
const gateTimeout = 10 * time.Second

// gatedServer serves an API over memstore through a ConnGate, as idemd
// does.
func gatedServer(t *testing.T, limits api.ConnLimits, opts api.Options) *httptest.Server {
	t.Helper()
	svc, err := receipt.Open(context.Background(), memstore.New(), receipt.Options{MaintainInterval: -1, CleanInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	opts.Logger = quiet
	srv := api.New(svc, opts)
	gate := srv.NewConnGate(limits)
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = srv.Listener(gate.Listener(ts.Listener))
	ts.Config.ConnState = gate.ConnState
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// rawGet sends GET path on c and reads one answer.
func rawGet(t *testing.T, c net.Conn, path string) *http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(gateTimeout))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

func dial(t *testing.T, ts *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", ts.Listener.Addr().String(), gateTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnGate_PastTheCapAConnectionIsAnsweredAtOnce: with Max
// connections open (idle, silent), the next is answered 503 overloaded
// with Retry-After and closed, not left waiting; once one closes, a new
// connection is served again.
func TestConnGate_PastTheCapAConnectionIsAnsweredAtOnce(t *testing.T) {
	ts := gatedServer(t, api.ConnLimits{Max: 2, IdleMax: 2}, api.Options{})
	held := []net.Conn{dial(t, ts), dial(t, ts)}
	for _, c := range held { // both admitted and served
		if r := rawGet(t, c, "/healthz"); r.StatusCode != 200 {
			t.Fatalf("a connection within the cap got %d", r.StatusCode)
		}
	}
	r := rawGet(t, dial(t, ts), "/healthz")
	body, _ := io.ReadAll(r.Body)
	var p struct{ Code string }
	if err := json.Unmarshal(body, &p); err != nil || r.StatusCode != 503 || p.Code != "overloaded" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("past the cap: %d %s Retry-After %q, want 503 overloaded with Retry-After", r.StatusCode, body, r.Header.Get("Retry-After"))
	}
	held[0].Close()
	deadline := time.Now().Add(gateTimeout)
	for { // the server sees the close after a read: poll
		r := rawGet(t, dial(t, ts), "/healthz")
		if r.StatusCode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection's place never came back: %d", r.StatusCode)
		}
	}
}

// TestConnGate_IdleConnectionsBeyondIdleMaxAreClosed: of three keep-alive
// connections gone idle with IdleMax 1, two are closed by the server.
func TestConnGate_IdleConnectionsBeyondIdleMaxAreClosed(t *testing.T) {
	ts := gatedServer(t, api.ConnLimits{Max: 8, IdleMax: 1}, api.Options{})
	conns := []net.Conn{dial(t, ts), dial(t, ts), dial(t, ts)}
	for _, c := range conns {
		rawGet(t, c, "/healthz")
	}
	eofs := make(chan error, len(conns))
	for _, c := range conns {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(gateTimeout))
			_, err := c.Read(make([]byte, 1))
			eofs <- err
		}()
	}
	for range 2 {
		if err := <-eofs; !errors.Is(err, io.EOF) {
			t.Fatalf("an idle connection beyond IdleMax read %v, want EOF (closed by the server)", err)
		}
	}
	for _, c := range conns {
		c.Close() // ends the kept connection's read
	}
	if err := <-eofs; errors.Is(err, io.EOF) {
		t.Fatal("all three idle connections were closed, want one kept (IdleMax 1)")
	}
}

// TestReadBody_ASlowBodyIsAnswered408: a body that stops arriving is cut
// after BodyTimeout and answered 408 request_timeout, and the connection
// is closed, long before RequestTimeout.
func TestReadBody_ASlowBodyIsAnswered408(t *testing.T) {
	ts := gatedServer(t, api.ConnLimits{Max: 8, IdleMax: 8}, api.Options{BodyTimeout: 200 * time.Millisecond, RequestTimeout: time.Minute})
	c := dial(t, ts)
	_ = c.SetDeadline(time.Now().Add(gateTimeout))
	// Half of a declared body, then silence.
	fmt.Fprintf(c, "PUT /v1/tables/t HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"shards\":")
	began := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(body), `"request_timeout"`) || !resp.Close {
		t.Fatalf("a slow body: %d %s (close %v), want 408 request_timeout and Connection: close", resp.StatusCode, body, resp.Close)
	}
	if waited := time.Since(began); waited > gateTimeout {
		t.Fatalf("answered after %v", waited)
	}
}

// TestHealthz_NamesNoPathOfTheServer: /healthz answers without
// authentication, so its 503 says what kind of failure, never the
// error's text with the store's files.
func TestHealthz_NamesNoPathOfTheServer(t *testing.T) {
	const secret = "/srv/secret-data-dir/wal/00000000000000000042"
	for _, cause := range []error{
		fmt.Errorf("%w: open %s: input/output error", store.ErrFailStopped, secret),
		fmt.Errorf("etcd %s unreachable", secret),
		fmt.Errorf("etcd does not answer (%w: dial %s): this node serves nothing until it does", store.ErrUnavailable, secret),
	} {
		ts := gatedServer(t, api.ConnLimits{Max: 8, IdleMax: 8}, api.Options{Health: func() error { return cause }})
		r := rawGet(t, dial(t, ts), "/healthz")
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != 503 || strings.Contains(string(body), "secret") || !strings.Contains(string(body), `"unavailable"`) {
			t.Fatalf("healthz for %q: %d %s, want 503 unavailable naming no path", cause, r.StatusCode, body)
		}
	}
}
