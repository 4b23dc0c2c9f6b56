//go:build idem_selftest

// make test runs the self-test as
//
//	go test -race -count=1 -tags idem_selftest -run TestSelfTest ./fault ./harness ./api ./etcdtest

package etcdtest_test

import (
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/etcdstore"
	"github.com/idemdb/idem/engine/storetest"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/fault"
)

// plantedOnEtcd maps each planted bug that code on etcd reaches to the
// check that must catch it on the etcd store (the shared 3-member
// cluster), on every run. The forwarding loop (api's self-test) reads
// nothing of the store but node records, which Locate's row covers here.
var plantedOnEtcd = []struct {
	bug   string
	check func(t *testing.T, c *etcdtest.Cluster) []string
}{
	{fault.BugEtcdLeaseCondsDropped, func(t *testing.T, c *etcdtest.Cluster) []string {
		var s engine.Store = newStoreWith(t, c.Client(t), etcdstore.Options{Prefix: etcdtest.Prefix(t)})
		return storetest.FencingViolations(ctx, s)
	}},
	{fault.BugEtcdSettleAnyValue, ambiguityViolations},
	{fault.BugLocateNodeOnly, restartLocateViolations},
	{fault.BugReadServesIntent, intentReadViolations},
}

// TestSelfTest_EtcdChecksCatchPlantedBugs: each check passes on etcd
// without its planted bug, evaluates the bug's hook, and fails with it.
func TestSelfTest_EtcdChecksCatchPlantedBugs(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out: nothing can plant a bug")
	}
	c := sharedCluster(t)
	for _, pb := range plantedOnEtcd {
		t.Run(pb.bug, func(t *testing.T) {
			if v := pb.check(t, c); len(v) > 0 {
				t.Fatalf("the check fails on etcd without the bug: %s", v[0])
			}
			if err := fault.Enable(pb.bug, "return(true)"); err != nil {
				t.Fatal(err)
			}
			hits := fault.Hits(pb.bug)
			v := pb.check(t, c)
			fault.Disable(pb.bug)
			if fault.Hits(pb.bug) == hits {
				t.Fatalf("the check never evaluates the hook of %s", pb.bug)
			}
			if len(v) == 0 {
				t.Fatalf("the check did not catch %s on etcd", pb.bug)
			}
			t.Logf("caught %s on etcd: %s", pb.bug, v[0])
		})
	}
}
