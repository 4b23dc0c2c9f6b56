package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/receipt"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

func init() {
	register(Suite{
		Name:     "cluster",
		Rank:     55,
		Optional: true,
		Doc:      "three API nodes on one embedded 3-member etcd (fsync on), over loopback HTTP: keyed and replay through 1 node and spread over 3, duplicates landing on two nodes at once, and keyed-hot spread over 3 (each request also $incs one shared document; aborts_per_op, replans_per_op; also at 8), beside etcd's raw Txn floor; scaling and forwarding's share; cluster-shards: keyed spread over 3 nodes on 2 store shards (a second 3-member etcd), over_1_shard against keyed-3n (opt-in; default concurrency 1,32,64)",
		Run:      runCluster,
	})
}

var clusterDefaultConcurrency = []int{1, 32, 64}

// clusterNodes is the nodes of the cluster cases.
const clusterNodes = 3

// clusterForwardWait is the Prefer: wait of the forwarded case's second
// request: long enough for the owner to finish.
const clusterForwardWait = "wait=10"

func runCluster(env *Env) error {
	dir, cleanup, err := env.DataDir("cluster")
	if err != nil {
		return err
	}
	defer cleanup()
	env.Progress("cluster: starting 3 embedded etcd members and %d nodes", clusterNodes)
	etcd, err := etcdtest.Launch(dir, etcdtest.Options{Fsync: true})
	if err != nil {
		env.ProgressDone()
		return err
	}
	defer etcd.Close()
	nodes, err := startClusterNodes(env, []benchShard{{etcd, "/bench/cluster/"}}, clusterNodes)
	env.ProgressDone()
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range nodes {
			n.close()
		}
	}()
	cli, err := etcd.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()

	results, err := clusterRuns(env, cli, nodes)
	if err != nil {
		env.reportAll(results)
		return err
	}
	rs, err := clusterShardCases(env, etcd, env.concurrencies(clusterDefaultConcurrency))
	results = append(results, rs...)
	if err != nil {
		env.reportAll(results)
		return err
	}
	clusterRatios(results)
	env.reportAll(results)
	return nil
}

// clusterRuns runs the cluster's cases at each concurrency: the raw Txn
// floor, keyed and replay through one node and through all, forwarded,
// then keyed on a hot document.
func clusterRuns(env *Env, cli *clientv3.Client, nodes []*clusterNode) ([]*Result, error) {
	var results []*Result
	var prefixes atomic.Int64
	for _, c := range env.concurrencies(clusterDefaultConcurrency) {
		floor, err := etcdFloor(env, cli, "txn", c, fmt.Sprintf("/bench/cluster-floor/%d/", prefixes.Add(1)))
		if err != nil {
			return results, err
		}
		results = append(results, &floor)
		for _, spread := range []int{1, clusterNodes} {
			rs, err := clusterCases(env, nodes[:spread], c)
			results = append(results, rs...)
			if err != nil {
				return results, err
			}
		}
		r, err := clusterForwarded(env, nodes, c)
		if err != nil {
			return results, err
		}
		results = append(results, &r)
	}
	for _, c := range hotConcurrencies(env, env.concurrencies(clusterDefaultConcurrency)) {
		r, err := clusterKeyedHot(env, nodes, c)
		if err != nil {
			return results, err
		}
		results = append(results, &r)
	}
	return results, nil
}

// clusterNode is one API node: its own etcd client, store and receipt
// service on each store shard, and a loopback HTTP server, forwarding to
// its peers.
type clusterNode struct {
	name   string
	base   string
	shards []*nodeShard
	svc    *receipt.Service // shard 0's
	srv    *http.Server
	client *http.Client
}

// benchShard is one store shard of the bench's nodes: a cluster and the
// deployment's prefix on it.
type benchShard struct {
	etcd   *etcdtest.Cluster
	prefix string
}

// nodeShard is what a node opens on one store shard.
type nodeShard struct {
	cli   *clientv3.Client
	store *etcdstore.Store
	svc   *receipt.Service
}

// startClusterNodes starts n nodes on shards (one: an unsharded
// deployment) and creates benchTable.
func startClusterNodes(env *Env, shards []benchShard, n int) ([]*clusterNode, error) {
	var nodes []*clusterNode
	// The secret every node forwards with (without one forwarding is off).
	secret := make([]byte, api.ClusterSecretBytesMin)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	for i := range n {
		node := &clusterNode{name: fmt.Sprintf("node-%d", i+1)}
		nodes = append(nodes, node)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nodes, err
		}
		node.base = "http://" + ln.Addr().String()
		if err := node.open(env, shards); err != nil {
			ln.Close()
			return nodes, err
		}
		svcs := make([]*receipt.Service, len(node.shards))
		for k, sh := range node.shards {
			svcs[k] = sh.svc
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute, DisableCompression: true}
		node.client = &http.Client{Transport: tr, Timeout: time.Minute}
		h := api.NewSharded(svcs, api.Options{Logger: discardLogger,
			Forward: &api.Forwarding{Node: node.name, Client: &http.Client{Transport: tr.Clone()}, Secret: secret}})
		node.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go node.srv.Serve(ln)
	}
	k := api.ShardOf(api.Anonymous, benchTable, len(shards))
	_, _, err := nodes[0].shards[k].svc.Tables().Create(env.Ctx, api.Anonymous, benchTable, benchShards)
	return nodes, err
}

// open opens the node's client, store and service on each shard; session
// IDs name their shard when there are several.
func (n *clusterNode) open(env *Env, shards []benchShard) error {
	for k, b := range shards {
		sh := &nodeShard{}
		n.shards = append(n.shards, sh)
		var err error
		if sh.cli, err = b.etcd.NewClient(); err != nil {
			return err
		}
		if sh.store, err = etcdstore.New(sh.cli, etcdstore.Options{Prefix: b.prefix}); err != nil {
			return err
		}
		tag := 0
		if len(shards) > 1 {
			tag = k + 1
		}
		sh.svc, err = receipt.Open(env.Ctx, sh.store, receipt.Options{Node: n.name, Advertise: n.base, Logger: discardLogger,
			ReplanContended: true, SessionShard: tag})
		if err != nil {
			return err
		}
	}
	n.svc = n.shards[0].svc
	return nil
}

func (n *clusterNode) close() {
	if n.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.srv.Shutdown(ctx)
		cancel()
	}
	for _, sh := range n.shards {
		if sh.svc != nil {
			sh.svc.Close()
		}
		if sh.store != nil {
			sh.store.Close()
		}
		if sh.cli != nil {
			sh.cli.Close()
		}
	}
}

// clusterSend POSTs a keyed batch to node and returns its status, its
// headers and the first 2 KiB of its body (the rest read and dropped, so
// that the connection is reused).
func clusterSend(ctx context.Context, node *clusterNode, body []byte, key string, headers ...string) (int, http.Header, []byte, error) {
	return clusterSendTo(ctx, node, benchTable, body, key, headers...)
}

// clusterSendTo is clusterSend to the batch route of table.
func clusterSendTo(ctx context.Context, node *clusterNode, table string, body []byte, key string, headers ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, node.base+"/v1/tables/"+table+"/batch", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := node.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	var buf [2048]byte
	m, _ := io.ReadFull(resp.Body, buf[:])
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, buf[:m], nil
}

// clusterPost sends a keyed batch to node and returns whether another
// node served it (Idem-Served-By), checking for a 201.
func clusterPost(ctx context.Context, node *clusterNode, body []byte, key string, headers ...string) (bool, error) {
	status, h, answer, err := clusterSend(ctx, node, body, key, headers...)
	if err != nil {
		return false, err
	}
	if status != http.StatusCreated {
		return false, fmt.Errorf("POST %s (key %q): %d %s", node.base, key, status, answer)
	}
	return h.Get("Idem-Served-By") != "", nil
}

// clusterCases measures keyed (new keys) and replay (of the keys just
// written) with the clients spread round-robin over nodes.
func clusterCases(env *Env, nodes []*clusterNode, c int) ([]*Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	spread := len(nodes)
	var forwarded atomic.Int64
	bufs := make([][]byte, c)
	var mu sync.Mutex
	var written []uint64 // (w<<32 | i) of the committed keys, for replay
	name := fmt.Sprintf("keyed-%dn", spread)
	m, err := env.Loop(Loop{Case: name, Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
		bufs[w] = wl.appendBody(bufs[w][:0], w, i)
		fw, err := clusterPost(ctx, nodes[(w+int(i))%spread], bufs[w], wl.key(w, i))
		if fw {
			forwarded.Add(1)
		}
		if err == nil {
			mu.Lock()
			if len(written) < env.Opts.ReplayKeys {
				written = append(written, uint64(w)<<32|i)
			}
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	keyed := m.Result(name, c)
	keyed.Set("nodes", spread)
	keyed.Set("forwarded_share", round(float64(forwarded.Load())/float64(max(m.Calls, 1)), 3))
	out := []*Result{&keyed}
	if len(written) == 0 {
		return out, nil
	}
	name = fmt.Sprintf("replay-%dn", spread)
	m, err = env.Loop(Loop{Case: name, Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
		k := written[replayIndex(w, i, len(written))]
		kw, ki := int(k>>32), k&(1<<32-1)
		_, err := clusterPost(ctx, nodes[(w+int(i))%spread], wl.appendBody(nil, kw, ki), wl.key(kw, ki))
		return err
	})
	if err != nil {
		return out, err
	}
	replay := m.Result(name, c)
	replay.Set("nodes", spread)
	return append(out, &replay), nil
}

// clusterForwarded measures duplicates that land on two nodes at once:
// each call sends a new key to one node and, at the same moment, the same
// request with Prefer: wait to another. One creates the receipt; the other
// finds it held (and forwards to the holder) or already terminal (and
// replays it). Latency is the second request's; forwarded_share is how
// many calls had one of their two requests forwarded.
func clusterForwarded(env *Env, nodes []*clusterNode, c int) (Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	var forwarded atomic.Int64
	m, err := env.Loop(Loop{Case: "dup-2n", Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
		body, key := wl.appendBody(nil, w, i), wl.key(w, i)
		owner, other := nodes[(w+int(i))%len(nodes)], nodes[(w+int(i)+1)%len(nodes)]
		first := make(chan error, 1)
		go func() {
			fw, err := clusterPost(ctx, owner, body, key, "Prefer", clusterForwardWait)
			if fw {
				forwarded.Add(1)
			}
			first <- err
		}()
		fw, err := clusterPost(ctx, other, body, key, "Prefer", clusterForwardWait)
		if fw {
			forwarded.Add(1)
		}
		if ferr := <-first; err == nil {
			err = ferr
		}
		return err
	})
	if err != nil {
		return Result{}, err
	}
	r := m.Result("dup-2n", c)
	r.Set("forwarded_share", round(float64(forwarded.Load())/float64(max(m.Calls, 1)), 3))
	return r, nil
}

// clusterRatios: scaling from 1 node to 3 at each concurrency, and each
// case against the raw Txn floor of the same run.
func clusterRatios(results []*Result) {
	idx := indexResults(results)
	for _, r := range results {
		if f := idx.get("txn", r.Concurrency); f != nil && f.OpsPerSec > 0 && r.Case != "txn" {
			r.Set("over_txn_floor", round(r.OpsPerSec/f.OpsPerSec, 3))
		}
		for _, pair := range [][2]string{{"keyed-3n", "keyed-1n"}, {"replay-3n", "replay-1n"}} {
			if r.Case != pair[0] {
				continue
			}
			if one := idx.get(pair[1], r.Concurrency); one != nil && one.OpsPerSec > 0 {
				r.Set("scaling_1_to_3", round(r.OpsPerSec/one.OpsPerSec, 2))
			}
		}
		if r.Case == caseClusterShards {
			if one := idx.get("keyed-3n", r.Concurrency); one != nil && one.OpsPerSec > 0 {
				r.Set("over_1_shard", round(r.OpsPerSec/one.OpsPerSec, 2))
			}
		}
		if r.Case == "dup-2n" {
			if k := idx.get("keyed-3n", r.Concurrency); k != nil && k.P50us > 0 {
				r.Set("p50_over_keyed", round(r.P50us/k.P50us, 2))
			}
		}
	}
}
