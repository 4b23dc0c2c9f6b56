package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/wal"
)

// Damaged files on open: what the torn-tail repair may cut is cut (with a
// .broken copy), a damaged checkpoint is skipped when the log still covers
// it, and anything else refuses the open with a typed corruption error that
// names the file — never a silent open with data missing.

// fillStore writes n acknowledged single-key batches k000.. and returns
// the resulting state.
func fillStore(t *testing.T, db *DB, n int) map[string]Item {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("k%03d", i%200))
		if _, err := db.Apply(ctx, new(Batch).Put(k, []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%40))))); err != nil {
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

func checkpointFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ckptPrefix+"*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// wantCorruption asserts err is a typed engine corruption error and returns
// the WAL's account of it, if it came from the log.
func wantCorruption(t *testing.T, err error) *wal.CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) {
		t.Fatalf("open: %v, want an engine corruption error", err)
	}
	var we *wal.CorruptionError
	if errors.As(err, &we) && !errors.Is(err, wal.ErrCorruption) {
		t.Fatalf("%v: wal cause not matched by wal.ErrCorruption", err)
	}
	return we
}

// truncatedLogStore leaves a closed store whose WAL no longer starts at 1:
// a checkpoint covered the front and let it go.
func truncatedLogStore(t *testing.T) (dir string, opts Options, state map[string]Item) {
	t.Helper()
	dir = t.TempDir()
	opts = quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024}})
	db := openT(t, dir, opts)
	fillStore(t, db, 300)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	state = fillStore(t, db, 20)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := walSegments(t, dir); len(segs) == 0 || segs[0] == fmt.Sprintf("%020d", 1) {
		t.Fatalf("checkpoint did not truncate the log (segments %v)", segs)
	}
	if n := len(checkpointFiles(t, dir, ckptSuffix)); n != 1 {
		t.Fatalf("%d checkpoints, want 1", n)
	}
	return dir, opts, state
}

func TestOpen_MissingCheckpointAfterTruncationIsCorruption(t *testing.T) {
	dir, opts, state := truncatedLogStore(t)
	ckpt := checkpointFiles(t, dir, ckptSuffix)[0]
	aside := filepath.Join(t.TempDir(), "saved.ckpt")
	if err := os.Rename(ckpt, aside); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, opts)
	we := wantCorruption(t, err)
	if we == nil || we.Index != 1 || we.Segment != walSegments(t, dir)[0] {
		t.Fatalf("corruption %+v, want entries from 1 missing before segment %s", we, walSegments(t, dir)[0])
	}
	// Refusing to open destroyed nothing: with the checkpoint back, every
	// acknowledged write is there.
	if err := os.Rename(aside, ckpt); err != nil {
		t.Fatal(err)
	}
	db := openT(t, dir, opts)
	defer db.Close()
	sameState(t, "checkpoint restored", scanAll(t, db), state)
}

func TestOpen_HalfWrittenCheckpointAfterTruncationIsCorruption(t *testing.T) {
	dir, opts, _ := truncatedLogStore(t)
	ckpt := checkpointFiles(t, dir, ckptSuffix)[0]
	fi, err := os.Stat(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(ckpt, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, opts)
	if we := wantCorruption(t, err); we == nil || we.Index != 1 {
		t.Fatalf("corruption %+v, want entries from 1 missing", we)
	}
}

// With the log still whole (no segment ever cut), a damaged checkpoint is
// skipped and the log replayed from the start.
func TestOpen_HalfWrittenCheckpointIsSkippedWhileLogCoversIt(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"footer-missing", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()-ckptFooterLen); err != nil {
				t.Fatal(err)
			}
		}},
		{"flipped-bit", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 1
			os.WriteFile(path, b, 0o640)
		}},
		{"wrong-name", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			at := binary.LittleEndian.Uint64(b[8:])
			os.Remove(path)
			os.WriteFile(filepath.Join(filepath.Dir(path), checkpointName(Version(at+1))), b, 0o640)
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := quiet(Options{CheckpointLogBytes: -1}) // default segments: the log keeps everything
			db := openT(t, dir, opts)
			fillStore(t, db, 150)
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			state := fillStore(t, db, 30)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damage.do(t, checkpointFiles(t, dir, ckptSuffix)[0])

			db = openT(t, dir, opts)
			sameState(t, "damaged checkpoint skipped", scanAll(t, db), state)
			// The next checkpoint replaces it, and a reopen uses that one.
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openT(t, dir, opts)
			defer db.Close()
			sameState(t, "after a new checkpoint", scanAll(t, db), state)
		})
	}
}

// A checkpoint interrupted before its rename leaves ckpt-*.tmp: Open
// removes it and recovers from the log, which was not truncated.
func TestOpen_LeftoverCheckpointTmpIsRemoved(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024}})
	db := openT(t, dir, opts)
	fillStore(t, db, 100)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	fillStore(t, db, 150)
	disarm := arm(t, fault.CkptRenameBefore, `return("crash")`)
	if err := db.Checkpoint(); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("checkpoint: %v, want the injected crash", err)
	}
	disarm()
	if _, err := db.Apply(ctx, new(Batch).Put([]byte("last"), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	state := scanAll(t, db)
	if err := db.CrashForTesting(wal.DropUnsynced); err != nil {
		t.Fatal(err)
	}
	tmps := checkpointFiles(t, dir, ckptTmpSuffix)
	if len(tmps) != 1 {
		t.Fatalf("interrupted checkpoint left %v, want one temp file", tmps)
	}
	// Half of it, as a power loss before its fsync might leave it, plus
	// an unrelated stray temp file.
	if err := os.Truncate(tmps[0], 100); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ckptPrefix+"junk"+ckptTmpSuffix), []byte("junk"), 0o640); err != nil {
		t.Fatal(err)
	}

	db = openT(t, dir, opts)
	defer db.Close()
	if left := checkpointFiles(t, dir, ckptTmpSuffix); len(left) != 0 {
		t.Fatalf("temp checkpoints left after open: %v", left)
	}
	sameState(t, "after the interrupted checkpoint", scanAll(t, db), state)
}

// A group whose fsync failed is cut mid-frame by the power loss: the open
// repairs the tail (keeping a .broken copy) and every acknowledged batch is
// intact.
func TestOpen_TornTailIsRepaired(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1 << 20}})
	db := openT(t, dir, opts)
	state := fillStore(t, db, 50)
	disarm := arm(t, fault.WALSyncBefore, `return("crash")`)
	big := []byte(strings.Repeat("z", 2000))
	if _, err := db.Apply(ctx, new(Batch).Put([]byte("torn/a"), big).Put([]byte("torn/b"), big)); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Apply: %v, want ErrAmbiguous", err)
	}
	disarm()
	var cut int64
	if err := db.CrashForTesting(func(path string, durable, size int64) error {
		if size-durable < 4000 {
			return fmt.Errorf("unsynced region of %d bytes, want the whole frame", size-durable)
		}
		cut = durable + (size-durable)/2
		return os.Truncate(path, cut)
	}); err != nil {
		t.Fatal(err)
	}

	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "after repair", scanAll(t, db), state)
	broken, _ := filepath.Glob(filepath.Join(dir, walDirName, "*.broken"))
	if len(broken) != 1 {
		t.Fatalf("want one .broken copy, have %v", broken)
	}
	if fi, err := os.Stat(broken[0]); err != nil || fi.Size() != cut {
		t.Fatalf(".broken copy: %v %v, want the %d-byte torn original", fi, err, cut)
	}
	if _, err := db.Apply(ctx, new(Batch).Absent([]byte("torn/a")).Put([]byte("torn/a"), []byte("ok"))); err != nil {
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
