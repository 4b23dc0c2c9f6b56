package etcdtest_test

import (
	"strings"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/harness"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// etcdHarnessSeeds are the seeds TestHarness_EtcdStore runs whole: three
// nodes sharing etcd, receipts kept briefly, intents left to maintenance,
// a crash, a debt-clean and a zombie cleaner (seed 3). The self-test runs
// more seeds, cut short (selftest_test.go).
var etcdHarnessSeeds = []int64{3}

// harnessOnEtcd runs the harness's scenario of seed over the etcd store,
// under a fresh prefix of the shared cluster: its nodes are simulated
// processes of one cluster, each with its own owner ID, on one etcd.
func harnessOnEtcd(t *testing.T, c *etcdtest.Cluster, seed int64, steps int) harness.Result {
	t.Helper()
	cfg := harness.ConfigFor(seed)
	if steps > 0 {
		cfg.Steps = steps
	}
	cfg.Chained = false // the etcd store does not chain writes
	cfg.Store = newStoreWith(t, c.Client(t), etcdstore.Options{Prefix: etcdtest.Prefix(t)})
	return harness.Run(t, cfg)
}

// TestHarness_EtcdStore: the harness's workload, fault schedule, zombie
// choreographies, auditor and linearizability check pass over the etcd
// store for a few fixed seeds.
func TestHarness_EtcdStore(t *testing.T) {
	if raceEnabled {
		// Under -race the whole run took 25 s or more of make test's 10
		// minutes (measured with the etcd members embedded, instrumented
		// too); the selftest-etcd suite runs it without -race, beside the
		// self-test rows that plant bugs under the same harness
		// (.ci/suites).
		t.Skip("runs without -race in make test's selftest-etcd suite")
	}
	c := sharedCluster(t)
	for _, seed := range etcdHarnessSeeds {
		res := harnessOnEtcd(t, c, seed, 0)
		if len(res.Failures) > 0 {
			t.Fatalf("seed %d: %s", seed, strings.Join(res.Failures, "; "))
		}
		t.Logf("seed %d: %d ops, faults %v", seed, res.Ops, res.Faults)
	}
}
