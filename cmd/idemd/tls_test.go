package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/devcert"
)

// testPKI is a CA of the test's own, written into a temporary directory:
// a node certificate it signed (server and client auth), a client one,
// and a client certificate of another CA.
type testPKI struct {
	ca                *devcert.CA
	caFile            string
	nodeCert, nodeKey string
	serverOnlyCert    string // serverAuth alone
	serverOnlyKey     string
	client, stranger  tls.Certificate
	dir               string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	p := testPKI{dir: t.TempDir()}
	var err error
	if p.ca, err = devcert.NewCA("idemd test CA"); err != nil {
		t.Fatal(err)
	}
	p.caFile = filepath.Join(p.dir, "ca.crt")
	other, err := devcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *devcert.CA, name string, usages []x509.ExtKeyUsage) (devcert.Leaf, string, string) {
		l, err := ca.Issue(name, usages)
		if err != nil {
			t.Fatal(err)
		}
		c, k, err := l.Write(p.dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return l, c, k
	}
	_, p.nodeCert, p.nodeKey = issue(p.ca, "node", devcert.Node)
	_, p.serverOnlyCert, p.serverOnlyKey = issue(p.ca, "server-only", devcert.Server)
	cl, _, _ := issue(p.ca, "client", devcert.Client)
	st, _, _ := issue(other, "stranger", devcert.Client)
	if p.client, err = cl.TLS(); err != nil {
		t.Fatal(err)
	}
	if p.stranger, err = st.TLS(); err != nil {
		t.Fatal(err)
	}
	if err := p.ca.WriteCA(p.caFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// httpsClient is a recording client for base whose TLS is cfg.
func httpsClient(t *testing.T, base string, cfg *tls.Config) *apitest.Client {
	c := apitest.NewClient(t, base)
	c.Tr.Base.(*http.Transport).TLSClientConfig = cfg
	return c
}

// TestTLS_ServesHTTPSVerifiedAgainstItsCA: with -tls-cert/-tls-key idemd
// answers /healthz and a keyed batch (and its replay) over HTTPS to a
// client that trusts only the test's CA; plain HTTP to the same port gets
// no answer, nor does a client that does not trust the CA or offers only
// TLS 1.1.
func TestTLS_ServesHTTPSVerifiedAgainstItsCA(t *testing.T) {
	pki := newTestPKI(t)
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-tls-cert", pki.nodeCert, "-tls-key", pki.nodeKey)
	if rec := p.wait("idemd: listening"); rec["tls"] != true {
		t.Fatalf("listening line %v, want tls true", rec)
	}
	c := httpsClient(t, "https://"+p.addr, &tls.Config{RootCAs: pki.ca.Pool()})
	c.Do("GET", "/healthz", nil).JSON(t, 200, nil)
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	first := c.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"a","doc":{}}]}`, "Idempotency-Key", "k")
	again := c.Do("POST", "/v1/tables/t/batch", `{"inserts":[{"id":"a","doc":{}}]}`, "Idempotency-Key", "k")
	if first.Status != 201 || again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("keyed batch over HTTPS: %d %s, its retry %d %v %s", first.Status, first.Body, again.Status, again.Header, again.Body)
	}

	if r, err := apitest.NewClient(t, "http://"+p.addr).Try("GET", "/healthz", nil); err == nil {
		t.Fatalf("plain HTTP to the TLS port: answered %d %s", r.Status, r.Body)
	}
	for _, bad := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"a client trusting only the system's roots", &tls.Config{}, "certificate"},
		{"a TLS 1.1 client", &tls.Config{RootCAs: pki.ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, "protocol version"},
	} {
		r, err := httpsClient(t, "https://"+p.addr, bad.cfg).Try("GET", "/healthz", nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v %v, want a handshake error about %q", bad.name, r, err, bad.want)
		}
	}
}

// TestTLS_MutualRefusesAClientWithoutACertificateTheCASigned: with
// -tls-client-ca, a client without a certificate, or with one another CA
// signed, is refused in the handshake; one with a certificate the CA
// signed is served.
func TestTLS_MutualRefusesAClientWithoutACertificateTheCASigned(t *testing.T) {
	pki := newTestPKI(t)
	p := startRun(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-tls-cert", pki.nodeCert, "-tls-key", pki.nodeKey,
		"-tls-client-ca", pki.caFile)
	base := "https://" + p.addr
	for _, bad := range []struct {
		name  string
		certs []tls.Certificate
	}{{"no certificate", nil}, {"another CA's certificate", []tls.Certificate{pki.stranger}}} {
		r, err := httpsClient(t, base, &tls.Config{RootCAs: pki.ca.Pool(), Certificates: bad.certs}).Try("GET", "/healthz", nil)
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("a client with %s: %v %v, want refused in the handshake", bad.name, r, err)
		}
	}
	c := httpsClient(t, base, &tls.Config{RootCAs: pki.ca.Pool(), Certificates: []tls.Certificate{pki.client}})
	c.Do("GET", "/healthz", nil).JSON(t, 200, nil)
	c.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	c.Do("POST", "/v1/tables/t/batch", `{"deletes":["a"]}`, "Idempotency-Key", "k").JSON(t, 201, nil)
}

// TestRun_BadTLSFilesStopTheStart: a TLS file that cannot be read or used
// ends the start with an error naming its flag (exit 1, like a bad
// -tokens), before the data directory is created.
func TestRun_BadTLSFilesStopTheStart(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	pki := newTestPKI(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	notPEM := filepath.Join(dir, "not-pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	etcd := []string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:1", "-advertise", "https://127.0.0.1:8420"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls-cert", missing, "-tls-key", pki.nodeKey}, "-tls-cert " + missing + ", -tls-key " + pki.nodeKey + ": open " + missing + ": no such file"},
		{[]string{"-tls-cert", pki.nodeCert, "-tls-key", pki.serverOnlyKey}, "private key does not match public key"},
		{[]string{"-tls-cert", pki.nodeCert, "-tls-key", pki.nodeKey, "-tls-client-ca", notPEM}, "-tls-client-ca " + notPEM + ": no PEM certificate in it"},
		{[]string{"-tls-cert", pki.nodeCert, "-tls-key", pki.nodeKey, "-tls-client-ca", missing}, "-tls-client-ca " + missing + ": no such file"},
		{append([]string{"-peer-ca", missing}, etcd...), "-peer-ca " + missing + ": no such file"},
		{append([]string{"-tls-cert", pki.serverOnlyCert, "-tls-key", pki.serverOnlyKey, "-tls-client-ca", pki.caFile}, etcd...),
			"it does not allow client authentication"},
	} {
		err := run(context.Background(), append(c.args, "-data", data), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err) != 1 {
			t.Errorf("%v: %v (exit %d), want %q (exit 1)", c.args, err, exitCode(err), c.want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a data directory was created: %v", err)
	}
}

// TestLoadTLS_PeersAreVerifiedAgainstPeerCAAndGetTheNodesCertificateUnderMutualTLS:
// the forwarding client trusts -peer-ca (the system's roots without it),
// speaks TLS 1.2 or later, and presents the node's own certificate only
// when the nodes require one (-tls-client-ca).
func TestLoadTLS_PeersAreVerifiedAgainstPeerCAAndGetTheNodesCertificateUnderMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	etcd := []string{"-store", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-advertise", "https://127.0.0.1:8420"}
	tlsArgs := []string{"-tls-cert", pki.nodeCert, "-tls-key", pki.nodeKey}
	load := func(args ...string) tlsConfigs {
		t.Helper()
		c, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		tc, err := loadTLS(c)
		if err != nil {
			t.Fatal(err)
		}
		return tc
	}
	if tc := load(); tc.server != nil || tc.peer != nil {
		t.Fatalf("no TLS flags, local store: %+v", tc)
	}
	tc := load(etcd...)
	if tc.server != nil || tc.peer == nil || tc.peer.RootCAs != nil || len(tc.peer.Certificates) != 0 || tc.peer.MinVersion != tls.VersionTLS12 {
		t.Fatalf("etcd without TLS flags: server %v, peer %v; want the system's roots, no certificate, TLS 1.2+", tc.server != nil, tc.peer != nil)
	}
	tc = load(append(append(etcd, tlsArgs...), "-peer-ca", pki.caFile)...)
	if tc.server == nil || tc.server.ClientAuth != tls.NoClientCert || tc.server.MinVersion != tls.VersionTLS12 ||
		tc.peer.RootCAs == nil || !tc.peer.RootCAs.Equal(pki.ca.Pool()) || len(tc.peer.Certificates) != 0 {
		t.Fatalf("TLS without client CA: server %v, peer roots %v, %d certificates", tc.server != nil, tc.peer.RootCAs != nil, len(tc.peer.Certificates))
	}
	tc = load(append(append(etcd, tlsArgs...), "-tls-client-ca", pki.caFile)...)
	if tc.server.ClientAuth != tls.RequireAndVerifyClientCert || !tc.server.ClientCAs.Equal(pki.ca.Pool()) ||
		len(tc.peer.Certificates) != 1 || !tc.peer.Certificates[0].Leaf.Equal(tc.server.Certificates[0].Leaf) {
		t.Fatalf("mutual TLS: server client auth %v, peer presents %d certificates; want required, and the node's own certificate", tc.server.ClientAuth, len(tc.peer.Certificates))
	}
	fw := forwarding(config{store: storeEtcd, node: "n"}, bytes.Repeat([]byte("s"), api.ClusterSecretBytesMin), tc.peer, slog.New(slog.DiscardHandler))
	if got := fw.Client.Transport.(*http.Transport).TLSClientConfig; got != tc.peer {
		t.Fatalf("the forwarding client's TLS %p, want the peer config %p", got, tc.peer)
	}
}
