package etcdtest_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
	"github.com/idemdb/idem/internal/testsupport"
)

// idemd on etcd, as processes: nodes of one deployment share the cluster
// under one prefix, and one cluster secret, so that they forward to one
// another.

// clusterSecret is the -cluster-secret-file every node startNodeOn starts
// reads.
const clusterSecret = "etcdtest-cluster-secret-0123456789abcdef\n"

// clusterSecretFile writes clusterSecret in a file of t's.
func clusterSecretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(p, []byte(clusterSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startNode launches idemd -store etcd as node on c under prefix, at a
// port it advertises, and waits until it is healthy.
func startNode(t *testing.T, cl *apitest.Client, c *etcdtest.Cluster, prefix, node string, env []string, args ...string) *apitest.Proc {
	t.Helper()
	return startNodeOn(t, cl, strings.Join(c.Endpoints(), ","), prefix, node, env, args...)
}

// startNodeOn is startNode on the etcd endpoints given.
func startNodeOn(t *testing.T, cl *apitest.Client, endpoints, prefix, node string, env []string, args ...string) *apitest.Proc {
	t.Helper()
	addr := apitest.FreeAddr(t)
	argv := append([]string{"-addr", addr, "-store", "etcd", "-etcd-endpoints", endpoints,
		"-etcd-prefix", prefix, "-node", node, "-advertise", "http://" + addr, "-lease-ttl", "1s", "-maintain-interval", "100ms",
		"-cluster-secret-file", clusterSecretFile(t), "-etcd-dial-timeout", apitest.EtcdDialBudget.String()}, args...)
	return apitest.Start(t, cl, t.TempDir(), env, argv...)
}

// incBody marks key's batch and counts it in a counter of its own (a
// started batch's intents must not hold up the others).
func incBody(key string) string {
	return `{"inserts":[{"id":"mark-` + key + `","doc":{}}],"transforms":[{"id":"ctr-` + key + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`
}

// TestIdemd_NodesOnEtcdReplayAnywhereAndAdoptAKilledNodesWork: a keyed
// batch committed through node-a replays byte for byte through node-b,
// which reads its documents; node-a then dies (SIGKILL) after Begin,
// before its decision, and node-b — once node-a's lease lapses — adopts
// the receipt and finishes it with nobody retrying: the retry through
// node-b replays a commit that applied once.
func TestIdemd_NodesOnEtcdReplayAnywhereAndAdoptAKilledNodesWork(t *testing.T) {
	testsupport.RequireFailpoints(t)
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cl := apitest.NewClient(t, "http://unused")
	a := startNode(t, cl, c, prefix, "node-a", []string{`GO_FAILPOINTS=receipt/decide-before=1*return(true)`}, "-separate-decide")
	b := startNode(t, cl, c, prefix, "node-b", nil)
	ca, cb := cl.WithBase(a.Base()), cl.WithBase(b.Base())
	post := func(c *apitest.Client, key string) *apitest.Response {
		return c.Do("POST", "/v1/tables/t/batch", incBody(key), "Idempotency-Key", key)
	}
	ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	// node-a's first decision fails (the failpoint fires once): k-adopt
	// is left started, owned by node-a.
	if r := post(ca, "k-adopt"); r.Status < 500 {
		t.Fatalf("the batch whose decision fails: %d %s", r.Status, r.Body)
	}
	first := post(ca, "k-1")
	if first.Status != 201 {
		t.Fatalf("keyed batch on node-a: %d %s", first.Status, first.Body)
	}
	again := post(cb, "k-1")
	if again.Status != 201 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Header.Get("Idem-Transaction-Id") != first.Header.Get("Idem-Transaction-Id") {
		t.Fatalf("its replay on node-b: %d %v %s, want node-a's %s", again.Status, again.Header, again.Body, first.Body)
	}
	var doc struct {
		Doc struct{ N int }
	}
	cb.Do("GET", "/v1/tables/t/docs/ctr-k-1", nil).JSON(t, 200, &doc)
	if doc.Doc.N != 1 {
		t.Fatalf("node-b reads ctr-k-1.n = %d, want 1", doc.Doc.N)
	}

	a.Kill()
	var rec struct {
		State    string `json:"state"`
		Owner    string `json:"owner"`
		Envelope struct {
			Outcome string `json:"outcome"`
		} `json:"envelope"`
	}
	testsupport.Poll(t, "node-b adopting and finishing node-a's started receipt", testsupport.Patience, func() bool {
		cb.Do("GET", "/v1/receipts/t/k-adopt", nil).JSON(t, 200, &rec)
		return rec.State == "terminal"
	})
	if rec.Envelope.Outcome != "committed" {
		t.Fatalf("the adopted receipt is %+v, want committed (Begin made every prepare durable)", rec)
	}
	if r := post(cb, "k-adopt"); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry through node-b: %d %v %s, want the replayed commit", r.Status, r.Header, r.Body)
	}
	cb.Do("GET", "/v1/tables/t/docs/ctr-k-adopt", nil).JSON(t, 200, &doc)
	if doc.Doc.N != 1 {
		t.Fatalf("ctr-k-adopt.n = %d after adoption and a retry, want 1: applied once", doc.Doc.N)
	}
}

// TestIdemd_ANodeThatCannotReachEtcdSaysSoOnHealthz: with every link to
// the cluster blackholed, /healthz answers 503 unavailable within the
// probe's bound; healed, 200 again.
func TestIdemd_ANodeThatCannotReachEtcdSaysSoOnHealthz(t *testing.T) {
	c := startCluster(t, etcdtest.Options{Proxied: true})
	cl := apitest.NewClient(t, "http://unused")
	n := startNode(t, cl, c, etcdtest.Prefix(t), "node-a", nil)
	cn := cl.WithBase(n.Base())
	for i := range 3 {
		c.Link(i).Blackhole()
	}
	start := time.Now()
	p := cn.Do("GET", "/healthz", nil).Problem(t, 503)
	if p.Code != "unavailable" || !strings.Contains(p.Detail, "etcd") {
		t.Fatalf("healthz cut off from etcd: %+v", p)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("healthz took %v to say so", d)
	}
	for i := range 3 {
		c.Link(i).Heal()
	}
	testsupport.Poll(t, "healthz 200 once etcd is reachable again", testsupport.Patience, func() bool {
		r, err := cn.Try("GET", "/healthz", nil)
		return err == nil && r.Status == 200
	})
}

// TestIdemd_ARequestForAReceiptALiveNodeHoldsIsForwardedToIt: node-a's
// decision of k is held up (a failpoint sleeps 10 s in it: long enough for
// a loaded machine to ask node-b everything while it lasts; 4 s once was
// not) while node-b gets the same request. node-b forwards it to node-a — the node the
// receipt's claim names, at the address its record advertises — and
// relays node-a's answer: 409 in progress without a wait; with Prefer:
// wait, node-a's terminal answer, the same bytes node-a gave its own
// client. An unsigned Idem-Forwarded-By from a client is dropped.
func TestIdemd_ARequestForAReceiptALiveNodeHoldsIsForwardedToIt(t *testing.T) {
	testsupport.RequireFailpoints(t)
	// Most of it is the failpoint's 10 s sleep: it waits beside others.
	t.Parallel()
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	// With tokens: the forwarded request carries the client's own, and
	// the owner authenticates the same principal (alice's receipt is not
	// bob's: a request under bob's token binds another transaction).
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:tok-alice-0123456789\nbob:tok-bob-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := apitest.NewClient(t, "http://unused").WithToken("tok-alice-0123456789")
	a := startNode(t, cl, c, prefix, "node-a", []string{`GO_FAILPOINTS=receipt/decide-before=1*sleep(10000)`}, "-separate-decide", "-lease-ttl", "10s", "-tokens", tokens)
	b := startNode(t, cl, c, prefix, "node-b", nil, "-lease-ttl", "10s", "-tokens", tokens)
	ca, cb := cl.WithBase(a.Base()), cl.WithBase(b.Base())
	ca.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)

	direct := make(chan *apitest.Response, 1)
	go func() {
		r, err := ca.Try("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k")
		if err != nil {
			t.Error(err)
		}
		direct <- r
	}()
	var rec struct {
		State string `json:"state"`
		Owner string `json:"owner"`
	}
	testsupport.Poll(t, "node-a's receipt started (its decision held up)", testsupport.Patience, func() bool {
		r, err := cb.Try("GET", "/v1/receipts/t/k", nil)
		if err != nil || r.Status != 200 {
			return false
		}
		r.JSON(t, 200, &rec)
		return rec.State == "started"
	})

	busy := cb.Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k")
	if p := busy.Problem(t, 409); p.Code != "idempotency_request_in_progress" || busy.Header.Get("Idem-Served-By") != "node-a" {
		t.Fatalf("without a wait: %+v served by %q, want node-a's in progress", p, busy.Header.Get("Idem-Served-By"))
	}
	if r := cl.WithBase(b.Base()).WithToken("tok-bob-0123456789").Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k"); r.Header.Get("Idem-Served-By") != "" ||
		r.Header.Get("Idem-Transaction-Id") == busy.Header.Get("Idem-Transaction-Id") {
		t.Fatalf("bob's request with alice's key: %d served by %q, txn %s: another principal's receipt is not his", r.Status, r.Header.Get("Idem-Served-By"), r.Header.Get("Idem-Transaction-Id"))
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

	// A client that says it is a node, unsigned, is a client: its header
	// is dropped, and the terminal receipt replays where it lands.
	again := cb.Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k", "Idem-Forwarded-By", "node-x")
	if again.Status != 201 || again.Header.Get("Idem-Served-By") != "" || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a request claiming to be forwarded reaching node-b: %d served by %q", again.Status, again.Header.Get("Idem-Served-By"))
	}
	var doc struct {
		Doc struct{ N int }
	}
	cb.Do("GET", "/v1/tables/t/docs/ctr-k", nil).JSON(t, 200, &doc)
	if doc.Doc.N != 1 {
		t.Fatalf("ctr-k.n = %d after four requests for k, want 1", doc.Doc.N)
	}
}

// TestIdemd_TLSAndAuthToEtcd: against a cluster that serves clients over
// TLS, requires a client certificate and has authentication on, a node
// with -etcd-ca/-etcd-cert/-etcd-key and -etcd-user/-etcd-password-file
// serves; one with a wrong password, or without the CA, refuses to start
// and says why.
func TestIdemd_TLSAndAuthToEtcd(t *testing.T) {
	c := startCluster(t, etcdtest.Options{TLS: true})
	cli := c.Client(t)
	if _, err := cli.UserAdd(ctx, "root", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := c.TLS()
	endpoints := strings.Join(c.Endpoints(), ",")
	tlsArgs := []string{"-etcd-ca", files.CA, "-etcd-cert", files.ClientCert, "-etcd-key", files.ClientKey}
	cl := apitest.NewClient(t, "http://unused")

	n := startNodeOn(t, cl, endpoints, "/idem/tls/", "node-a", nil, append(tlsArgs, "-etcd-user", "root", "-etcd-password-file", good)...)
	cn := cl.WithBase(n.Base())
	cn.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	if r := cn.Do("POST", "/v1/tables/t/batch", incBody("k"), "Idempotency-Key", "k"); r.Status != 201 {
		t.Fatalf("keyed batch over TLS with auth: %d %s", r.Status, r.Body)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
		// dial bounds the start: the wrong password is refused as soon as
		// etcd answers (some 60 ms here), so its bound only has to outlast
		// a loaded machine's TLS handshake (1 s once did not: the deadline,
		// not the refusal, ended the attempt); without a CA the TLS
		// endpoints never answer, and the bound is what ends the start.
		dial string
	}{
		{"wrong password", append(tlsArgs, "-etcd-user", "root", "-etcd-password-file", bad), "authentication failed", "30s"},
		{"no CA", []string{"-etcd-user", "root", "-etcd-password-file", good}, "https endpoints need -etcd-ca", "1s"},
	} {
		addr := apitest.FreeAddr(t)
		_, err := apitest.TryLaunch(t, t.TempDir(), nil, append([]string{"-addr", addr, "-store", "etcd", "-etcd-endpoints", endpoints,
			"-etcd-prefix", "/idem/tls/", "-node", "node-b", "-advertise", "http://" + addr, "-etcd-dial-timeout", c.dial}, c.args...)...)
		var early *apitest.EarlyExit
		if !errors.As(err, &early) || !strings.Contains(early.Proc.Logs(), c.want) {
			t.Fatalf("%s: %v, want an exit before listening that says %q", c.name, err, c.want)
		}
	}
}

// TestIdemd_TwoProcessesWithOneNodeIDCorruptNothing: a second idemd
// started with a node ID that a live process already uses registers a
// later incarnation and so fences the first; both keep serving the same
// keys at once, and every key still applies once, with one answer.
func TestIdemd_TwoProcessesWithOneNodeIDCorruptNothing(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	cl := apitest.NewClient(t, "http://unused")
	first := startNode(t, cl, c, prefix, "node-a", nil)
	second := startNode(t, cl, c, prefix, "node-a", nil)
	c1, c2 := cl.WithBase(first.Base()), cl.WithBase(second.Base())
	c1.Do("PUT", "/v1/tables/t", nil).JSON(t, 201, nil)
	const keys, rounds = 12, 3
	answers := make([][]string, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range keys {
		for _, cn := range []*apitest.Client{c1, c2} {
			wg.Go(func() {
				for range rounds {
					r, err := cn.Try("POST", "/v1/tables/t/batch", incBody(fmt.Sprint(k)), "Idempotency-Key", fmt.Sprint(k), "Prefer", "wait=10")
					if err != nil {
						t.Error(err)
						return
					}
					if r.Status == 201 {
						mu.Lock()
						answers[k] = append(answers[k], string(r.Body))
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		// Either process may have answered pending while the other held
		// the receipt: ask until terminal.
		testsupport.Poll(t, fmt.Sprintf("key %d terminal", k), testsupport.Patience, func() bool {
			r, err := c2.Try("POST", "/v1/tables/t/batch", incBody(fmt.Sprint(k)), "Idempotency-Key", fmt.Sprint(k), "Prefer", "wait=5")
			if err != nil || r.Status != 201 {
				return false
			}
			answers[k] = append(answers[k], string(r.Body))
			return true
		})
		for _, a := range answers[k][1:] {
			if a != answers[k][0] {
				t.Fatalf("key %d: answers %q and %q", k, answers[k][0], a)
			}
		}
		var doc struct {
			Doc struct{ N int }
		}
		c1.Do("GET", fmt.Sprintf("/v1/tables/t/docs/ctr-%d", k), nil).JSON(t, 200, &doc)
		if doc.Doc.N != 1 {
			t.Fatalf("key %d applied %d times", k, doc.Doc.N)
		}
	}
	var h1, h2 struct{ Owner string }
	c1.Do("GET", "/healthz", nil).JSON(t, 200, &h1)
	c2.Do("GET", "/healthz", nil).JSON(t, 200, &h2)
	if h1.Owner != "node-a#1" || h2.Owner != "node-a#2" {
		t.Fatalf("owners %q and %q, want node-a#1 and the later node-a#2", h1.Owner, h2.Owner)
	}
}
