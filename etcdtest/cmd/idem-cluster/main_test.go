package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// TestRun_TheClusterMakeClusterStartsServesAndStops: what `make cluster`
// runs starts etcd and two nodes, a keyed batch through one replays
// through the other, and cancelling stops every node process.
func TestRun_TheClusterMakeClusterStartsServesAndStops(t *testing.T) {
	idemd := apitest.BuildIdemd(t)
	base := twoFreePorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	dir := filepath.Join(t.TempDir(), "cluster")
	go func() {
		done <- run(ctx, []string{"-idemd", idemd, "-dir", dir, "-nodes", "2", "-base-port", strconv.Itoa(base), "-restart-after", "100ms"}, &out, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	c := apitest.NewClient(t, "http://127.0.0.1:"+strconv.Itoa(base))
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	body := `{"inserts":[{"id":"a","doc":{}}]}`
	first := c.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
	second := c.WithBase("http://127.0.0.1:"+strconv.Itoa(base+1)).Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
	if first.Status != 201 || second.Status != 201 || !bytes.Equal(first.Body, second.Body) || second.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("node-1 %d %s, node-2 %d %s", first.Status, first.Body, second.Status, second.Body)
	}
	// The nodes share the secret run made, so they forward: a session
	// node-1 holds is staged through node-2.
	var sess struct {
		ID string `json:"session_id"`
	}
	c.Do("POST", "/v1/sessions", nil).JSON(t, 201, &sess)
	staged := c.WithBase("http://127.0.0.1:"+strconv.Itoa(base+1)).Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"t","inserts":[{"id":"s","doc":{}}]}`)
	if staged.Status != 200 || staged.Header.Get("Idem-Served-By") != "node-1" {
		t.Fatalf("a step through node-2 on node-1's session: %d %v %s, want forwarded", staged.Status, staged.Header, staged.Body)
	}
	c.Do("DELETE", "/v1/sessions/"+sess.ID, nil).JSON(t, 200, nil)
	// A node SIGKILLed while the cluster runs is started again, and
	// replays what it answered before.
	pidFile := filepath.Join(dir, "node-1.pid")
	old, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(old)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	testsupport.Poll(t, "node-1 restarted and replaying", testsupport.Patience, func() bool {
		now, _ := os.ReadFile(pidFile)
		if string(now) == string(old) {
			return false
		}
		r, err := c.Try("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
		return err == nil && r.Status == 201 && bytes.Equal(r.Body, first.Body) && r.Header.Get("Idempotent-Replayed") == "true"
	})
	c.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if _, pid, ok := strings.Cut(line, "(pid "); ok {
			pid, _, _ = strings.Cut(pid, ",")
			n, _ := strconv.Atoi(pid)
			if syscall.Kill(n, 0) == nil {
				t.Fatalf("node process %s still runs after the cluster stopped", pid)
			}
		}
	}
}

// TestRun_TheClusterWithMutualTLS: with -mtls the nodes serve HTTPS and
// require a client certificate: a client with the generated CA and client
// certificate, the ones the printed curl line names, is served, and a
// keyed batch through one node replays through the other; a client
// without the certificate is refused, and plain HTTP gets no answer.
func TestRun_TheClusterWithMutualTLS(t *testing.T) {
	idemd := apitest.BuildIdemd(t)
	base := twoFreePorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	dir := filepath.Join(t.TempDir(), "cluster")
	go func() {
		done <- run(ctx, []string{"-idemd", idemd, "-dir", dir, "-nodes", "2", "-base-port", strconv.Itoa(base), "-mtls"}, &out, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	files := filepath.Join(dir, "tls")
	want := "curl --cacert " + filepath.Join(files, "ca.crt") + " --cert " + filepath.Join(files, "client.crt") + " --key " + filepath.Join(files, "client.key") +
		" https://127.0.0.1:" + strconv.Itoa(base) + "/healthz"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("the output does not say %q:\n%s", want, out.String())
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(files, "ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(files, "client.crt"), filepath.Join(files, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	https := func(certs []tls.Certificate, port int) *apitest.Client {
		c := apitest.NewClient(t, "https://127.0.0.1:"+strconv.Itoa(port))
		c.Tr.Base.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: certs}
		return c
	}
	c1, c2 := https([]tls.Certificate{cert}, base), https([]tls.Certificate{cert}, base+1)
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	body := `{"inserts":[{"id":"a","doc":{}}]}`
	first := c1.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
	second := c2.Do("POST", "/v1/tables/t/batch", body, "Idempotency-Key", "k")
	if first.Status != 201 || second.Status != 201 || !bytes.Equal(first.Body, second.Body) || second.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("node-1 %d %s, node-2 %d %s", first.Status, first.Body, second.Status, second.Body)
	}
	if r, err := https(nil, base).Try("GET", "/healthz", nil); err == nil {
		t.Fatalf("a client without a certificate: %d", r.Status)
	}
	if r, err := apitest.NewClient(t, "http://127.0.0.1:"+strconv.Itoa(base)).Try("GET", "/healthz", nil); err == nil {
		t.Fatalf("plain HTTP: %d", r.Status)
	}
	c1.CloseIdleConnections()
	c2.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	apitest.RemoveBuilds()
	os.Exit(code)
}

// twoFreePorts returns a loopback port p with p+1 free as well, a moment
// ago (the cluster's nodes listen on base-port+i).
func twoFreePorts(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := lowPortMin + rand.IntN(lowPortMax-lowPortMin-1)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		l.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no two consecutive free ports")
	return 0
}

// The nodes' ports are drawn below Linux's ephemeral range (32768-60999
// by default): a port the kernel hands out for "127.0.0.1:0" is also the
// local port of any outgoing connection, and on a loaded machine one of
// them (a node's own connection to etcd, another test's client) took
// node-2's port between this pick and its bind, three restarts running.
const (
	lowPortMin = 20000
	lowPortMax = 32000
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRun_TwoShards: with -shards 2 (make cluster SHARDS=2) two etcd
// clusters start, the nodes run on the map written in the directory, and
// a keyed batch on each of several tables — spread over both shards —
// replays through the other node.
func TestRun_TwoShards(t *testing.T) {
	idemd := apitest.BuildIdemd(t)
	base := twoFreePorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	dir := filepath.Join(t.TempDir(), "cluster")
	go func() {
		done <- run(ctx, []string{"-idemd", idemd, "-dir", dir, "-nodes", "2", "-shards", "2", "-base-port", strconv.Itoa(base)}, &out, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var m struct {
		Version int `json:"version"`
		Shards  []struct {
			Endpoints []string `json:"endpoints"`
		} `json:"shards"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "shards.json"))
	if err != nil || json.Unmarshal(raw, &m) != nil || m.Version != 1 || len(m.Shards) != 2 {
		t.Fatalf("shards.json: %v %s", err, raw)
	}
	c1 := apitest.NewClient(t, "http://127.0.0.1:"+strconv.Itoa(base))
	c2 := c1.WithBase("http://127.0.0.1:" + strconv.Itoa(base+1))
	var h struct {
		Shards []struct{ Owner string } `json:"shards"`
	}
	c1.Do("GET", "/healthz", nil).JSON(t, 200, &h)
	if len(h.Shards) != 2 {
		t.Fatalf("/healthz names %d shards, want 2", len(h.Shards))
	}
	for i := range 6 {
		tbl := "t" + strconv.Itoa(i)
		c1.Do("PUT", "/v1/tables/"+tbl, nil).JSON(t, 201, nil)
		body := `{"inserts":[{"id":"a","doc":{}}]}`
		first := c1.Do("POST", "/v1/tables/"+tbl+"/batch", body, "Idempotency-Key", "k")
		second := c2.Do("POST", "/v1/tables/"+tbl+"/batch", body, "Idempotency-Key", "k")
		if first.Status != 201 || second.Status != 201 || !bytes.Equal(first.Body, second.Body) || second.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: node-1 %d %s, node-2 %d %s", tbl, first.Status, first.Body, second.Status, second.Body)
		}
	}
	c1.CloseIdleConnections()
	c2.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}
