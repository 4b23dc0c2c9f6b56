package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/wal"
)

// Delta checkpoints (ckptchain.go): a checkpoint after a few writes on a
// large store costs those writes, the chain it builds recovers the exact
// state, a damaged newest delta falls back losing nothing, and a damaged
// older one is refused, named, changing nothing.

// deltaTestOpts: manual checkpoints, several parts per base, a log of
// small segments (so truncation really cuts it), deltas on.
func deltaTestOpts() Options {
	return quiet(Options{CheckpointLogBytes: -1, CheckpointPartBytes: 8 << 10, WAL: wal.Options{SegmentBytes: 1024}})
}

// deltasT lists the deltas in dir, oldest first.
func deltasT(t *testing.T, dir string) []deltaMeta {
	t.Helper()
	byPrev, err := listDeltas(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []deltaMeta
	for _, ds := range byPrev {
		out = append(out, ds...)
	}
	slices.SortFunc(out, func(a, b deltaMeta) int { return int(a.v) - int(b.v) })
	return out
}

func apply(t *testing.T, db *DB, b *store.Batch) {
	t.Helper()
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func checkpointT(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

func reopenT(t *testing.T, db *DB, dir string, opts Options) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return openT(t, dir, opts)
}

func TestCheckpoint_ADeltaHoldsOnlyWhatChangedAndRecoversExactly(t *testing.T) {
	dir := t.TempDir()
	opts := deltaTestOpts()
	db := openT(t, dir, opts)
	big := strings.Repeat("v", 100)
	for i := range 2000 {
		apply(t, db, new(store.Batch).Put(fmt.Appendf(nil, "base%04d", i), []byte(big)))
	}
	checkpointT(t, db)
	base := generationsT(t, dir)[0]

	// 3 updates, 2 new keys, 2 deletions, and a key put and deleted
	// again since the base: it was never in a checkpoint and needs no
	// record.
	apply(t, db, new(store.Batch).Put([]byte("base0001"), []byte("u1")).Put([]byte("base0500"), []byte("u2")).Put([]byte("base1999"), []byte("u3")))
	apply(t, db, new(store.Batch).Put([]byte("new-a"), []byte("a")).Put([]byte("new-b"), []byte("b")))
	apply(t, db, new(store.Batch).Delete([]byte("base0002")).Delete([]byte("base1000")))
	apply(t, db, new(store.Batch).Put([]byte("transient"), []byte("t")))
	apply(t, db, new(store.Batch).Delete([]byte("transient")))
	checkpointT(t, db)
	ds := deltasT(t, dir)
	if len(ds) != 1 || db.Stats().Checkpoints.Deltas != 1 {
		t.Fatalf("deltas %+v (stats %+v), want one", ds, db.Stats().Checkpoints)
	}
	d := ds[0]
	if d.count != 7 || d.base != base.v0 || d.prev != base.v0 || d.v != db.Stats().Checkpoint {
		t.Fatalf("delta %+v on base %s: want 7 records (3 updated, 2 new, 2 tombstones) linked to the base", d, genName(base.v0))
	}
	if d.size*50 > base.bytes() {
		t.Fatalf("the delta is %d bytes for 7 changes on a store of %d: it should cost what changed", d.size, base.bytes())
	}
	if len(generationsT(t, dir)) != 1 {
		t.Fatalf("a delta rewrote the store: %+v", generationsT(t, dir))
	}

	// A second delta on the first, then the chain from disk alone: the log
	// after the tip is empty.
	apply(t, db, new(store.Batch).Put([]byte("base0001"), []byte("u1-again")).Delete([]byte("new-a")))
	checkpointT(t, db)
	state := scanAll(t, db)
	db = reopenT(t, db, dir, opts)
	defer func() { db.Close() }()
	if rec := db.Stats().Recovery; rec.FromCheckpoint != db.Stats().Checkpoint || rec.ReplayedEntries != 1 {
		// The one entry is the log's record of the delta itself.
		t.Fatalf("recovery %+v, want from the second delta with nothing to replay", rec)
	}
	sameState(t, "base and two deltas", scanAll(t, db), state)
}

// TestCheckpoint_AChainIsMergedIntoANewBaseOnceMostlyGarbageOrLong: a
// merge becomes due once the chain's files hold more than twice the live
// data, or CheckpointDeltasMax deltas, and its new base — the chain's own
// files merged at its tip — takes the deltas after it, keeps the old chain
// as the fallback, and recovers the exact state.
func TestCheckpoint_AChainIsMergedIntoANewBaseOnceMostlyGarbageOrLong(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deltasMax int
		want      int // deltas before a merge is due
	}{
		{"garbage", 64, 2}, // each delta rewrites every key: 3 × the live data after two
		{"deltas-max", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := deltaTestOpts()
			opts.CheckpointLogBytes = -(1 << 40) // no merge for the log's sake: max(this, live) is the live data
			opts.CheckpointDeltasMax = tc.deltasMax
			db := openT(t, dir, opts)
			rewrite := func(round int) {
				for i := range 100 {
					apply(t, db, new(store.Batch).Put(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "round-%d-%s", round, strings.Repeat("x", 50))))
				}
			}
			merging := func() bool { db.ckptMu.Lock(); defer db.ckptMu.Unlock(); return db.merges.merging != nil }
			rewrite(0)
			checkpointT(t, db)
			first := generationsT(t, dir)[0].v0
			for round := 1; round <= tc.want; round++ {
				if merging() {
					t.Fatalf("a merge is due after %d deltas, want it after %d", round-1, tc.want)
				}
				rewrite(round)
				checkpointT(t, db)
			}
			if !merging() {
				t.Fatalf("no merge due after %d deltas", tc.want)
			}
			tip := db.Stats().Checkpoint
			rewrite(tc.want + 1) // a delta while the merge is pending: it follows the tip the merge is at
			checkpointT(t, db)
			if err := db.merges.mergeAll(); err != nil {
				t.Fatal(err)
			}
			gens := generationsT(t, dir)
			if len(gens) != 2 || gens[0].v0 != tip || gens[1].v0 != first {
				t.Fatalf("after the merge: generations %+v, want the merged one at %d and the old base %d", gens, tip, first)
			}
			if db.chain.base.v0 != tip || len(db.chain.deltas) != 1 || db.chain.tip() != db.Stats().Checkpoint {
				t.Fatalf("chain after the merge: base %d, %d deltas, tip %d", db.chain.base.v0, len(db.chain.deltas), db.chain.tip())
			}
			if got := db.Stats().Checkpoints.Merges; got != 1 {
				t.Fatalf("%d merges counted, want 1", got)
			}
			state := scanAll(t, db)
			db = reopenT(t, db, dir, opts)
			sameState(t, "from the merged base and the delta after it", scanAll(t, db), state)
			if got := db.Stats().Recovery.FromCheckpoint; got != db.chain.tip() || db.chain.base.v0 != tip {
				t.Fatalf("recovered from %d on base %d, want the delta on the merged base %d", got, db.chain.base.v0, tip)
			}
			// The old chain is the fallback until the next merge supersedes it.
			for round := tc.want + 2; db.Stats().Checkpoints.Merges == 0; round++ {
				rewrite(round)
				checkpointT(t, db)
				if err := db.merges.mergeAll(); err != nil {
					t.Fatal(err)
				}
			}
			if gens := generationsT(t, dir); len(gens) != 2 || gens[1].v0 != tip {
				t.Fatalf("after the next merge: generations %+v, want the one merged at %d as the fallback", gens, tip)
			}
			state = scanAll(t, db)
			db = reopenT(t, db, dir, opts)
			defer db.Close()
			sameState(t, "after two merges", scanAll(t, db), state)
		})
	}
}

// deltaChainStore leaves a closed store, opened with opts, whose chain is
// a base and two deltas, and the log from the base on (deltas truncate
// nothing).
func deltaChainStore(t *testing.T, opts Options) (dir string, state map[string]store.Item, ds []deltaMeta) {
	t.Helper()
	dir = t.TempDir()
	db := openT(t, dir, opts)
	fillStore(t, db, 400)
	checkpointT(t, db)
	for range 2 {
		fillStore(t, db, 60)
		checkpointT(t, db)
	}
	state = fillStore(t, db, 20)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ds = deltasT(t, dir)
	if len(ds) != 2 || len(generationsT(t, dir)) != 1 {
		t.Fatalf("deltas %+v, generations %+v: want a base and two deltas", ds, generationsT(t, dir))
	}
	return dir, state, ds
}

// deltaDamages are what may happen to a delta file on disk.
var deltaDamages = []struct {
	name string
	do   func(t *testing.T, path string)
}{
	{"flipped-bit", func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[deltaHeaderLen+3] ^= 0x10
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}},
	{"truncated", func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}},
	{"deleted", func(t *testing.T, path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}},
}

func TestOpen_DamagedOrMissingNewestDeltaFallsBackLosingNothing(t *testing.T) {
	for _, damage := range deltaDamages {
		t.Run(damage.name, func(t *testing.T) {
			opts := deltaTestOpts()
			dir, state, ds := deltaChainStore(t, opts)
			newest := ds[1]
			damage.do(t, filepath.Join(dir, newest.name))
			var logs logBuffer
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			db := openT(t, dir, opts)
			sameState(t, "fallen back to the first delta", scanAll(t, db), state)
			if got := db.Stats().Recovery.FromCheckpoint; got != ds[0].v {
				t.Fatalf("recovered from %d, want the first delta %d", got, ds[0].v)
			}
			if !strings.Contains(logs.String(), genName(newest.v)) {
				t.Errorf("the warning does not name %s:\n%s", newest.name, logs.String())
			}
			apply(t, db, new(store.Batch).Put([]byte("after"), []byte("x")))
			checkpointAndReopen(t, db, dir, opts, scanAll(t, db))
		})
	}
}

// TestOpen_DamagedOlderDeltaFallsBackToTheBaseAndTheLog: the log is kept
// from the base on, so a damaged delta that later links stand on costs a
// longer replay, not a write.
func TestOpen_DamagedOlderDeltaFallsBackToTheBaseAndTheLog(t *testing.T) {
	for _, damage := range deltaDamages {
		t.Run(damage.name, func(t *testing.T) {
			opts := deltaTestOpts()
			dir, state, ds := deltaChainStore(t, opts)
			damage.do(t, filepath.Join(dir, ds[0].name))
			db := openT(t, dir, opts)
			defer db.Close()
			sameState(t, "fallen back to the base", scanAll(t, db), state)
			if got := db.Stats().Recovery.FromCheckpoint; got != generationsT(t, dir)[0].v0 {
				t.Fatalf("recovered from %d, want the base", got)
			}
		})
	}
}

// A delta that fails (a full disk) gives its keys back: the next delta,
// once space is back, holds the writes of both intervals.
func TestCheckpoint_AFailedDeltaKeepsItsKeysForTheNext(t *testing.T) {
	disk := newMemDisk()
	efs := errorfs.Wrap(disk.FS())
	opts := deltaTestOpts()
	opts.FS = efs
	db := openT(t, memDataDir, opts)
	fillStore(t, db, 200)
	checkpointT(t, db)
	apply(t, db, new(store.Batch).Put([]byte("first-interval"), []byte("1")).Delete([]byte("k007")))
	efs.Add(errorfs.Rule{Op: errorfs.OpWrite, PathContains: deltaSuffix + ckptTmpSuffix, Err: errorfs.ENOSPC, Sticky: true})
	if err := db.Checkpoint(); !errors.Is(err, errorfs.ENOSPC) {
		t.Fatalf("delta on a full disk: %v, want ENOSPC", err)
	}
	efs.Clear()
	apply(t, db, new(store.Batch).Put([]byte("second-interval"), []byte("2")))
	checkpointT(t, db)
	state := scanAll(t, db)
	if _, ok := state["k007"]; ok {
		t.Fatal("k007 was deleted")
	}
	// Truncation ran: only the chain holds the first interval's writes now.
	db = reopenT(t, db, memDataDir, opts)
	defer db.Close()
	if db.Stats().Recovery.ReplayedEntries != 1 {
		t.Fatalf("recovery %+v, want it from the delta", db.Stats().Recovery)
	}
	sameState(t, "after a failed delta and the next", scanAll(t, db), state)
}

// Past its bound the dirty set is dropped: the next checkpoint is a full
// one, and exact.
func TestCheckpoint_AnOverflowingDirtySetMakesTheNextOneFull(t *testing.T) {
	dir := t.TempDir()
	opts := deltaTestOpts()
	db := openT(t, dir, opts)
	fillStore(t, db, 100)
	checkpointT(t, db)
	first := db.Stats().Checkpoint
	db.treeMu.Lock()
	db.dirty.max = 256
	db.treeMu.Unlock()
	fillStore(t, db, 50)
	db.treeMu.RLock()
	lost := db.dirty.lost
	db.treeMu.RUnlock()
	if !lost {
		t.Fatal("50 writes did not overflow a 256-byte dirty set")
	}
	checkpointT(t, db)
	if gens := generationsT(t, dir); gens[0].v0 == first || len(deltasT(t, dir)) != 0 {
		t.Fatalf("after an overflow: generations %+v, deltas %+v; want a new base", gens, deltasT(t, dir))
	}
	db.treeMu.Lock()
	db.dirty.max = dirtyBytesMax
	db.treeMu.Unlock()
	apply(t, db, new(store.Batch).Put([]byte("k001"), []byte("after")))
	checkpointT(t, db)
	if len(deltasT(t, dir)) != 1 {
		t.Fatal("no delta on the new base")
	}
	state := scanAll(t, db)
	db = reopenT(t, db, dir, opts)
	defer db.Close()
	sameState(t, "after an overflow", scanAll(t, db), state)
}

// An older delta lost while the log still reaches back past it (the log is
// cut by whole segments, so it may): the open serves, from the links before
// it and the log, with nothing lost.
func TestOpen_ALostOlderDeltaTheLogStillCoversLosesNothing(t *testing.T) {
	opts := deltaTestOpts()
	opts.WAL = wal.Options{} // default segments: truncation cuts nothing here
	dir, state, ds := deltaChainStore(t, opts)
	if err := os.Remove(filepath.Join(dir, ds[0].name)); err != nil {
		t.Fatal(err)
	}
	db := openT(t, dir, opts)
	defer db.Close()
	sameState(t, "the first delta lost, the log covering it", scanAll(t, db), state)
	if got := db.Stats().Recovery.FromCheckpoint; got >= ds[0].v {
		t.Fatalf("recovered from %d: the chain should stop before the lost delta %d", got, ds[0].v)
	}
}
