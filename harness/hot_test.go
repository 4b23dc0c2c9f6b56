package harness

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

var flagHotStrict = flag.Bool("hot.strict", false, "hot-document workload: a refusal in a known gap (hot.go) is a violation too")

// hotSeeds run the hot-document workload (HotConfigFor): together they
// schedule every fault kind, on both variants, and run every known gap and
// none (TestHotSchedule_SeedsCoverEveryFaultKind).
var hotSeeds = seedRange(1, 24)

// TestFault_HotDocuments is issue 37's harness check: many clients send
// increment-only keyed batches on two counters under the seeds' faults.
// The models check that every committed increment is counted exactly once
// and every answer of a key is its first; hot.go that none is refused for
// contention outside the known gaps (with -hot.strict, anywhere).
func TestFault_HotDocuments(t *testing.T) {
	ops, committed, refused := 0, 0, map[string]int{}
	for _, seed := range hotSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := HotConfigFor(seed)
			cfg.HotStrict = *flagHotStrict
			cfg.OutDir = failureDir()
			res := Run(t, cfg)
			t.Logf("ops=%d outcomes=%v faults=%v", res.Ops, res.Outcomes, res.Faults)
			ops += res.Ops
			committed += res.Outcomes[outCommitted.String()]
			for k, v := range res.Faults {
				if strings.HasPrefix(k, "hot-refused-") {
					refused[k] += v
				}
			}
			if len(res.Failures) > 0 {
				t.Errorf("seed %d (hot, %s) failed:\n  %s\nschedule: %s\nreplay: go test ./harness -run 'TestFault_HotDocuments' -v (hotSeeds)",
					res.Seed, cfg.Variant, strings.Join(res.Failures, "\n  "), strings.Join(res.Schedule, " "))
			}
		})
	}
	if committed == 0 {
		t.Error("no increment committed on the hot seeds")
	}
	t.Logf("hot: seeds=%d ops=%d committed=%d refused in known gaps=%v", len(hotSeeds), ops, committed, refused)
}

// TestHotSchedule_SeedsCoverEveryFaultKind: the hot seeds schedule every
// fault kind, run both variants, and run seeds outside every known gap —
// where any refusal fails the run — and inside each.
func TestHotSchedule_SeedsCoverEveryFaultKind(t *testing.T) {
	kinds, variants, gaps := map[faultKind]bool{}, map[Variant]bool{}, map[string]bool{}
	for _, seed := range hotSeeds {
		cfg := HotConfigFor(seed)
		variants[cfg.Variant] = true
		sc := &scenario{cfg: cfg, schedule: makeSchedule(cfg)}
		for i, e := range sc.schedule {
			kinds[e.Kind] = true
			sc.stepNo = i
			gaps[sc.hotGap()] = true
		}
	}
	for k := faultKind(0); k < faultKinds; k++ {
		if !kinds[k] {
			t.Errorf("no hot seed schedules %s", k)
		}
	}
	if len(variants) != 2 {
		t.Errorf("hot seeds cover variants %v", variants)
	}
	for _, g := range []string{"", hotGapBareConflict} {
		if !gaps[g] {
			t.Errorf("no hot seed step falls in gap %q", g)
		}
	}
}
