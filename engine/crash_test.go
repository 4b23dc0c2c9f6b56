package engine

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Crash tests: a workload of concurrent conditional batches (and
// checkpoints) runs until a failpoint fires, then the store loses power —
// on a memfs disk that keeps only what was fsynced: file data, creations,
// renames and removals, whatever the store believed — and is reopened;
// verifyRecovered proves every acknowledged batch survived, nothing rejected
// or refused appeared, and every batch is all there or not at all.

// crashOpts makes every durable step frequent: small segments (cycling,
// directory fsyncs, whole-segment truncation) and small checkpoint
// intervals on top of the workers' explicit checkpoints, of many parts (so
// that crashes land between them and later checkpoints resume).
//
// Half the values (testCold) go to the value log at checkpoints, in small
// segments, so that segments fill, die and are collected within a run.
func crashOpts() Options {
	return Options{CheckpointLogBytes: 8 << 10, CheckpointPartBytes: 512, WAL: wal.Options{SegmentBytes: 4096},
		ColdValue: testCold, ValueLogSegmentBytes: 2048}
}

// testCold sends values of even length to the value log.
func testCold(_, value []byte) bool { return len(value)%2 == 0 }

// crashTear is one way the disk may keep what was written after the last
// fsync of each file: nothing, a prefix, or a prefix then zero-filled
// blocks. (A disk that changes bytes is corruption, tested in wal.)
type crashTear struct {
	name string
	make func(rng *rand.Rand) memfs.Tear
}

var crashTears = []crashTear{
	{"drop-unsynced", func(*rand.Rand) memfs.Tear { return memfs.DropUnsynced }},
	{"keep-random", func(rng *rand.Rand) memfs.Tear { return seededTear(rng, false) }},
	{"zero-fill", func(rng *rand.Rand) memfs.Tear { return seededTear(rng, true) }},
	{"keep-all", func(*rand.Rand) memfs.Tear { return memfs.KeepAll }},
}

// TestCrash_EveryFailpointRecoversAcknowledgedWrites arms, one at a time,
// every cataloged failpoint of the wal and engine layers, and crashes the
// store once it fired, with each kind of tail tear.
//
// Each round draws the warm-up, the failpoint's terms and the tear's cut
// afresh from the seed. Under -race (make test's go-race) one round runs:
// still every failpoint with every tear, a third of the 10-40 s the three
// took; the seed changes from run to run, so the draws still vary.
func TestCrash_EveryFailpointRecoversAcknowledgedWrites(t *testing.T) {
	testsupport.RequireFailpoints(t)
	seed := seedFor(t)
	names := append(fault.Names("wal"), fault.Names("engine")...)
	if len(names) == 0 {
		t.Fatal("no wal or engine failpoints in the catalog")
	}
	rounds := 3
	if testing.Short() || raceEnabled {
		rounds = 1
	}
	for i, name := range names {
		for j, tear := range crashTears {
			for r := range rounds {
				t.Run(fmt.Sprintf("%s/%s/%d", name, tear.name, r), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, uint64(i<<16|j<<8|r)))
					crashAtFailpoint(t, rng, name, tear)
				})
			}
		}
	}
}

func crashAtFailpoint(t *testing.T, rng *rand.Rand, name string, tear crashTear) {
	disk := newMemDisk()
	opts := crashOpts()
	db := disk.open(t, opts)
	h := newHistory()
	w := &workload{db: db, h: h, keys: 12, workers: 4, ckptEvery: 8, maxOps: 2000}

	// Warm up unarmed, so that segments, checkpoints and truncations exist.
	warm := int64(40 + rng.IntN(80))
	w.run(t, rng.Uint64(), func() bool { return h.acked.Load() >= warm })

	terms := [...]string{`return("crash")`, `1*return("crash")`, `50%return("crash")`}[rng.IntN(3)]
	before := fault.Hits(name)
	disarm := testsupport.Arm(t, name, terms)
	deadline := time.Now().Add(30 * time.Second)
	w.run(t, rng.Uint64(), func() bool { return fault.Hits(name) > before || time.Now().After(deadline) })
	if fault.Hits(name) == before {
		t.Fatalf("failpoint %s (%s) never fired (%v)", name, terms, h.counts())
	}
	disk.Crash(db, tear.make(rng))
	disarm()

	db, err := disk.reopen(opts)
	if err != nil {
		t.Fatalf("reopen after %s fired (%s, %s): %v", name, terms, tear.name, err)
	}
	state := verifyRecovered(t, db, h, true)
	t.Logf("%s fired %d× (%s); outcomes %v; %d keys recovered", name, fault.Hits(name)-before, terms, h.counts(), len(state))
	afterRecovery(t, memDataDir, disk.opts(opts), db, state)
}

// crashTailOps is how many ops the workers of a power-loss run issue, in
// all, after the crash.
const crashTailOps = 32

// TestCrash_PowerLossMidWorkloadKeepsAcknowledgedWrites cuts the power at a
// random moment while writers and background checkpoints are running.
func TestCrash_PowerLossMidWorkloadKeepsAcknowledgedWrites(t *testing.T) {
	seed := seedFor(t)
	runs := 16
	if testing.Short() {
		runs = 4
	}
	for i := 0; i < runs; i++ {
		tear := crashTears[i%len(crashTears)]
		t.Run(fmt.Sprintf("%d-%s", i, tear.name), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			disk := newMemDisk()
			opts := crashOpts()
			db := disk.open(t, opts)
			h := newHistory()
			w := &workload{db: db, h: h, keys: 12, workers: 4, maxOps: 5000}
			crashAt := int64(50 + rng.IntN(150))
			seedW := rng.Uint64()
			tr := tear.make(rng)
			fs := disk.FS()
			var afterCrash atomic.Int64
			w.run(t, seedW, func() bool {
				if h.acked.Load() >= crashAt {
					// The other workers race on into the crash.
					fs.Crash()
				}
				// Past the crash the workers go on for a few ops each, all
				// refused (and checked absent), not to maxOps: the store
				// refuses writes until reopened, and those thousands of
				// refusals were most of this test's time under -race.
				return fs.Crashed() && afterCrash.Add(1) > crashTailOps
			})
			if !fs.Crashed() {
				t.Fatalf("workload ended before the crash (%v)", h.counts())
			}
			disk.Crash(db, tr)
			db, err := disk.reopen(opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			afterRecovery(t, memDataDir, disk.opts(opts), db, verifyRecovered(t, db, h, true))
		})
	}
}
