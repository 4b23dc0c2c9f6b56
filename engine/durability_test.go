package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// TestCrash_AtARandomFileSystemCallLosesNothingAcknowledged runs the
// concurrent workload (conditional batches, chains, checkpoints, segment
// cycling, truncation) and cuts the power at a random call into the file
// system — a write, an fsync, a rename, a removal, a directory sync —
// then recovers with a random tear of what was not fsynced. Every batch
// acknowledged must be present, none rejected may appear, and none may be
// half-applied (verifyRecovered).
//
// Under -race (make test's go-race) it cuts the power as often as -short
// does: each run is one random draw of the call and the tear, the seed
// changes from run to run, and `go test ./engine` makes all 40.
func TestCrash_AtARandomFileSystemCallLosesNothingAcknowledged(t *testing.T) {
	seed := seedFor(t)
	runs := 40
	if testing.Short() || raceEnabled {
		runs = 12
	}
	opts := crashOpts()
	for i := range runs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			disk := newMemDisk()
			db := disk.open(t, opts)
			h := newHistory()
			w := &workload{db: db, h: h, keys: 12, workers: 4, ckptEvery: 10, maxOps: 3000}
			// A short warm-up without a crash, then one at a random call.
			w.run(t, rng.Uint64(), func() bool { return h.acked.Load() >= 30 })
			fs := disk.FS()
			at := 1 + rng.Int64N(1500)
			fs.CrashAt(at)
			w.run(t, rng.Uint64(), fs.Crashed)
			if !fs.Crashed() {
				t.Fatalf("the workload ended before call %d (%v)", at, h.counts())
			}
			tear := crashTears[rng.IntN(len(crashTears))]
			disk.Crash(db, tear.make(rng))
			db, err := disk.reopen(opts)
			if err != nil {
				t.Fatalf("recovery after a crash at call %d (%s): %v", at, tear.name, err)
			}
			state := verifyRecovered(t, db, h, true)
			afterRecovery(t, memDataDir, disk.opts(opts), db, state)
		})
	}
}

// The catalog's failpoints that leave a step "not yet durable" are tested
// against a crash that really loses what was not synced: the step's effect
// is gone after the crash, and recovery loses nothing acknowledged.
func TestCrash_StepsNotYetDurableAreUndoneByTheCrash(t *testing.T) {
	testsupport.RequireFailpoints(t)
	ctx := context.Background()
	opts := Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024}}
	walDir := filepath.Join(memDataDir, walDirName)
	// names lists the log's segments: a spare (wal/prealloc.go) comes and
	// goes in the background and is no step of these.
	names := func(fsys vfs.FS, dir string) []string {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			if len(e.Name()) == 20 {
				out = append(out, e.Name())
			}
		}
		return out
	}
	for _, tc := range []struct {
		failpoint string
		step      func(db *DB) error
		undone    func(before, after []string, ckpts []string) error
	}{
		// Every checkpoint a base: the second truncates the log (a delta
		// truncates nothing; a merge does, tested in merge_test.go).
		{fault.WALTruncateAfter, func(db *DB) error { return db.Checkpoint() },
			func(before, after, _ []string) error {
				// The segments removed without a directory sync are back.
				// The checkpoint's own log record may have started a new
				// segment (durable: a new segment's entry is synced) after
				// them.
				if len(after) < len(before) || !slices.Equal(before, after[:len(before)]) {
					return fmt.Errorf("log segments %v after the crash, want the %v from before truncation", after, before)
				}
				return nil
			}},
		{fault.CkptDirSyncBefore, func(db *DB) error { return db.Checkpoint() },
			func(_, _, ckpts []string) error {
				if len(ckpts) != 1 {
					return fmt.Errorf("checkpoints %v after the crash, want only the first (the rename was never synced)", ckpts)
				}
				return nil
			}},
		{fault.WALDirSyncBefore, func(db *DB) error {
			_, err := db.Apply(ctx, new(store.Batch).Put([]byte("big"), []byte(strings.Repeat("b", 1500))))
			return err
		}, func(before, after, _ []string) error {
			if !slices.Equal(before, after) {
				return fmt.Errorf("log segments %v after the crash, want %v (the new segment's entry was never synced)", after, before)
			}
			return nil
		}},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			disk := newMemDisk()
			opts := opts
			if tc.failpoint == fault.WALTruncateAfter {
				opts.CheckpointDeltasMax = -1
			}
			db := disk.open(t, opts)
			fillStore(t, db, 60)
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			state := fillStore(t, db, 60)
			if err := vfs.SyncDir(disk.FS(), walDir); err != nil {
				t.Fatal(err)
			}
			before := names(disk.FS(), walDir)
			disarm := testsupport.Arm(t, tc.failpoint, `return("crash")`)
			err := tc.step(db)
			disarm()
			if !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("step with %s armed: %v, want the injected failure", tc.failpoint, err)
			}
			disk.Crash(db, memfs.KeepAll)
			gens, err := listGenerations(disk.FS(), memDataDir)
			if err != nil {
				t.Fatal(err)
			}
			var ckpts []string
			for _, g := range gens {
				if g.complete() {
					ckpts = append(ckpts, genName(g.v0))
				}
			}
			if err := tc.undone(before, names(disk.FS(), walDir), ckpts); err != nil {
				t.Fatal(err)
			}
			db = disk.open(t, opts)
			defer db.Close()
			got := scanAll(t, db)
			delete(got, "big")
			sameState(t, "after the crash", got, state)
		})
	}
}
