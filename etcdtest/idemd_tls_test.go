package etcdtest_test

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/devcert"
	"github.com/idemdb/idem/internal/testsupport"
)

// startTLSNode launches idemd -store etcd as node serving HTTPS with
// mutual TLS (tlsArgs), advertising its https URL, and waits until
// /healthz answers through cl (which must trust the CA and present a
// client certificate). It returns the node's base URL.
func startTLSNode(t *testing.T, cl *apitest.Client, c *etcdtest.Cluster, prefix, node string, env, tlsArgs []string, args ...string) string {
	t.Helper()
	addr := apitest.FreeAddr(t)
	base := "https://" + addr
	argv := append([]string{"-addr", addr, "-store", "etcd", "-etcd-endpoints", strings.Join(c.Endpoints(), ","),
		"-etcd-prefix", prefix, "-node", node, "-advertise", base, "-maintain-interval", "100ms",
		"-cluster-secret-file", clusterSecretFile(t), "-etcd-dial-timeout", apitest.EtcdDialBudget.String()}, tlsArgs...)
	p, err := apitest.TryLaunch(t, t.TempDir(), env, append(argv, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, node+" answering /healthz over https", testsupport.Patience, func() bool {
		r, err := cl.WithBase(base).Try("GET", "/healthz", nil)
		return err == nil && r.Status == 200
	})
	if !strings.Contains(p.Logs(), `"tls":"mutual`) {
		t.Fatalf("%s's settings do not say mutual TLS:\n%s", node, p.Logs())
	}
	return base
}

// TestIdemd_ForwardingBetweenNodesOverMutualTLS: two nodes serving HTTPS
// with client certificates required (-tls-client-ca), advertising https
// URLs, each verifying the other against -peer-ca. node-a's decision of k
// is held up (a failpoint sleeps 10 s in it, as in
// TestIdemd_ARequestForAReceiptALiveNodeHoldsIsForwardedToIt) while
// node-b gets the same request: node-b forwards it to node-a over TLS,
// presenting its own certificate, and relays node-a's answers — 409 in
// progress without a wait, node-a's own bytes with Prefer: wait — each
// with Idem-Served-By: node-a. Nothing but TLS reaches node-a: a forward
// in plain HTTP or without a certificate would fail, and node-b would
// answer itself.
func TestIdemd_ForwardingBetweenNodesOverMutualTLS(t *testing.T) {
	testsupport.RequireFailpoints(t)
	// Most of it is the failpoint's 10 s sleep: it waits beside others.
	t.Parallel()
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	dir := t.TempDir()
	ca, err := devcert.NewCA("idemd nodes CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCA(caFile); err != nil {
		t.Fatal(err)
	}
	nodeLeaf, err := ca.Issue("node", devcert.Node)
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, nodeKey, err := nodeLeaf.Write(dir, "node")
	if err != nil {
		t.Fatal(err)
	}
	clientLeaf, err := ca.Issue("client", devcert.Client)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := clientLeaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	cl := apitest.NewClient(t, "https://unused")
	cl.Tr.Base.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}
	tlsArgs := []string{"-tls-cert", nodeCert, "-tls-key", nodeKey, "-tls-client-ca", caFile, "-peer-ca", caFile}
	a := startTLSNode(t, cl, c, prefix, "node-a", []string{`GO_FAILPOINTS=receipt/decide-before=1*sleep(10000)`}, tlsArgs,
		"-separate-decide", "-lease-ttl", "10s")
	b := startTLSNode(t, cl, c, prefix, "node-b", nil, tlsArgs, "-lease-ttl", "10s")
	ca2, cb := cl.WithBase(a), cl.WithBase(b)
	ca2.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	direct := make(chan *apitest.Response, 1)
	go func() {
		r, err := ca2.Try("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k")
		if err != nil {
			t.Error(err)
		}
		direct <- r
	}()
	testsupport.Poll(t, "node-a's receipt started (its decision held up)", testsupport.Patience, func() bool {
		var rec struct {
			State string `json:"state"`
		}
		r, err := cb.Try("GET", "/v1/receipts/t/k", nil)
		if err != nil || r.Status != 200 {
			return false
		}
		r.JSON(t, 200, &rec)
		return rec.State == "started"
	})
	busy := cb.Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k")
	if p := busy.Problem(t, 409); p.Code != "idempotency_request_in_progress" || busy.Header.Get("Idem-Served-By") != "node-a" {
		t.Fatalf("without a wait: %+v served by %q, want node-a's in progress, forwarded over TLS", p, busy.Header.Get("Idem-Served-By"))
	}
	waited := cb.Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k", "Prefer", "wait=20")
	mine := <-direct
	if mine == nil || mine.Status != 201 {
		t.Fatalf("node-a's own client: %+v", mine)
	}
	if waited.Status != 201 || waited.Header.Get("Idem-Served-By") != "node-a" || !bytes.Equal(waited.Body, mine.Body) ||
		waited.Header.Get("Idem-Transaction-Id") != mine.Header.Get("Idem-Transaction-Id") {
		t.Fatalf("with a wait, through node-b: %d %v %s; node-a answered %s", waited.Status, waited.Header, waited.Body, mine.Body)
	}
}
