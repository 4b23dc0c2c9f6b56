//go:build idem_selftest

// The checker self-test exists only in the self-test build: the planted bugs
// it arms are compiled in only under -tags idem_selftest (fault/planted.go).
// `make test` runs it as
//
//	go test -race -count=1 -tags idem_selftest -run TestSelfTest ./fault ./harness ./api ./etcdtest

package harness

import (
	"flag"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
)

var (
	flagFindSeeds   = flag.Bool("findseeds", false, "list the seeds that catch each planted bug")
	flagFindSeedsOf = flag.String("findseeds.bug", "", "with -findseeds: only the planted bugs whose name contains this")
)

// plantedBugs maps each planted bug — one per property the harness claims
// to check — to the fixed seeds on which the harness must catch it, every
// one of them, on every run (a run replays its seed: see sim); the same
// seeds pass without the bug. No seeds: the fingerprint property test
// (fingerprintViolations) must catch it.
var plantedBugs = []struct {
	bug   string
	seeds []int64
}{
	// The models: answers replay, effects happen once.
	{fault.BugReexecuteOnReplay, []int64{1, 2}},
	{fault.BugConflictAsAbort, []int64{18, 42}},
	// The auditor, fed by the zombie choreographies (shared seeds).
	{fault.BugTerminalUnfenced, []int64{1, 5}},
	{fault.BugRenewUnfenced, []int64{1, 5}},
	{fault.BugAdoptKeepsEpoch, []int64{1, 6}},
	{fault.BugCleanUnfenced, []int64{3, 5}},
	// Debt pins a receipt: the auditor and the durable checks of a clean
	// (seeds with deferred resolution).
	{fault.BugCleanIgnoresDebt, []int64{3, 6}},
	{fault.BugCleanIgnoresVisibilityDebt, []int64{3, 6}},
	// Tombstones: the auditor (a cleanup without its tombstone), the
	// invariants (a spent generation's marker and increments).
	{fault.BugCleanDropsTombstone, []int64{1, 6}},
	{fault.BugExpiredReexecutes, []int64{3, 6}},
	// A damaged checkpoint (ckpt-damage).
	{fault.BugCkptIgnoresCRC, []int64{2, 5}},
	// A damaged value-log record (vlog-damage).
	{fault.BugVlogIgnoresCRC, []int64{1, 2}},
	// Sessions: a commit conditioned on nothing it saw overwrites what
	// others wrote meanwhile (the docs model, the counters).
	{fault.BugSessionCommitUnconditioned, []int64{1, 2}},
	// Isolation: a read never sees an undecided or aborted intent (the
	// docs model, the reads' check).
	{fault.BugReadServesIntent, []int64{1, 2}},
	// The fingerprint property.
	{fault.BugFingerprintIgnoresDeletes, nil},
	{fault.BugCanonDropsUpsert, nil},
	{fault.BugVerbatimIgnoresDigest, nil},
}

// TestSelfTest_CatchesPlantedBugs proves the harness is not vacuous: each
// planted bug is caught by each of its fixed seeds (or by the fingerprint
// property), every one of which passes when the bug is not planted. A seed
// that never evaluates its bug's hook fails the test: it would pass without
// checking anything (every hook is in production code; see
// fault/planted_pending_test.go).
func TestSelfTest_CatchesPlantedBugs(t *testing.T) {
	if !fault.Compiled {
		t.Skip("failpoints compiled out: nothing can plant a bug")
	}
	passes := map[int64]bool{} // control runs, once per seed
	for _, pb := range plantedBugs {
		t.Run(pb.bug, func(t *testing.T) {
			if pb.seeds == nil {
				if v := fingerprintViolations(t); len(v) > 0 {
					t.Fatalf("the fingerprint property fails without the bug: %s", v[0])
				}
				if err := fault.Enable(pb.bug, "return(true)"); err != nil {
					t.Fatal(err)
				}
				hits := fault.Hits(pb.bug)
				v := fingerprintViolations(t)
				fault.Disable(pb.bug)
				if fault.Hits(pb.bug) == hits {
					t.Fatalf("the fingerprint property never evaluates the hook of %s", pb.bug)
				}
				if len(v) == 0 {
					t.Fatalf("the fingerprint property did not catch %s", pb.bug)
				}
				t.Logf("caught %s: %s", pb.bug, v[0])
				return
			}
			for _, seed := range pb.seeds {
				cfg := ConfigFor(seed)
				if !passes[seed] {
					if res := Run(t, cfg); len(res.Failures) > 0 {
						t.Fatalf("control run of seed %d fails without the bug: %s", seed, strings.Join(res.Failures, "; "))
					}
					passes[seed] = true
				}
				hits := fault.Hits(pb.bug)
				cfg.Bugs = []string{pb.bug}
				res := Run(t, cfg)
				if fault.Hits(pb.bug) == hits {
					// Every hook is in production code: a seed that never
					// reaches it checks nothing (pick others: -findseeds).
					t.Fatalf("seed %d never evaluates the hook of %s: it cannot catch it", seed, pb.bug)
				}
				if len(res.Failures) == 0 {
					t.Fatalf("seed %d did not catch %s", seed, pb.bug)
				}
				t.Logf("seed %d caught %s: %s", seed, pb.bug, res.Failures[0])
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
		if pb.seeds == nil || !strings.Contains(pb.bug, *flagFindSeedsOf) {
			continue
		}
		var caught []int64
		for seed := int64(1); seed <= 60; seed++ {
			cfg := ConfigFor(seed)
			cfg.Bugs = []string{pb.bug}
			if res := Run(t, cfg); len(res.Failures) > 0 {
				caught = append(caught, seed)
			}
		}
		t.Logf("%s caught by %d/60 seeds: %v", pb.bug, len(caught), caught)
	}
}
