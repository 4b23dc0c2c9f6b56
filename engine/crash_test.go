package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/wal"
)

// Crash tests: a workload of concurrent conditional batches (and
// checkpoints) runs until a failpoint fires, then the store loses power
// (CrashForTesting with a tear of the unsynced log tail) and is reopened;
// verifyRecovered proves every acknowledged batch survived, nothing rejected
// or refused appeared, and every batch is all there or not at all.

// crashOpts makes every durable step frequent: small segments (cycling,
// directory fsyncs, whole-segment truncation) and small checkpoint
// intervals on top of the workers' explicit checkpoints.
func crashOpts() Options {
	return quiet(Options{CheckpointLogBytes: 8 << 10, WAL: wal.Options{SegmentBytes: 4096}})
}

// crashTear is one way the disk may keep the unsynced tail of the log.
type crashTear struct {
	name string
	make func(rng *rand.Rand) wal.Tear
}

var crashTears = []crashTear{
	{"drop-unsynced", func(*rand.Rand) wal.Tear { return wal.DropUnsynced }},
	{"keep-random", func(rng *rand.Rand) wal.Tear { return damageTail(rng, nil) }},
	{"zero-fill", func(rng *rand.Rand) wal.Tear { return damageTail(rng, func([]byte) {}) }},
	{"garbage-fill", func(rng *rand.Rand) wal.Tear {
		return damageTail(rng, func(b []byte) {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		})
	}},
}

// damageTail keeps a random amount of the unsynced region; with fill set,
// it then overwrites a random suffix of what it kept (and sometimes a few
// bytes beyond the old end, as preallocated blocks would) with fill's bytes.
func damageTail(rng *rand.Rand, fill func([]byte)) wal.Tear {
	return func(path string, durable, size int64) error {
		if durable < 0 || durable > size {
			return fmt.Errorf("tear: durable size %d outside the %d-byte tail %s", durable, size, path)
		}
		keep := durable + rng.Int64N(size-durable+1)
		if err := os.Truncate(path, keep); err != nil {
			return err
		}
		if fill == nil {
			return nil
		}
		end := keep
		if rng.IntN(3) == 0 {
			end += 1 + rng.Int64N(64)
		}
		if end == durable {
			return nil
		}
		from := durable + rng.Int64N(end-durable)
		junk := make([]byte, end-from)
		fill(junk)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(junk, from); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

// loseUnsyncedCheckpointWork applies to checkpoint files what a power loss
// may do to their unsynced state: a temp file keeps a random prefix, and
// the newest rename may be undone when no directory fsync followed it —
// that is, when the dirsync failpoint fired for every checkpoint since it
// was armed (always set). Otherwise a later checkpoint may have completed,
// truncated the log and made every earlier rename durable.
func loseUnsyncedCheckpointWork(t *testing.T, rng *rand.Rand, dir, failpoint string, always bool) {
	t.Helper()
	tmps, _ := filepath.Glob(filepath.Join(dir, ckptPrefix+"*"+ckptTmpSuffix))
	for _, p := range tmps {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, rng.Int64N(fi.Size()+1)); err != nil {
			t.Fatal(err)
		}
	}
	if failpoint != fault.CkptDirSyncBefore || !always || rng.IntN(2) == 0 {
		return
	}
	ckpts, _ := filepath.Glob(filepath.Join(dir, ckptPrefix+"*"+ckptSuffix))
	if len(ckpts) == 0 {
		return
	}
	sort.Strings(ckpts)
	newest := ckpts[len(ckpts)-1]
	if err := os.Rename(newest, strings.TrimSuffix(newest, ckptSuffix)+ckptTmpSuffix); err != nil {
		t.Fatal(err)
	}
}

// TestCrash_EveryFailpointRecoversAcknowledgedWrites arms, one at a time,
// every cataloged failpoint of the wal and engine layers, and crashes the
// store once it fired, with each kind of tail tear.
func TestCrash_EveryFailpointRecoversAcknowledgedWrites(t *testing.T) {
	requireFailpoints(t)
	seed := seedFor(t)
	names := append(fault.Names("wal"), fault.Names("engine")...)
	if len(names) == 0 {
		t.Fatal("no wal or engine failpoints in the catalog")
	}
	rounds := 3
	if testing.Short() {
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
	dir := t.TempDir()
	opts := crashOpts()
	db := openT(t, dir, opts)
	h := newHistory()
	w := &workload{db: db, h: h, keys: 12, workers: 4, ckptEvery: 8, maxOps: 2000}

	// Warm up unarmed, so that segments, checkpoints and truncations exist.
	warm := int64(40 + rng.IntN(80))
	w.run(t, rng.Uint64(), func() bool { return h.acked.Load() >= warm })

	terms := [...]string{`return("crash")`, `1*return("crash")`, `50%return("crash")`}[rng.IntN(3)]
	before := fault.Hits(name)
	disarm := arm(t, name, terms)
	deadline := time.Now().Add(30 * time.Second)
	w.run(t, rng.Uint64(), func() bool { return fault.Hits(name) > before || time.Now().After(deadline) })
	if fault.Hits(name) == before {
		t.Fatalf("failpoint %s (%s) never fired (%v)", name, terms, h.counts())
	}
	if err := db.CrashForTesting(tear.make(rng)); err != nil {
		t.Fatalf("crash: %v", err)
	}
	disarm()
	loseUnsyncedCheckpointWork(t, rng, dir, name, terms == `return("crash")`)

	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen after %s fired (%s, %s): %v", name, terms, tear.name, err)
	}
	state := verifyRecovered(t, db, h, true)
	t.Logf("%s fired %d× (%s); outcomes %v; %d keys recovered", name, fault.Hits(name)-before, terms, h.counts(), len(state))
	afterRecovery(t, dir, opts, db, state)
}

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
			dir := t.TempDir()
			opts := crashOpts()
			db := openT(t, dir, opts)
			h := newHistory()
			w := &workload{db: db, h: h, keys: 12, workers: 4, maxOps: 5000}
			crashAt := int64(50 + rng.IntN(150))
			seedW := rng.Uint64()
			tr := tear.make(rng)
			var once sync.Once
			crashed, crashErr := false, error(nil)
			w.run(t, seedW, func() bool {
				if h.acked.Load() >= crashAt {
					// The other workers race on into the crash.
					once.Do(func() { crashed, crashErr = true, db.CrashForTesting(tr) })
				}
				return false
			})
			if !crashed {
				t.Fatalf("workload ended before the crash (%v)", h.counts())
			}
			if crashErr != nil {
				t.Fatalf("crash: %v", crashErr)
			}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			afterRecovery(t, dir, opts, db, verifyRecovered(t, db, h, true))
		})
	}
}
