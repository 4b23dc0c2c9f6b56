package harness

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var (
	flagReplayRuns  = flag.Int("replay.runs", 2, "runs of each seed TestReplay_SeedReplaysRun compares")
	flagReplaySeeds = flag.String("replay.seeds", "", "seeds TestReplay_SeedReplaysRun runs, as FROM-TO (default: replaySeeds)")
)

// replaySeeds cover both variants, a tiny executor, deferred resolution
// and short retention.
var replaySeeds = []int64{1, 2, 3, 4, 5, 7, 10, 11, 15, 19, 27, 35}

// TestReplay_SeedReplaysRun: a seed replays its run, not only its fault
// schedule — the same schedule and the same client operations in the same
// order (Trace) on every run — and reports how often the whole history was
// identical too (go test ./harness -run Replay -replay.runs=20 -v; with
// -replay.seeds=1-40, on those seeds).
func TestReplay_SeedReplaysRun(t *testing.T) {
	seeds := replaySeeds
	if *flagReplaySeeds != "" {
		var from, to int64
		if _, err := fmt.Sscanf(*flagReplaySeeds, "%d-%d", &from, &to); err != nil || from > to {
			t.Fatalf("-replay.seeds=%q: want FROM-TO", *flagReplaySeeds)
		}
		seeds = seedRange(from, to)
	}
	identical := 0
	for _, seed := range seeds {
		var first Result
		same := 0
		for i := 0; i < *flagReplayRuns; i++ {
			res := Run(t, ConfigFor(seed))
			if len(res.Failures) > 0 {
				t.Fatalf("seed %d failed: %s", seed, strings.Join(res.Failures, "; "))
			}
			if i == 0 {
				first = res
				same++
				continue
			}
			if !slices.Equal(res.Schedule, first.Schedule) {
				t.Fatalf("seed %d: run %d has another fault schedule", seed, i)
			}
			if d := firstDiff(res.Trace, first.Trace); d != "" {
				t.Fatalf("seed %d: run %d issued other client operations: %s", seed, i, d)
			}
			if slices.Equal(res.History, first.History) {
				same++
			} else {
				t.Logf("seed %d run %d: history differs: %s", seed, i, firstDiff(res.History, first.History))
			}
		}
		t.Logf("seed %d: %d ops, %v simulated, %d scheduler events; history identical in %d of %d runs",
			seed, first.Ops, first.SimTime, first.Events, same, *flagReplayRuns)
		if same == *flagReplayRuns {
			identical++
		}
	}
	t.Logf("%d of %d seeds replayed their whole history in all %d runs", identical, len(seeds), *flagReplayRuns)
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return "at " + a[i] + " | " + b[i]
		}
	}
	if len(a) != len(b) {
		return "lengths differ"
	}
	return ""
}
