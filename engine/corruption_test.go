package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Damaged files on open: what the torn-tail repair may cut is cut (keeping
// the cut bytes), a damaged or missing checkpoint falls back to the
// previous one and the log kept from it, and anything else refuses the open
// with a typed corruption error that names the file — never a silent open
// with data missing.

// fillStore writes n acknowledged single-key batches k000.. and returns
// the resulting state.
func fillStore(t *testing.T, db *DB, n int) map[string]store.Item {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("k%03d", i%200))
		if _, err := db.Apply(ctx, new(store.Batch).Put(k, []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%40))))); err != nil {
			t.Fatal(err)
		}
	}
	return scanAll(t, db)
}

func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if len(e.Name()) == 20 {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// generationsT lists the checkpoints in dir, newest first.
func generationsT(t *testing.T, dir string) []generation {
	t.Helper()
	gens, err := listGenerations(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return gens
}

// wantCorruption asserts err is a typed engine corruption error and returns
// the WAL's account of it, if it came from the log.
func wantCorruption(t *testing.T, err error) *wal.CorruptionError {
	t.Helper()
	var ce *store.CorruptionError
	if !errors.Is(err, store.ErrCorruption) || !errors.As(err, &ce) {
		t.Fatalf("open: %v, want an engine corruption error", err)
	}
	var we *wal.CorruptionError
	if errors.As(err, &we) && !errors.Is(err, wal.ErrCorruption) {
		t.Fatalf("%v: wal cause not matched by wal.ErrCorruption", err)
	}
	return we
}

// logBuffer captures a store's log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ckptTestOpts make checkpoints of several parts and a log of several
// segments.
func ckptTestOpts() Options {
	return quiet(Options{CheckpointLogBytes: -1, CheckpointDeltasMax: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 1024}})
}

// twoCheckpointStore leaves a closed store with two checkpoints whose log
// was truncated before the older one: the newest checkpoint covers
// entries the log no longer has, the older one and the log after it
// cover everything.
func twoCheckpointStore(t *testing.T) (dir string, opts Options, state map[string]store.Item, gens []generation) {
	t.Helper()
	dir = t.TempDir()
	opts = ckptTestOpts()
	db := openT(t, dir, opts)
	for range 3 {
		fillStore(t, db, 150)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	state = fillStore(t, db, 20)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := walSegments(t, dir); len(segs) == 0 || segs[0] == fmt.Sprintf("%020d", 1) {
		t.Fatalf("checkpoints did not truncate the log (segments %v)", segs)
	}
	gens = generationsT(t, dir)
	if len(gens) != 2 || !gens[0].complete() || !gens[1].complete() || len(gens[0].parts) < 3 {
		t.Fatalf("checkpoints %+v, want the newest two, complete, of several parts", gens)
	}
	return dir, opts, state, gens
}

// damages are what can happen to a checkpoint's files.
var damages = []struct {
	name string
	do   func(t *testing.T, dir string, g generation)
}{
	{"deleted", func(t *testing.T, dir string, g generation) {
		for _, p := range g.parts {
			if err := os.Remove(filepath.Join(dir, p.name)); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"last-part-deleted", func(t *testing.T, dir string, g generation) {
		if err := os.Remove(filepath.Join(dir, g.parts[len(g.parts)-1].name)); err != nil {
			t.Fatal(err)
		}
	}},
	{"part-cut-to-half", func(t *testing.T, dir string, g generation) {
		p := filepath.Join(dir, g.parts[len(g.parts)/2].name)
		fi, _ := os.Stat(p)
		if err := os.Truncate(p, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}},
	{"trailer-missing", func(t *testing.T, dir string, g generation) {
		p := filepath.Join(dir, g.parts[len(g.parts)-1].name)
		fi, _ := os.Stat(p)
		if err := os.Truncate(p, fi.Size()-partTrailerLen); err != nil {
			t.Fatal(err)
		}
	}},
	{"flipped-bit", func(t *testing.T, dir string, g generation) {
		p := filepath.Join(dir, g.parts[0].name)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 1
		os.WriteFile(p, b, 0o640)
	}},
	{"wrong-name", func(t *testing.T, dir string, g generation) {
		p := g.parts[0]
		if err := os.Rename(filepath.Join(dir, p.name), filepath.Join(dir, partName(p.v0+1, p.seq))); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestOpen_DamagedOrMissingNewestCheckpointFallsBackLosingNothing: the
// previous checkpoint and the log from it on were kept, so recovery from
// them loses nothing; the warning names both files.
func TestOpen_DamagedOrMissingNewestCheckpointFallsBackLosingNothing(t *testing.T) {
	for _, damage := range damages {
		t.Run(damage.name, func(t *testing.T) {
			dir, opts, state, gens := twoCheckpointStore(t)
			newest, older := gens[0], gens[1]
			damage.do(t, dir, newest)
			var logs logBuffer
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			db := openT(t, dir, opts)
			sameState(t, "fallen back", scanAll(t, db), state)
			for _, name := range []string{genName(newest.v0), genName(older.v0)} {
				if !strings.Contains(logs.String(), name) {
					t.Errorf("the warning does not name %s:\n%s", name, logs.String())
				}
			}
			// The next checkpoint supersedes the damaged one, and a reopen
			// uses it.
			if _, err := db.Apply(context.Background(), new(store.Batch).Put([]byte("after"), []byte("x"))); err != nil {
				t.Fatal(err)
			}
			state = scanAll(t, db)
			checkpointAndReopen(t, db, dir, opts, state)
		})
	}
}

func TestOpen_BothCheckpointsDamagedIsRefusedNamingThem(t *testing.T) {
	for _, damage := range damages {
		t.Run(damage.name, func(t *testing.T) {
			dir, opts, _, gens := twoCheckpointStore(t)
			for _, g := range gens {
				damage.do(t, dir, g)
			}
			before := dirListing(t, dir)
			_, err := Open(dir, opts)
			wantCorruption(t, err)
			for _, g := range gens {
				if !strings.Contains(err.Error(), genName(g.v0)) {
					t.Errorf("the error does not name %s: %v", genName(g.v0), err)
				}
			}
			if !strings.Contains(err.Error(), "checkpoint") || !strings.Contains(err.Error(), "backup") {
				t.Errorf("the error does not say what is missing and what to do: %v", err)
			}
			if after := dirListing(t, dir); !slices.Equal(after, before) {
				t.Fatalf("refusing to open changed the data dir:\n%v\n%v", before, after)
			}
		})
	}
}

// checkpointAndReopen checks that a new checkpoint supersedes whatever
// recovery fell back from: closed and reopened, db holds state.
func checkpointAndReopen(t *testing.T, db *DB, dir string, opts Options, state map[string]store.Item) {
	t.Helper()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "after a new checkpoint", scanAll(t, db), state)
}

// dirListing lists every file under dir with its size.
func dirListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			out = append(out, fmt.Sprintf("%s %d", strings.TrimPrefix(p, dir), fi.Size()))
		}
		return nil
	})
	return out
}

// TestCheckpoint_KeepsThePreviousCheckpointAndTheLogFromIt: whatever the
// number of checkpoints, two are kept, and the log from the older on.
func TestCheckpoint_KeepsThePreviousCheckpointAndTheLogFromIt(t *testing.T) {
	dir := t.TempDir()
	opts := ckptTestOpts()
	db := openT(t, dir, opts)
	defer db.Close()
	var idx []store.Version
	for range 5 {
		fillStore(t, db, 120)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, db.Stats().Checkpoint)
		gens := generationsT(t, dir)
		if len(idx) >= 2 && len(gens) != 2 {
			t.Fatalf("after %d checkpoints: %+v, want the newest two", len(idx), gens)
		}
		for _, g := range gens {
			if !g.complete() {
				t.Fatalf("checkpoint %s is incomplete after Checkpoint returned", genName(g.v0))
			}
		}
		if len(idx) >= 2 {
			prev := idx[len(idx)-2]
			if first := db.log.FirstIndex(); first > uint64(prev)+1 {
				t.Fatalf("the log starts at %d, after the previous checkpoint %d", first, prev)
			}
			if gens[1].v0 != prev || gens[0].v0 != idx[len(idx)-1] {
				t.Fatalf("checkpoints kept are %s and %s, want %s and %s", genName(gens[0].v0), genName(gens[1].v0), genName(idx[len(idx)-1]), genName(prev))
			}
		}
	}
}

// With the log still whole (no segment ever cut), a damaged only
// checkpoint is moved aside and the log replayed from the start.
func TestOpen_DamagedOnlyCheckpointIsSkippedWhileTheLogCoversIt(t *testing.T) {
	for _, damage := range damages {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := ckptTestOpts()
			opts.WAL = wal.Options{} // default segments: the log keeps everything
			db := openT(t, dir, opts)
			fillStore(t, db, 150)
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			state := fillStore(t, db, 30)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damage.do(t, dir, generationsT(t, dir)[0])
			db = openT(t, dir, opts)
			sameState(t, "damaged checkpoint skipped", scanAll(t, db), state)
			if db.Stats().Recovery.FromCheckpoint != 0 {
				t.Fatalf("recovered from checkpoint %d, want the whole log", db.Stats().Recovery.FromCheckpoint)
			}
			checkpointAndReopen(t, db, dir, opts, state)
		})
	}
}

// A checkpoint that fails (a full disk) removes its temp file, changes
// nothing else, and the store keeps serving; the next one succeeds.
func TestCheckpoint_AFailedCheckpointRemovesItsTempFile(t *testing.T) {
	disk := newMemDisk()
	efs := errorfs.Wrap(disk.FS())
	o := quiet(Options{CheckpointLogBytes: -1, FS: efs})
	db := openT(t, memDataDir, o)
	defer db.Close()
	fillStore(t, db, 300)
	efs.Add(errorfs.Rule{Op: errorfs.OpWrite, PathContains: ckptTmpSuffix, Err: errorfs.ENOSPC, Sticky: true})
	if err := db.Checkpoint(); !errors.Is(err, errorfs.ENOSPC) {
		t.Fatalf("checkpoint on a full disk: %v, want ENOSPC", err)
	}
	ents, err := disk.FS().ReadDir(memDataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ckptTmpSuffix) || strings.HasSuffix(e.Name(), ckptSuffix) {
			t.Fatalf("failed checkpoint left %s", e.Name())
		}
	}
	state := fillStore(t, db, 10)
	efs.Clear()
	if err := db.Checkpoint(); err != nil {
		t.Fatalf("checkpoint once space is back: %v", err)
	}
	sameState(t, "after the failed checkpoint", scanAll(t, db), state)
}

// A checkpoint interrupted before its rename leaves ckpt-*.tmp: Open
// removes it and recovers from the log, which was not truncated.
func TestOpen_LeftoverCheckpointTmpIsRemoved(t *testing.T) {
	ctx := context.Background()
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024}}
	efs := errorfs.Wrap(disk.FS())
	o := quiet(opts)
	o.FS = efs
	db := openT(t, memDataDir, o)
	fillStore(t, db, 100)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	fillStore(t, db, 150)
	// The process dies between the temp file's fsync and its rename: the
	// rename never happens, and neither does the clean-up.
	efs.Add(errorfs.Rule{Op: errorfs.OpRename, PathContains: ckptTmpSuffix, Err: errorfs.EIO})
	efs.Add(errorfs.Rule{Op: errorfs.OpRemove, PathContains: ckptTmpSuffix, Err: errorfs.EIO})
	if err := db.Checkpoint(); !errors.Is(err, errorfs.EIO) {
		t.Fatalf("checkpoint: %v, want the failed rename", err)
	}
	efs.Clear()
	if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("last"), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	state := scanAll(t, db)
	// The temp file's directory entry was never synced: sync it so that
	// the crash keeps it (half-written, as a power loss may), and add an
	// unrelated stray temp file.
	fs := disk.FS()
	if err := vfs.SyncDir(fs, memDataDir); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileSynced(fs, filepath.Join(memDataDir, ckptPrefix+"junk"+ckptTmpSuffix), []byte("junk"), 0o640); err != nil {
		t.Fatal(err)
	}
	disk.Crash(db, memfs.KeepUnsynced(100))
	tmps := 0
	ents, _ := disk.FS().ReadDir(memDataDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ckptTmpSuffix) {
			tmps++
		}
	}
	if tmps != 2 {
		t.Fatalf("the crash left %d temp checkpoints, want 2", tmps)
	}
	db = disk.open(t, opts)
	defer db.Close()
	ents, _ = disk.FS().ReadDir(memDataDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ckptTmpSuffix) {
			t.Fatalf("temp checkpoint %s left after open", e.Name())
		}
	}
	sameState(t, "after the interrupted checkpoint", scanAll(t, db), state)
}

// A group whose fsync failed is cut mid-frame by the power loss: the open
// repairs the tail (keeping the cut bytes) and every acknowledged batch is
// intact.
func TestOpen_TornTailIsRepaired(t *testing.T) {
	ctx := context.Background()
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1 << 20}}
	db := disk.open(t, opts)
	state := fillStore(t, db, 50)
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("crash")`)
	big := []byte(strings.Repeat("z", 2000))
	if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("torn/a"), big).Put([]byte("torn/b"), big)); !errors.Is(err, store.ErrAmbiguous) {
		t.Fatalf("Apply: %v, want ErrAmbiguous", err)
	}
	disarm()
	unsynced := 0
	disk.Crash(db, func(_ string, _ int64, b []byte) []byte {
		unsynced = len(b)
		return b[:len(b)/2]
	})
	if unsynced < 4000 {
		t.Fatalf("unsynced region of %d bytes, want the whole frame", unsynced)
	}
	db = disk.open(t, opts)
	defer db.Close()
	sameState(t, "after repair", scanAll(t, db), state)
	ents, _ := disk.FS().ReadDir(filepath.Join(memDataDir, walDirName))
	var torn []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".torn-") {
			torn = append(torn, e.Name())
			if fi, _ := e.Info(); fi.Size() != int64(unsynced/2) {
				t.Fatalf("kept %d cut bytes, want the %d torn ones", fi.Size(), unsynced/2)
			}
		}
	}
	if len(torn) != 1 {
		t.Fatalf("want the cut bytes kept once, have %v", torn)
	}
	if _, err := db.Apply(ctx, new(store.Batch).Absent([]byte("torn/a")).Put([]byte("torn/a"), []byte("ok"))); err != nil {
		t.Fatalf("Apply after repair: %v", err)
	}
}

// A flipped bit in a segment that is not the last refuses the open with a
// corruption error naming segment and entry.
func TestOpen_FlippedBitMidLogIsCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024}})
	db := openT(t, dir, opts)
	fillStore(t, db, 100)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs := walSegments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("want ≥ 3 segments, have %v", segs)
	}
	path := filepath.Join(dir, walDirName, segs[1])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second entry of the segment: skip the first (uvarint length +
	// frame), then flip a bit in the middle of the second frame.
	n1, k1 := binary.Uvarint(data)
	off := k1 + int(n1)
	n2, k2 := binary.Uvarint(data[off:])
	data[off+k2+int(n2)/2] ^= 0x04
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}

	_, err = Open(dir, opts)
	we := wantCorruption(t, err)
	first, err2 := strconv.ParseUint(segs[1], 10, 64)
	if err2 != nil {
		t.Fatal(err2)
	}
	if we == nil || we.Segment != segs[1] || we.Index != first+1 || we.Offset != int64(off) {
		t.Fatalf("corruption %+v, want segment %s entry %d offset %d", we, segs[1], first+1, off)
	}
	if !strings.Contains(err.Error(), segs[1]) {
		t.Fatalf("error %q does not name the segment", err)
	}
}
