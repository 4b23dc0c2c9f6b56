package harness

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	flagSeeds     = flag.Int("fault.seeds", 0, "randomized seeds to run (0: the fixed set)")
	flagDuration  = flag.Duration("fault.duration", 0, "keep running randomized seeds for this long")
	flagSeed      = flag.Int64("fault.seed", -1, "replay exactly this seed")
	flagFindSeeds = flag.Bool("findseeds", false, "list the seeds that catch each planted bug")
)

// fixedSeeds run under `make test`: both variants, small executors, and
// every fault kind (see TestSchedule_FixedSeedsCoverEveryFaultKind).
var fixedSeeds = []int64{1, 2, 3, 4, 5, 6, 7, 10}

// TestFault runs seeded fault schedules and checks every history for
// linearizability and the store for its invariants.
func TestFault(t *testing.T) {
	seeds := fixedSeeds
	switch {
	case *flagSeed >= 0:
		seeds = []int64{*flagSeed}
	case *flagSeeds > 0 || *flagDuration > 0:
		seeds = nil
	}
	if testing.Short() && *flagSeed < 0 && *flagSeeds == 0 && *flagDuration == 0 {
		seeds = seeds[:4]
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	deadline := time.Now().Add(*flagDuration)
	var runs, ops, failed int
	faults := map[string]int{}
	for i := 0; ; i++ {
		var seed int64
		switch {
		case seeds != nil:
			if i >= len(seeds) {
				goto done
			}
			seed = seeds[i]
		case *flagSeeds > 0 && i < *flagSeeds, *flagDuration > 0 && time.Now().Before(deadline):
			seed = rng.Int64N(1 << 40)
		default:
			goto done
		}
		runs++
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res := runSeed(t, seed)
			t.Logf("ops=%d outcomes=%v faults=%v", res.Ops, res.Outcomes, res.Faults)
			ops += res.Ops
			for k, v := range res.Faults {
				faults[k] += v
			}
			if len(res.Failures) > 0 {
				failed++
				report(t, res)
			}
		})
	}
done:
	line := fmt.Sprintf("fault: seeds=%d ops=%d failures=%d", runs, ops, failed)
	t.Log(line)
	fmt.Println(line)
	fmt.Println("fault: injected", faults)
}

func runSeed(t *testing.T, seed int64) Result {
	cfg := ConfigFor(seed)
	cfg.Dir = t.TempDir()
	cfg.OutDir = failureDir()
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	return Run(cfg)
}

func failureDir() string {
	d, _ := filepath.Abs("failures")
	return d
}

func report(t *testing.T, res Result) {
	t.Helper()
	t.Errorf("seed %d (%s) failed:\n  %s\nschedule: %s\nreplay: go test ./harness -run 'TestFault$' -fault.seed=%d -v",
		res.Seed, ConfigFor(res.Seed).Variant, strings.Join(res.Failures, "\n  "), strings.Join(res.Schedule, " "), res.Seed)
	for _, p := range res.VisPaths {
		t.Logf("porcupine visualization: %s", p)
	}
}
