//go:build idem_selftest

// make test runs the self-test as
//
//	go test -race -count=1 -tags idem_selftest -run TestSelfTest ./fault ./harness ./api ./etcdtest

package etcdtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
	"github.com/idemdb/idem/store/storetest"
)

// plantedOnEtcd maps each planted bug that code on etcd reaches to the
// check that must catch it on the etcd store (the shared 3-member
// cluster), on every run: a check of its own, or (check nil) the harness's
// scenario of a fixed seed over etcd, cut to a few steps (harnessOnEtcd:
// its workload, zombies and auditor, nodes as simulated processes), that
// catches it in a second or two (etcd's fsyncs are most of it). The
// forwarding loop (api's self-test) reads nothing of the store but node
// records, which Locate's row covers here. The harness over etcd meets few
// reads of intents and caught no BugReadServesIntent on the seeds tried
// (odd seeds 1 to 17, and 2, 18, 42): intentReadViolations is its check.
//
// The harness's families it cannot reach on etcd: the damaged checkpoint
// and value-log record (BugCkptIgnoresCRC, BugVlogIgnoresCRC) are the
// embedded engine's files, which etcd does not have; the fingerprint
// family is pure functions of a request, with no store (the harness's
// property test, fingerprintViolations, is the same on every store).
// BugEtcdSettleAnyValue needs etcd itself to answer ambiguously, which the
// harness's injected ambiguity (above the store) never makes it do:
// ambiguityViolations injects it below.
var plantedOnEtcd = []struct {
	bug   string
	check func(t *testing.T, c *etcdtest.Cluster) []string
	run   harnessRun
}{
	{fault.BugEtcdLeaseCondsDropped, func(t *testing.T, c *etcdtest.Cluster) []string {
		var s store.Store = newStoreWith(t, c.Client(t), etcdstore.Options{Prefix: etcdtest.Prefix(t)})
		return storetest.FencingViolations(ctx, s)
	}, harnessRun{}},
	{fault.BugEtcdSettleAnyValue, ambiguityViolations, harnessRun{}},
	{fault.BugLocateNodeOnly, restartLocateViolations, harnessRun{}},
	{fault.BugReadServesIntent, intentReadViolations, harnessRun{}},
	// The harness over etcd: zombies' writes must fail on etcd's Txn
	// compares (the auditor), answers replay and effects happen once (the
	// models), debt and tombstones pin receipts against the cleaner.
	{fault.BugEtcdLeaseCondsDropped, nil, harnessRun{5, 8}},
	{fault.BugReexecuteOnReplay, nil, harnessRun{5, 8}},
	{fault.BugConflictAsAbort, nil, harnessRun{42, 8}}, // one node on etcd: a bare decision conflict
	{fault.BugTerminalUnfenced, nil, harnessRun{5, 8}},
	{fault.BugRenewUnfenced, nil, harnessRun{5, 8}},
	{fault.BugAdoptKeepsEpoch, nil, harnessRun{5, 8}},
	{fault.BugCleanUnfenced, nil, harnessRun{1, 8}},
	{fault.BugCleanIgnoresDebt, nil, harnessRun{11, 12}},
	{fault.BugCleanIgnoresVisibilityDebt, nil, harnessRun{11, 12}},
	{fault.BugCleanDropsTombstone, nil, harnessRun{1, 8}},
	{fault.BugExpiredReexecutes, nil, harnessRun{1, 8}},
	{fault.BugSessionCommitUnconditioned, nil, harnessRun{5, 8}},
}

// harnessRun is a harness scenario: a seed's (harness.ConfigFor), cut to
// its first steps.
type harnessRun struct {
	seed  int64
	steps int
}

// violations runs r over etcd, as a check: its failures.
func (r harnessRun) violations(t *testing.T, c *etcdtest.Cluster) []string {
	res := harnessOnEtcd(t, c, r.seed, r.steps)
	var out []string
	for _, f := range res.Failures {
		out = append(out, fmt.Sprintf("seed %d, %d steps: %s", r.seed, r.steps, f))
	}
	return out
}

// TestSelfTest_EtcdChecksCatchPlantedBugs: each check passes on etcd
// without its planted bug, evaluates the bug's hook, and fails with it.
func TestSelfTest_EtcdChecksCatchPlantedBugs(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out: nothing can plant a bug")
	}
	c := sharedCluster(t)
	passes := map[harnessRun]bool{} // the harness's control runs, once each
	for _, pb := range plantedOnEtcd {
		name, check := pb.bug, pb.check
		if check == nil {
			name, check = fmt.Sprintf("%s/harness-seed-%d-steps-%d", pb.bug, pb.run.seed, pb.run.steps), pb.run.violations
		}
		t.Run(name, func(t *testing.T) {
			if pb.check != nil || !passes[pb.run] {
				if v := check(t, c); len(v) > 0 {
					t.Fatalf("the check fails on etcd without the bug: %s", strings.Join(v, "; "))
				}
				passes[pb.run] = pb.check == nil
			}
			if err := fault.Enable(pb.bug, "return(true)"); err != nil {
				t.Fatal(err)
			}
			hits := fault.Hits(pb.bug)
			v := check(t, c)
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
