package harness

import (
	"fmt"
	"strings"
	"testing"
)

// hotSeeds run the hot-document workload (HotConfigFor): together they
// schedule every fault kind, on both variants
// (TestHotSchedule_SeedsCoverEveryFaultKind).
var hotSeeds = seedRange(1, 24)

// TestFault_HotDocuments is issue 37's harness check: many clients send
// increment-only keyed batches on two counters under the seeds' faults.
// The models check that every committed increment is counted exactly once
// and every answer of a key is its first; hot.go that none is refused for
// contention.
func TestFault_HotDocuments(t *testing.T) {
	ops, committed := 0, 0
	for _, seed := range hotSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := HotConfigFor(seed)
			cfg.OutDir = failureDir()
			res := Run(t, cfg)
			t.Logf("ops=%d outcomes=%v faults=%v", res.Ops, res.Outcomes, res.Faults)
			ops += res.Ops
			committed += res.Outcomes[outCommitted.String()]
			if len(res.Failures) > 0 {
				t.Errorf("seed %d (hot, %s) failed:\n  %s\nschedule: %s\nreplay: go test ./harness -run 'TestFault_HotDocuments' -v (hotSeeds)",
					res.Seed, cfg.Variant, strings.Join(res.Failures, "\n  "), strings.Join(res.Schedule, " "))
			}
		})
	}
	if committed == 0 {
		t.Error("no increment committed on the hot seeds")
	}
	t.Logf("hot: seeds=%d ops=%d committed=%d", len(hotSeeds), ops, committed)
}

// TestHotSchedule_SeedsCoverEveryFaultKind: the hot seeds schedule every
// fault kind and run both variants.
func TestHotSchedule_SeedsCoverEveryFaultKind(t *testing.T) {
	kinds, variants := map[faultKind]bool{}, map[Variant]bool{}
	for _, seed := range hotSeeds {
		cfg := HotConfigFor(seed)
		variants[cfg.Variant] = true
		for _, e := range makeSchedule(cfg) {
			kinds[e.Kind] = true
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
}
