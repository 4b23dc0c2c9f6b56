//go:build idem_selftest

// The checker self-test exists only in the self-test build: the planted bugs
// it arms are compiled in only under -tags idem_selftest (fault/planted.go).
// `make test` runs it as
//
//	go test -race -count=1 -tags idem_selftest -run TestSelfTest ./fault ./harness

package harness

import (
	"flag"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
)

var flagFindSeeds = flag.Bool("findseeds", false, "list the seeds that catch each planted bug")

// plantedBugs maps each planted bug to fixed seeds on which the checks must
// catch it; the same seeds pass without the bug (TestFault covers them or
// the control run below does).
var plantedBugs = []struct {
	bug   string
	seeds []int64
}{
	{fault.BugReexecuteOnReplay, []int64{1}},
	{fault.BugConflictAsAbort, []int64{7, 8}},
	{fault.BugCleanIgnoresDebt, []int64{35, 55, 63, 115, 147, 179}},
}

// TestSelfTest_CatchesPlantedBugs proves the harness is not vacuous: a
// receipt layer that re-executes on replay, a coordinator that takes a
// decision conflict for an abort, and a cleaner that ignores debt are each
// caught by one of their fixed seeds, every one of which passes when the bug
// is not planted. (Interleavings vary between runs, so a bug is listed with
// several seeds; each alone caught it in 10 of 10 runs when chosen.)
func TestSelfTest_CatchesPlantedBugs(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out: nothing can plant a bug")
	}
	for _, pb := range plantedBugs {
		t.Run(pb.bug, func(t *testing.T) {
			caught := 0
			for _, seed := range pb.seeds {
				cfg := ConfigFor(seed)
				if res := Run(cfg); len(res.Failures) > 0 {
					t.Fatalf("control run of seed %d fails without the bug: %s", seed, strings.Join(res.Failures, "; "))
				}
				cfg.Bugs = []string{pb.bug}
				if res := Run(cfg); len(res.Failures) > 0 {
					caught++
					t.Logf("seed %d caught %s: %s", seed, pb.bug, res.Failures[0])
				}
			}
			if caught == 0 {
				t.Fatalf("no seed of %v caught %s", pb.seeds, pb.bug)
			}
		})
	}
}

// TestSelfTest_FindSeeds is a tool, not a check: it lists which seeds catch
// each bug (go test -tags idem_selftest ./harness -run FindSeeds -findseeds).
func TestSelfTest_FindSeeds(t *testing.T) {
	if !*flagFindSeeds {
		t.Skip("pass -findseeds")
	}
	for _, pb := range plantedBugs {
		var caught []int64
		for seed := int64(1); seed <= 60; seed++ {
			cfg := ConfigFor(seed)
			cfg.Bugs = []string{pb.bug}
			if res := Run(cfg); len(res.Failures) > 0 {
				caught = append(caught, seed)
			}
		}
		t.Logf("%s caught by %d/60 seeds: %v", pb.bug, len(caught), caught)
	}
}
