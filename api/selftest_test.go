//go:build idem_selftest

// make test runs the self-test as
//
//	go test -race -count=1 -tags idem_selftest -run TestSelfTest ./fault ./harness ./api ./etcdtest

package api_test

import (
	"testing"

	"github.com/idemdb/idem/fault"
)

// plantedForwardBugs maps each planted forwarding bug to the check that
// must catch it (forward_hops_test.go).
var plantedForwardBugs = []struct {
	bug   string
	check func(t *testing.T) []string
}{
	{fault.BugForwardForwarded, forwardLoopViolations},
	{fault.BugLocateNodeOnly, ownerRestartViolations},
}

// TestSelfTest_ForwardingChecksCatchPlantedBugs: each check passes without
// its planted bug, evaluates the bug's hook, and fails with it.
func TestSelfTest_ForwardingChecksCatchPlantedBugs(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out: nothing can plant a bug")
	}
	for _, pb := range plantedForwardBugs {
		t.Run(pb.bug, func(t *testing.T) {
			if v := pb.check(t); len(v) > 0 {
				t.Fatalf("the check fails without the bug: %s", v[0])
			}
			if err := fault.Enable(pb.bug, "return(true)"); err != nil {
				t.Fatal(err)
			}
			hits := fault.Hits(pb.bug)
			v := pb.check(t)
			fault.Disable(pb.bug)
			if fault.Hits(pb.bug) == hits {
				t.Fatalf("the check never evaluates the hook of %s", pb.bug)
			}
			if len(v) == 0 {
				t.Fatalf("the check did not catch %s", pb.bug)
			}
			t.Logf("caught %s: %s", pb.bug, v[0])
		})
	}
}
