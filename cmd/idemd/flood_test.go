package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/apitest"
)

// The connection flood of issue 35: an attacker opening more connections
// than the process has file descriptors once fail-stopped the engine at
// its next log segment roll. Here idemd runs under a small open-files
// limit, set on the child by a shell's ulimit, and is flooded past it
// while keyed batches roll segments.
const (
	floodFilesLimit = 256
	// floodConns is past the limit, to be sure the cap and not the limit
	// is what holds.
	floodConns   = 3 * floodFilesLimit
	floodTimeout = 30 * time.Second
	floodWriters = 4
	// floodBatchesDuring: acknowledged batches while the flood is held, so
	// that the log rolls segments (-wal-segment-bytes below) under it.
	floodBatchesDuring = 120
)

// underFilesLimit is an executable that runs bin under ulimit -n limit.
func underFilesLimit(t *testing.T, bin string, limit int) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "idemd-limited")
	body := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %q \"$@\"\n", limit, bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// TestFlood_PastTheOpenFilesLimitNothingFailStops: a flood of silent
// connections past the open-files limit is answered at the cap, not left
// hanging; the engine rolls segments under it without a fail-stop; once
// the flood ends /healthz answers 200 on a new connection; every
// acknowledged batch replays.
func TestFlood_PastTheOpenFilesLimitNothingFailStops(t *testing.T) {
	bin := underFilesLimit(t, apitest.BuildIdemd(t), floodFilesLimit)
	c := apitest.NewClient(t, "http://unused")
	p := apitest.StartBinary(t, c, bin, t.TempDir(), nil, "-wal-segment-bytes", "16384", "-checkpoint-bytes", "65536")
	cl := c.WithBase(p.Base())
	cl.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	acked := keyedWriters(t, cl, floodWriters)
	acked.waitFor(t, 20) // the writers hold their connections before the flood
	held := flood(t, p.Addr(), floodConns)
	before := acked.count()
	refusedFast := newConnectionRefusedAtOnce(t, p.Addr())
	acked.waitFor(t, before+floodBatchesDuring)
	for _, c := range held {
		c.Close()
	}
	waitHealthyOnNewConnection(t, p.Addr())
	keys := acked.stop()
	if strings.Contains(p.Logs(), "fail-stop") {
		t.Fatalf("the engine fail-stopped under the flood:\n%s", p.Logs())
	}
	if !refusedFast {
		t.Fatal("at the cap a new connection was not answered 503 overloaded at once")
	}
	replayAll(t, cl, keys)
}

// flood opens n slow connections to addr; the ones past the cap are
// answered and closed by the server, the rest held open.
func flood(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		conn, err := net.DialTimeout("tcp", addr, floodTimeout)
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		// Half a request head, as a slow client sends: the connection
		// is the server's to hold (SYN cookies may keep a silent one in
		// the kernel), and it never completes.
		_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
		conns = append(conns, conn)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// newConnectionRefusedAtOnce reports whether a new connection made while
// the flood holds the cap is answered 503 overloaded within a second.
func newConnectionRefusedAtOnce(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, floodTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Logf("a new connection at the cap: %v", err)
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 503 && strings.Contains(string(body), `"overloaded"`) && resp.Header.Get("Retry-After") != ""
}

func waitHealthyOnNewConnection(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(floodTimeout)
	for {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
		r, err := hc.Get("http://" + addr + "/healthz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 on a new connection within %v of the flood's end: %v", floodTimeout, err)
		}
	}
}

// ackedKeys collects the keys whose batches were acknowledged, with
// their answers.
type ackedKeys struct {
	mu      sync.Mutex
	answers map[string]string
	n       atomic.Int64
	stopped atomic.Bool
	wg      sync.WaitGroup
	changed chan struct{}
}

// keyedWriters starts writers that send keyed batches until stopped,
// retrying a refused one with its key, as a client would.
func keyedWriters(t *testing.T, cl *apitest.Client, writers int) *ackedKeys {
	a := &ackedKeys{answers: map[string]string{}, changed: make(chan struct{}, 1)}
	for w := range writers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for i := w; !a.stopped.Load(); i += writers {
				a.send(t, cl, i)
			}
		}()
	}
	t.Cleanup(func() { a.stop() })
	return a
}

func (a *ackedKeys) send(t *testing.T, cl *apitest.Client, i int) {
	key := fmt.Sprintf("k%05d", i)
	for deadline := time.Now().Add(floodTimeout); time.Now().Before(deadline) && !a.stopped.Load(); {
		r, err := cl.Try("POST", "/v1/tables/t/batch", batchBody(i), "Idempotency-Key", key)
		if err != nil || r.Status != 201 {
			continue // refused at the cap, or the connection closed: the same key again
		}
		a.mu.Lock()
		a.answers[key] = string(r.Body)
		a.mu.Unlock()
		a.n.Add(1)
		select {
		case a.changed <- struct{}{}:
		default:
		}
		return
	}
}

func (a *ackedKeys) count() int { return int(a.n.Load()) }

// waitFor waits until n batches are acknowledged.
func (a *ackedKeys) waitFor(t *testing.T, n int) {
	t.Helper()
	timer := time.NewTimer(floodTimeout)
	defer timer.Stop()
	for a.count() < n {
		select {
		case <-a.changed:
		case <-timer.C:
			t.Fatalf("%d batches acknowledged within %v, want %d", a.count(), floodTimeout, n)
		}
	}
}

// stop ends the writers and returns the acknowledged answers.
func (a *ackedKeys) stop() map[string]string {
	a.stopped.Store(true)
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answers
}

// replayAll checks that every acknowledged key replays its answer byte for
// byte.
func replayAll(t *testing.T, cl *apitest.Client, answers map[string]string) {
	t.Helper()
	for key, body := range answers {
		var i int
		fmt.Sscanf(key, "k%d", &i)
		r := cl.Do("POST", "/v1/tables/t/batch", batchBody(i), "Idempotency-Key", key)
		if r.Status != 201 || string(r.Body) != body {
			t.Fatalf("key %s replayed %d %s, want its acknowledged answer %s", key, r.Status, r.Body, body)
		}
	}
}
