package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Merges (merge.go) and what they promise: the log a restart replays is
// bounded by CheckpointLogBytes however large the store grows and however
// often the process dies, and no single file's loss or damage costs an
// acknowledged write.

// TestOpen_AGrowingStoreReplaysAtMostTwoIntervalsAtEveryOpen: a store that
// only grows — every life adds new keys, less than an interval of them —
// is killed at the end of every life, whatever its checkpointer and merger
// were doing. No open replays more than two intervals and a segment
// (plus the one life's writes the crash cut off from a checkpoint), though
// the store ends many times larger than an interval; every acknowledged
// write is there at every open, and the log kept on disk stays bounded by
// the merge rule (the store's size), not by the number of lives.
func TestOpen_AGrowingStoreReplaysAtMostTwoIntervalsAtEveryOpen(t *testing.T) {
	const (
		interval = 16 << 10
		segment  = 4 << 10
		lives    = 60
		perLife  = 12 // batches of ~520 bytes: ~6 KiB per life, all new keys
	)
	opts := Options{CheckpointLogBytes: interval, CheckpointPartBytes: 8 << 10, WAL: wal.Options{SegmentBytes: segment},
		ColdValue: testCold, ValueLogSegmentBytes: 8 << 10}
	disk := newMemDisk()
	ctx := context.Background()
	want := map[string]string{}
	maxReplayed, maxLog := int64(0), int64(0)
	for life := range lives {
		db, err := disk.reopen(opts)
		if err != nil {
			t.Fatalf("life %d: open: %v", life, err)
		}
		rec := db.Stats().Recovery
		maxReplayed = max(maxReplayed, rec.ReplayedBytes)
		if limit := int64(2*interval + segment + perLife*600); rec.ReplayedBytes > limit {
			t.Fatalf("life %d: the open replayed %d bytes, more than two intervals, a segment and a life (%d)", life, rec.ReplayedBytes, limit)
		}
		logBytes := walDiskBytes(disk.FS(), filepath.Join(memDataDir, walDirName))
		maxLog = max(maxLog, logBytes)
		db.treeMu.RLock()
		live := db.liveBytes
		db.treeMu.RUnlock()
		if limit := 2*max(live, interval) + 2*interval + 4*segment; logBytes > limit {
			t.Fatalf("life %d: %d bytes of log on disk with %d of live data, want at most %d", life, logBytes, live, limit)
		}
		for k, v := range want {
			it, err := db.Get(ctx, []byte(k))
			if err != nil || string(it.Value) != v {
				t.Fatalf("life %d: %q = %q, %v; want %q", life, k, it.Value, err, v)
			}
		}
		if rec.ReplayedBytes >= interval {
			// The open asked for a checkpoint: let it finish, as a process
			// that lives a few seconds would (a merge may be cut short).
			testsupport.Poll(t, "the checkpoint after a long replay", testsupport.Patience, func() bool { return db.Stats().Checkpoint > rec.FromCheckpoint })
		}
		for i := range perLife {
			k, v := fmt.Sprintf("k%03d-%02d", life, i), strings.Repeat(string(rune('a'+life%26)), 500+i%2)
			if _, err := db.Apply(ctx, new(store.Batch).Put([]byte(k), []byte(v))); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		disk.Crash(db, memfs.DropUnsynced)
	}
	db, err := disk.reopen(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Stats()
	if st.Keys != len(want) || st.Keys*500 < 20*interval {
		t.Fatalf("%d keys, want %d, many intervals of them", st.Keys, len(want))
	}
	t.Logf("%d keys; max replayed %d bytes (interval %d); max log on disk %d", st.Keys, maxReplayed, interval, maxLog)
}

// fileDamages are the two ways a file is lost: gone, or cut in half.
var fileDamages = []struct {
	name string
	do   func(path string) error
}{
	{"deleted", os.Remove},
	{"cut-in-half", func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, fi.Size()/2)
	}},
}

// lossStore leaves a closed store in a temp dir whose files are of every
// kind at once: a merged base and the base before it (the fallback), the
// deltas on both, value-log segments, and log segments, the newest beyond
// the chain's tip. It returns the acknowledged state.
func lossStore(t *testing.T, opts Options) (string, map[string]store.Item) {
	t.Helper()
	dir := t.TempDir()
	db := openT(t, dir, opts)
	ctx := context.Background()
	round := 0
	put := func(n int, fresh bool) {
		for i := range n {
			k := fmt.Sprintf("k%03d", i%80)
			if fresh {
				k = fmt.Sprintf("n%02d-%03d", round, i)
			}
			if _, err := db.Apply(ctx, new(store.Batch).Put([]byte(k), fmt.Appendf(nil, "%s@%d%s", k, round, strings.Repeat("v", 24+i%3)))); err != nil {
				t.Fatal(err)
			}
		}
		round++
	}
	put(80, false)
	checkpointT(t, db)                          // the first base
	for i := 0; db.merges.merging == nil; i++ { // deltas until the chain is due for a merge
		if i == 10 {
			t.Fatal("no merge due after 10 deltas")
		}
		put(30, false)
		put(10, true)
		checkpointT(t, db)
	}
	if err := db.merges.mergeAll(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		put(30, false)
		put(10, true)
		checkpointT(t, db)
	}
	put(20, false) // the log's tail after the tip
	if _, err := db.Apply(ctx, new(store.Batch).Delete([]byte("k007"))); err != nil {
		t.Fatal(err)
	}
	if db.Stats().Checkpoints.Merges == 0 || db.fallback == nil || len(db.chain.deltas) == 0 {
		t.Fatalf("the store has %d merges, fallback %v, %d deltas: want a merged base with deltas and a fallback",
			db.Stats().Checkpoints.Merges, db.fallback != nil, len(db.chain.deltas))
	}
	state := scanAll(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, state
}

// TestOpen_EveryFileLostOrCutLeavesEveryWrite: for every file of a data
// dir in turn, deleting it or cutting it in half leaves a store that
// opens with every acknowledged write — checkpoint parts, deltas and log
// segments alike — except where the design says no copy exists: a value
// in a lost value-log segment reads as ErrCorruption (never another
// value), and a lost log segment after the chain's tip, or the newest one
// cut, loses the writes only it held (a WAL keeps one copy; an open that
// notices the gap refuses, naming the log).
func TestOpen_EveryFileLostOrCutLeavesEveryWrite(t *testing.T) {
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 2 << 10},
		ColdValue: testCold, ValueLogSegmentBytes: 2 << 10})
	src, state := lossStore(t, opts)
	var files []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != lockFileName {
			rel, _ := filepath.Rel(src, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		kinds[fileKind(f)]++
	}
	for _, k := range []string{"part", "delta", "vlog", "wal"} {
		if kinds[k] == 0 {
			t.Fatalf("the store has no %s file: %v", k, files)
		}
	}
	for _, f := range files {
		for _, damage := range fileDamages {
			t.Run(f+"/"+damage.name, func(t *testing.T) {
				dir := t.TempDir()
				copyDirT(t, src, dir)
				if err := damage.do(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
				db, err := Open(dir, opts)
				if err != nil {
					if fileKind(f) != "wal" || !errors.Is(err, store.ErrCorruption) || !strings.Contains(err.Error(), walDirName) {
						t.Fatalf("open after %s %s: %v", f, damage.name, err)
					}
					t.Logf("refused, as the design says for a log segment: %v", err)
					return
				}
				defer db.Close()
				checkAfterLoss(t, db, f, state)
			})
		}
	}
	t.Logf("files by kind: %v", kinds)
}

// checkAfterLoss checks the store against the acknowledged state after
// the loss of file f, allowing what the design cannot keep (see
// TestOpen_EveryFileLostOrCutLeavesEveryWrite).
func checkAfterLoss(t *testing.T, db *DB, f string, state map[string]store.Item) {
	t.Helper()
	ctx := context.Background()
	lost := 0
	for k, w := range state {
		got, err := db.Get(ctx, []byte(k))
		switch {
		case err == nil && string(got.Value) == string(w.Value) && got.Version == w.Version:
		case fileKind(f) == "vlog" && errors.Is(err, store.ErrCorruption):
			lost++
		case fileKind(f) == "wal" && w.Version > db.Stats().Recovery.FromCheckpoint && (err == nil || errors.Is(err, store.ErrNotFound)) &&
			(err != nil || got.Version < w.Version):
			lost++ // only the lost segment held it
		default:
			t.Fatalf("%q = %q@%d, %v; want %q@%d", k, got.Value, got.Version, err, w.Value, w.Version)
		}
	}
	if lost > 0 {
		t.Logf("%d values had no copy but %s", lost, f)
	}
	if fileKind(f) == "vlog" {
		return // a scan reads the values
	}
	items, err := db.Scan(ctx, nil, nil, store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if _, ok := state[string(it.Key)]; !ok {
			t.Fatalf("unexpected key %q", it.Key)
		}
	}
}

func fileKind(rel string) string {
	switch {
	case strings.HasPrefix(rel, walDirName+string(filepath.Separator)):
		return "wal"
	case strings.HasSuffix(rel, deltaSuffix):
		return "delta"
	case strings.HasSuffix(rel, ckptSuffix):
		return "part"
	default:
		return "vlog"
	}
}

func copyDirT(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o750)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpen_TwoLostBasesAreRefusedNamingThem: past the bound — the merged
// base and the fallback both gone — the open refuses, names what it
// tried, and changes nothing.
func TestOpen_TwoLostBasesAreRefusedNamingThem(t *testing.T) {
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 2 << 10},
		ColdValue: testCold, ValueLogSegmentBytes: 2 << 10})
	dir, _ := lossStore(t, opts)
	gens := generationsT(t, dir)
	if len(gens) != 2 {
		t.Fatalf("generations %+v, want the merged base and the fallback", gens)
	}
	for _, g := range gens {
		if err := os.Remove(filepath.Join(dir, g.parts[0].name)); err != nil {
			t.Fatal(err)
		}
	}
	before := dirListing(t, dir)
	_, err := Open(dir, opts)
	wantCorruption(t, err)
	if !strings.Contains(err.Error(), genName(gens[0].v0)) || !strings.Contains(err.Error(), "backup") {
		t.Errorf("the error does not name %s or say what to do: %v", genName(gens[0].v0), err)
	}
	if after := dirListing(t, dir); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("refusing to open changed the data dir:\n%v\n%v", before, after)
	}
}

// TestMerge_ACrashMidMergeIsResumedFromItsParts: a merge cut short by a
// crash keeps its durable parts; the next process resumes after them —
// while deltas go on — and links the base the crash interrupted.
func TestMerge_ACrashMidMergeIsResumedFromItsParts(t *testing.T) {
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, CheckpointPartBytes: 1 << 10, CheckpointDeltasMax: 2, WAL: wal.Options{SegmentBytes: 4 << 10}}
	efs := errorfs.Wrap(disk.FS())
	o := disk.opts(opts)
	o.FS = efs
	db := openT(t, memDataDir, o)
	fillStore(t, db, 200)
	checkpointT(t, db)
	for range 2 {
		fillStore(t, db, 40)
		checkpointT(t, db)
	}
	if db.merges.merging == nil {
		t.Fatal("no merge due after CheckpointDeltasMax deltas")
	}
	at := db.merges.merging.v0
	// The merge's third part fails: two are durable, then the power goes.
	efs.Add(errorfs.Rule{Op: errorfs.OpRename, PathContains: genName(at), Nth: 3, Err: errorfs.EIO})
	if err := db.merges.mergeAll(); !errors.Is(err, errorfs.EIO) {
		t.Fatalf("merge whose third part fails: %v", err)
	}
	state := fillStore(t, db, 40)
	disk.Crash(db, memfs.DropUnsynced)

	db = disk.open(t, opts)
	sameState(t, "after the crash", scanAll(t, db), state)
	if db.merges.merging == nil || db.merges.merging.v0 != at || len(db.merges.merging.parts) != 2 {
		t.Fatalf("the open does not resume the merge at %d after its two parts: %+v", at, db.merges.merging)
	}
	checkpointT(t, db) // a delta while the merge is pending
	if err := db.merges.mergeAll(); err != nil {
		t.Fatal(err)
	}
	if db.chain.base.v0 != at || len(db.chain.deltas) != 1 {
		t.Fatalf("after resuming: base %d with %d deltas, want the merge at %d and the delta after it", db.chain.base.v0, len(db.chain.deltas), at)
	}
	state = scanAll(t, db)
	disk.Crash(db, memfs.DropUnsynced)
	db = disk.open(t, opts)
	defer db.Close()
	sameState(t, "from the resumed merge", scanAll(t, db), state)
}

// TestMerge_AFailedStepLosesNothingAndIsRetried: a merge that fails at any
// of its durable steps — a part's write, sync, rename or directory sync,
// its link, the log's truncation after it — is reported, loses nothing,
// and the next merge completes.
func TestMerge_AFailedStepLosesNothingAndIsRetried(t *testing.T) {
	testsupport.RequireFailpoints(t)
	for _, name := range []string{fault.CkptWriteBefore, fault.CkptSyncBefore, fault.CkptRenameBefore, fault.CkptDirSyncBefore,
		fault.CkptMergeLinkBefore, fault.CkptMergeTruncateBefore} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := quiet(Options{CheckpointLogBytes: -1, CheckpointPartBytes: 1 << 10, CheckpointDeltasMax: 1,
				WAL: wal.Options{SegmentBytes: 1 << 10}})
			db := openT(t, dir, opts)
			fillStore(t, db, 100)
			checkpointT(t, db)
			fillStore(t, db, 30)
			checkpointT(t, db)
			disarm := testsupport.Arm(t, name, `return("eio")`)
			if err := db.merges.mergeAll(); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("merge with %s armed: %v, want the injected error", name, err)
			}
			disarm()
			fillStore(t, db, 30)
			checkpointT(t, db)
			if err := db.merges.mergeAll(); err != nil {
				t.Fatal(err)
			}
			if db.Stats().Checkpoints.Merges == 0 {
				t.Fatal("no merge completed after the failure")
			}
			state := scanAll(t, db)
			db = reopenT(t, db, dir, opts)
			defer db.Close()
			sameState(t, "after a failed merge and a good one", scanAll(t, db), state)
		})
	}
}

// TestCheck_ALostMergedBaseIsDamageAnOpenStepsAround: the check names a
// merged base that is gone, and says the open loads the chain it replaced;
// the open then serves every write.
func TestCheck_ALostMergedBaseIsDamageAnOpenStepsAround(t *testing.T) {
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 2 << 10},
		ColdValue: testCold, ValueLogSegmentBytes: 2 << 10})
	dir, state := lossStore(t, opts)
	merged := generationsT(t, dir)[0]
	for _, p := range merged.parts {
		if err := os.Remove(filepath.Join(dir, p.name)); err != nil {
			t.Fatal(err)
		}
	}
	loaded, problems := checkDirT(t, dir)
	found := false
	for _, p := range damageOf(problems) {
		found = found || strings.Contains(p.File, genName(merged.v0)) && strings.Contains(p.Detail, "losing nothing")
	}
	if !found || !loaded {
		t.Fatalf("the check does not name the lost base %s: %+v", genName(merged.v0), problems)
	}
	db := openT(t, dir, opts)
	defer db.Close()
	sameState(t, "without the merged base", scanAll(t, db), state)
}

// TestOpen_ALostMergedBaseNoDeltaNamesIsWarnedAbout: a merged base lost
// before any delta was written on it leaves no file that names it; the
// log's record of the merge does, and the open says it fell back.
func TestOpen_ALostMergedBaseNoDeltaNamesIsWarnedAbout(t *testing.T) {
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointDeltasMax: 1, WAL: wal.Options{SegmentBytes: 1 << 10}})
	db := openT(t, dir, opts)
	fillStore(t, db, 100)
	checkpointT(t, db)
	fillStore(t, db, 30)
	checkpointT(t, db)
	if err := db.merges.mergeAll(); err != nil {
		t.Fatal(err)
	}
	merged := db.chain.base
	state := fillStore(t, db, 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range merged.parts {
		if err := os.Remove(filepath.Join(dir, p.name)); err != nil {
			t.Fatal(err)
		}
	}
	var logs logBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "without the merged base", scanAll(t, db), state)
	if !strings.Contains(logs.String(), genName(merged.v0)) || !strings.Contains(logs.String(), "missing or damaged") {
		t.Fatalf("the open does not say the merged base %s is gone:\n%s", genName(merged.v0), logs.String())
	}
}

// TestOpen_ReadsAChainWrittenBeforeMerges: a data dir written by the
// version before merges (testdata/v5-chain-dir: a base, three deltas on
// it, the log truncated before the newest link, value-log segments) opens
// with every key as it was. Its base is then the store's one copy of the
// oldest writes, as it was for that version; once the first merge is
// linked, losing the merged base costs nothing: the old chain stands in.
func TestOpen_ReadsAChainWrittenBeforeMerges(t *testing.T) {
	dir, state := copyFixture(t, "testdata/v5-chain-dir")
	check := func(what string, db *DB) { t.Helper(); checkState(t, what, db, state) }
	opts := quiet(Options{CheckpointLogBytes: -1, CheckpointDeltasMax: 4,
		ColdValue: func(k, _ []byte) bool { return strings.HasPrefix(string(k), "c") }})
	db := openT(t, dir, opts)
	oldBase := db.chain.base
	if len(db.chain.deltas) != 3 || db.Stats().Recovery.FromCheckpoint != db.chain.tip() {
		t.Fatalf("loaded base %d with %d deltas, from %d", oldBase.v0, len(db.chain.deltas), db.Stats().Recovery.FromCheckpoint)
	}
	check("as written before merges", db)
	putT(t, db, "k999", "new")
	state["k999"] = fmt.Sprintf("%d new", db.Stats().Applied)
	checkpointT(t, db) // the fourth delta: a merge is due
	if err := db.merges.mergeAll(); err != nil {
		t.Fatal(err)
	}
	merged := db.chain.base
	if merged.v0 == oldBase.v0 {
		t.Fatal("no merge into a new base")
	}
	check("after the first merge", db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range merged.parts {
		if err := os.Remove(filepath.Join(dir, p.name)); err != nil {
			t.Fatal(err)
		}
	}
	db = openT(t, dir, opts)
	defer db.Close()
	check("without the merged base", db)
}
