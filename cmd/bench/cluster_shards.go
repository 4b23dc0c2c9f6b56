package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/etcdtest"
)

// The cluster-shards case: keyed-3n's workload on a deployment of two
// store shards (docs/cluster.md "Shards") — the suite's etcd and a second
// 3-member one, fsync on — with its keys spread over one table per shard,
// reported beside the 1-shard keyed-3n of the same run (over_1_shard). On
// one machine both clusters share its cores and disk: the ratio says what
// sharding costs or gains here, not what separate machines would give.

const (
	caseClusterShards = "cluster-shards"
	// clusterShardsK is the shards of the cluster-shards case.
	clusterShardsK = 2
	// clusterShardsPrefix is the deployment's prefix in both shards: its own,
	// apart from the 1-shard cases' on the suite's etcd.
	clusterShardsPrefix = "/bench/cluster-shards/"
)

// clusterShardCases starts the second etcd and clusterNodes nodes on both
// shards, and measures the case at each concurrency.
func clusterShardCases(env *Env, etcd0 *etcdtest.Cluster, concurrencies []int) ([]*Result, error) {
	dir, cleanup, err := env.DataDir("cluster-shards")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	env.Progress("cluster-shards: starting a second embedded 3-member etcd and %d nodes on %d shards", clusterNodes, clusterShardsK)
	etcd1, err := etcdtest.Launch(dir, etcdtest.Options{Fsync: true})
	if err != nil {
		env.ProgressDone()
		return nil, err
	}
	defer etcd1.Close()
	nodes, err := startClusterNodes(env, []benchShard{{etcd0, clusterShardsPrefix}, {etcd1, clusterShardsPrefix}}, clusterNodes)
	defer func() {
		for _, n := range nodes {
			n.close()
		}
	}()
	env.ProgressDone()
	if err != nil {
		return nil, err
	}
	tables := tablePerShard(clusterShardsK)
	for k, t := range tables {
		if _, _, err := nodes[0].shards[k].svc.Tables().Create(env.Ctx, api.Anonymous, t, benchShards); err != nil {
			return nil, err
		}
	}
	var out []*Result
	for _, c := range concurrencies {
		r, err := clusterShardsKeyed(env, nodes, tables, c)
		if err != nil {
			return out, err
		}
		out = append(out, &r)
	}
	return out, nil
}

// tablePerShard is a table name routed to each of k shards: the first
// bench-<i> names that cover them.
func tablePerShard(k int) []string {
	tables := make([]string, k)
	for i, found := 0, 0; found < k; i++ {
		name := fmt.Sprintf("%s-%d", benchTable, i)
		if s := api.ShardOf(api.Anonymous, name, k); tables[s] == "" {
			tables[s], found = name, found+1
		}
	}
	return tables
}

// clusterShardsKeyed is keyed-3n over the shards' tables: new keys, the
// clients spread round-robin over the nodes and the calls over the tables.
func clusterShardsKeyed(env *Env, nodes []*clusterNode, tables []string, c int) (Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	var forwarded atomic.Int64
	bufs := make([][]byte, c)
	m, err := env.Loop(Loop{Case: caseClusterShards, Concurrency: c}, func(ctx context.Context, w int, i uint64) error {
		bufs[w] = wl.appendBody(bufs[w][:0], w, i)
		node, table := nodes[(w+int(i))%len(nodes)], tables[int(i)%len(tables)]
		status, h, answer, err := clusterSendTo(ctx, node, table, bufs[w], wl.key(w, i))
		if err != nil {
			return err
		}
		if status != 201 {
			return fmt.Errorf("POST %s %s (key %q): %d %s", node.base, table, wl.key(w, i), status, answer)
		}
		if h.Get("Idem-Served-By") != "" {
			forwarded.Add(1)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(caseClusterShards, c)
	r.Set("nodes", len(nodes))
	r.Set("shards", len(tables))
	r.Set("forwarded_share", round(float64(forwarded.Load())/float64(max(m.Calls, 1)), 3))
	return r, nil
}
