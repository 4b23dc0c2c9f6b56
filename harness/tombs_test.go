package harness

import (
	"testing"

	"github.com/idemdb/idem/fault"
)

// tombSeeds walk every path of a key's tombstone between them: both
// variants and both retentions, a crash at each cleaner failpoint (69 at
// the receipt cleaner's since contention waits, 36 at the tombstone
// cleaner's), a stale cleaner's tombstone delete fenced; seed 7 opts out.
var tombSeeds = []int64{5, 7, 8, 23, 36, 69, 75}

// tombPaths are what tombSeeds must produce between them (sc.count): keys
// cleaned into tombstones and refused while protected, the very request
// resent and refused too, tombstones cleaned and their keys run again, a
// stale cleaner's tombstone delete fenced, and crashes of the cleaner at
// both its failpoints.
var tombPaths = []string{"tombstoned-keys", "expired-answers", "expired-resends", "tombstones-cleaned",
	"expired-keys-ran-again", "fenced-tomb-cleanup", "crash-fired@" + fault.ReceiptCleanBefore, "crash-fired@" + fault.TombCleanBefore}

// TestTombstones_AnExpiredKeyNeverRunsTwice (issue 19: an expired key
// never produces a second effect, even across crashes and the cleaner):
// tombSeeds pass every check — the expired answers', the audit of
// tombstone writes, the models and invariants that a spent generation
// never applied — while their runs go down every path of tombPaths; a seed
// that opts out leaves no tombstone and is never refused.
func TestTombstones_AnExpiredKeyNeverRunsTwice(t *testing.T) {
	total := map[string]int{}
	for _, seed := range tombSeeds {
		res := runSeed(t, seed)
		if len(res.Failures) > 0 {
			report(t, res)
		}
		if ConfigFor(seed).TombstoneRetention < 0 {
			if res.Faults["cleaned-keys"] == 0 || res.Faults["tombstoned-keys"]+res.Faults["expired-answers"] != 0 {
				t.Errorf("seed %d opts out of tombstones, yet: %v", seed, res.Faults)
			}
			continue
		}
		for k, v := range res.Faults {
			total[k] += v
		}
	}
	for _, path := range tombPaths {
		if total[path] == 0 {
			t.Errorf("no %s on seeds %v", path, tombSeeds)
		}
	}
	t.Logf("seeds %v: %v", tombSeeds, total)
}
