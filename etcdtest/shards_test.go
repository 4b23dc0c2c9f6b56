package etcdtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/internal/apitest"
)

// A deployment of two store shards (docs/cluster.md "Shards"): two etcd
// clusters, each a complete Idem instance under its prefix, and nodes that
// route each request by hash(principal, table).

// shardSpec is one shard of a map a test writes.
type shardSpec struct {
	name      string
	endpoints []string
	prefix    string
}

// writeShardMap writes the -etcd-shards file of version and shards.
func writeShardMap(t *testing.T, version int, shards ...shardSpec) string {
	t.Helper()
	type entry struct {
		Name      string   `json:"name"`
		Endpoints []string `json:"endpoints"`
		Prefix    string   `json:"prefix"`
	}
	m := struct {
		Version int     `json:"version"`
		Shards  []entry `json:"shards"`
	}{Version: version}
	for _, s := range shards {
		m.Shards = append(m.Shards, entry{s.name, s.endpoints, s.prefix})
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "shards.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// shardedNodeArgs are idemd's flags for node on the map at path.
func shardedNodeArgs(t *testing.T, path, node string) []string {
	addr := apitest.FreeAddr(t)
	return []string{"-addr", addr, "-store", "etcd", "-etcd-shards", path, "-node", node, "-advertise", "http://" + addr,
		"-lease-ttl", "1s", "-maintain-interval", "100ms", "-cluster-secret-file", clusterSecretFile(t),
		"-etcd-dial-timeout", apitest.EtcdDialBudget.String()}
}

// rawKeys are every key under prefix on the cluster, the prefix cut off.
func rawKeys(t *testing.T, c *etcdtest.Cluster, prefix string) []string {
	t.Helper()
	cli := c.Client(t)
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return keys
}

func hasKey(keys []string, pred func(string) bool) bool {
	for _, k := range keys {
		if pred(k) {
			return true
		}
	}
	return false
}

// TestShards_TwoClustersEachHoldOnlyTheirTables: two nodes on a map of
// two etcd clusters. Each table's receipts and documents are in its
// shard's etcd and nowhere else (read raw, under each prefix); a keyed
// batch committed through one node replays byte for byte through the
// other; a session that reaches for a table of the other shard is refused
// 409 session_cross_shard; and a node whose map differs is refused at
// start with the reason. /metrics labels each shard's space series.
func TestShards_TwoClustersEachHoldOnlyTheirTables(t *testing.T) {
	one, two := sharedCluster(t), startCluster(t, etcdtest.Options{Members: 1})
	shards := []shardSpec{{"a", one.Endpoints(), etcdtest.Prefix(t)}, {"b", two.Endpoints(), etcdtest.Prefix(t)}}
	clusters := []*etcdtest.Cluster{one, two}
	path := writeShardMap(t, 1, shards...)
	cl := apitest.NewClient(t, "http://unused")
	na := apitest.Start(t, cl, t.TempDir(), nil, shardedNodeArgs(t, path, "node-a")...)
	nb := apitest.Start(t, cl, t.TempDir(), nil, shardedNodeArgs(t, path, "node-b")...)
	ca, cb := cl.WithBase(na.Base()), cl.WithBase(nb.Base())

	txn := map[string]string{} // table → its keyed batch's transaction
	byShard := [2][]string{}
	for i := 0; i < 8; i++ {
		tbl := fmt.Sprintf("t%d", i)
		k := api.ShardOf("anonymous", tbl, 2)
		byShard[k] = append(byShard[k], tbl)
		ca.Do("PUT", "/v1/tables/"+tbl, nil).JSON(t, 201, nil)
		key := "k-" + tbl
		first := ca.Do("POST", "/v1/tables/"+tbl+"/batch", incBody(key), "Idempotency-Key", key)
		again := cb.Do("POST", "/v1/tables/"+tbl+"/batch", incBody(key), "Idempotency-Key", key)
		if first.Status != 201 || again.Status != 201 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: keyed %d %s; its replay through node-b %d %s", tbl, first.Status, first.Body, again.Status, again.Body)
		}
		txn[tbl] = first.Header.Get("Idem-Transaction-Id")
	}
	if len(byShard[0]) == 0 || len(byShard[1]) == 0 {
		t.Fatalf("tables by shard %v: the test needs both", byShard)
	}
	for s, c := range clusters {
		keys := rawKeys(t, c, shards[s].prefix)
		for tbl, id := range txn {
			here := api.ShardOf("anonymous", tbl, 2) == s
			receipt := hasKey(keys, func(k string) bool { return k == "rcpt/v1/"+id })
			doc := hasKey(keys, func(k string) bool { return strings.HasPrefix(k, "tbl/v1/") && strings.HasSuffix(k, "/mark-k-"+tbl) })
			if receipt != here || doc != here {
				t.Errorf("shard %s: table %s (shard %d): its receipt here %v, its document here %v", shards[s].name, tbl, api.ShardOf("anonymous", tbl, 2), receipt, doc)
			}
		}
		if !hasKey(keys, func(k string) bool { return k == "meta/v1/shards" }) {
			t.Errorf("shard %s records no shard map", shards[s].name)
		}
	}

	if m := cb.Do("GET", "/metrics", nil); m.Status != 200 || !bytes.Contains(m.Body, []byte(`idem_etcd_backend_bytes{shard="a"}`)) ||
		!bytes.Contains(m.Body, []byte(`idem_etcd_backend_bytes{shard="b"}`)) {
		t.Errorf("/metrics: %d, want each shard's space series labelled by its name", m.Status)
	}

	var sess struct {
		ID string `json:"session_id"`
	}
	cb.Do("POST", "/v1/sessions", `{"table":"`+byShard[0][0]+`"}`).JSON(t, 201, &sess)
	p := ca.Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"`+byShard[1][0]+`","inserts":[{"id":"x","doc":{}}]}`).Problem(t, 409)
	if p.Code != "session_cross_shard" {
		t.Fatalf("a session step on the other shard's table: %+v", p)
	}
	if r := ca.Do("POST", "/v1/sessions/"+sess.ID+"/batch", `{"table":"`+byShard[0][0]+`","inserts":[{"id":"x","doc":{}}]}`); r.Status != 200 {
		t.Fatalf("the session's step on its own shard through the other node: %d %s", r.Status, r.Body)
	}

	for name, args := range map[string][]string{
		"another version": shardedNodeArgs(t, writeShardMap(t, 2, shards...), "node-c"),
		"swapped shards":  shardedNodeArgs(t, writeShardMap(t, 1, shards[1], shards[0]), "node-c"),
		"no map": {"-store", "etcd", "-etcd-endpoints", strings.Join(one.Endpoints(), ","), "-etcd-prefix", shards[0].prefix,
			"-node", "node-c", "-advertise", "http://127.0.0.1:1", "-etcd-dial-timeout", apitest.EtcdDialBudget.String()},
	} {
		_, err := apitest.TryLaunch(t, t.TempDir(), nil, args...)
		var early *apitest.EarlyExit
		if !errors.As(err, &early) || !strings.Contains(early.Error(), "-etcd-shards") {
			t.Errorf("a node with %s: %v, want it refused at start, naming the shard map", name, err)
		}
	}
}
