package check

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Dir (check.go) on real data dirs: a clean one has no problems and
// counts what was written; a torn tail after a crash is a warning; a
// changed byte in a segment, a part or a delta, or a lost link, is damage
// naming its file; a dir in use or no data dir is refused; and the dir is
// byte for byte what it was, whatever Dir found.

// checkFixture is a closed data dir with a base checkpoint of several
// parts, two deltas on it and a log tail of several segments after them.
type checkFixture struct {
	dir    string
	opts   engine.Options
	state  map[string]string        // what was written, as a model
	deltas []engine.CheckpointDelta // oldest first
	base   engine.CheckpointGeneration
}

func newCheckFixture(t *testing.T) *checkFixture {
	t.Helper()
	f := &checkFixture{dir: t.TempDir(), state: map[string]string{},
		opts: quiet(engine.Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 1024}})}
	db := openT(t, f.dir, f.opts)
	round := func(r, n int) {
		for i := range n {
			b := new(store.Batch)
			id := fmt.Sprintf("%03d", i)
			for _, k := range [][]byte{store.NSReceipt.Key(id), store.NSTable.Key("t", "0", id), store.NSLease.Key("node", id)} {
				v := fmt.Sprintf("round-%d-%s-%s", r, id, strings.Repeat("v", 20))
				b.Put(k, []byte(v))
				f.state[string(k)] = v
			}
			if r > 0 && i%5 == 0 {
				k := store.NSLease.Key("node", id)
				b = new(store.Batch).Delete(k).Put(store.NSMeta.Key("round", fmt.Sprint(r), id), []byte("m"))
				delete(f.state, string(k))
				f.state[string(store.NSMeta.Key("round", fmt.Sprint(r), id))] = "m"
			}
			apply(t, db, b)
		}
	}
	round(0, 40)
	checkpointT(t, db) // the base
	round(1, 15)
	checkpointT(t, db) // the first delta
	round(2, 15)
	checkpointT(t, db) // the second
	round(3, 30)       // the log after the tip
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l := layoutT(t, f.dir)
	f.deltas, f.base = l.Deltas, l.Generations[0]
	if len(f.deltas) != 2 || len(f.base.Parts) < 2 || len(walSegments(t, f.dir)) < 4 {
		t.Fatalf("fixture: %d deltas, %d base parts, %d segments; want 2, ≥ 2, ≥ 4", len(f.deltas), len(f.base.Parts), len(walSegments(t, f.dir)))
	}
	return f
}

func (f *checkFixture) wal(name string) string { return filepath.Join(f.dir, engine.WALDirName, name) }

// counts is what the model holds by namespace.
func (f *checkFixture) counts() map[store.Namespace][2]int64 {
	out := map[store.Namespace][2]int64{}
	for k, v := range f.state {
		for _, ns := range store.Namespaces {
			if ns.Has([]byte(k)) {
				c := out[ns]
				out[ns] = [2]int64{c[0] + 1, c[1] + int64(len(k)+len(v))}
			}
		}
	}
	return out
}

// checkT checks dir and asserts that nothing in it changed.
func checkT(t *testing.T, dir string) *Report {
	t.Helper()
	before := testsupport.DirHashes(t, dir)
	rep, err := Dir(vfs.Default, dir, Options{})
	if err != nil {
		t.Fatalf("check %s: %v", dir, err)
	}
	if after := testsupport.DirHashes(t, dir); !maps.Equal(before, after) {
		t.Fatalf("check changed the dir:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	return rep
}

func problemsOf(rep *Report, kind ProblemKind) []Problem {
	var out []Problem
	for _, p := range rep.Problems {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// wantDamageIn asserts a damage problem names file (relative to the dir).
func wantDamageIn(t *testing.T, rep *Report, file string) Problem {
	t.Helper()
	if !rep.Damaged() {
		t.Fatalf("no damage reported; problems %+v", rep.Problems)
	}
	for _, p := range problemsOf(rep, ProblemDamage) {
		if p.File == file {
			return p
		}
	}
	t.Fatalf("no damage names %s; problems %+v", file, rep.Problems)
	return Problem{}
}

func flipByte(t *testing.T, path string, at func(size int) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at(len(b))] ^= 0xff
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func middle(size int) int { return size / 2 }

// openCopy opens a copy of dir with the engine itself: what a restart does.
func openCopy(t *testing.T, dir string, opts engine.Options) (*engine.DB, error) {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return engine.Open(cp, opts)
}

func TestCheck_ACleanDirHasNoProblemsAndCountsWhatWasWritten(t *testing.T) {
	f := newCheckFixture(t)
	rep := checkT(t, f.dir)
	if len(rep.Problems) != 0 {
		t.Fatalf("problems in a clean dir: %+v", rep.Problems)
	}
	if !rep.Loaded || rep.StrayKeys != 0 || rep.Keys != int64(len(f.state)) {
		t.Fatalf("loaded %v, %d keys (%d stray), want %d", rep.Loaded, rep.Keys, rep.StrayKeys, len(f.state))
	}
	want := f.counts()
	for _, n := range rep.Namespaces {
		if got := [2]int64{n.Keys, n.Bytes}; got != want[n.Namespace] {
			t.Errorf("namespace %s: %d keys, %d bytes; want %v", n.Namespace, n.Keys, n.Bytes, want[n.Namespace])
		}
	}
	tip := f.deltas[1].V
	if rep.Chain == nil || rep.Chain.Base != f.base.V0 || rep.Chain.Tip != tip || len(rep.Chain.Files) != len(f.base.Parts)+2 {
		t.Fatalf("chain %+v, want base %d with both deltas, tip %d", rep.Chain, f.base.V0, tip)
	}
	if rep.Recovery.FromCheckpoint != tip {
		t.Fatalf("the open loaded %d, check read the chain to %d", rep.Recovery.FromCheckpoint, tip)
	}
	w := rep.WAL
	if len(w.Segments) != len(walSegments(t, f.dir)) || w.Marker != wal.MarkerClean || w.FirstIndex > uint64(f.deltas[0].V)+1 ||
		w.LastIndex < uint64(tip) || w.Frames != w.LastIndex-w.FirstIndex+1 {
		t.Fatalf("log %+v", w)
	}
	if len(rep.Checkpoints) != len(f.base.Parts)+2 {
		t.Fatalf("checkpoint files %+v", rep.Checkpoints)
	}
	for _, c := range rep.Checkpoints {
		if !c.OK {
			t.Fatalf("checkpoint file %+v not OK in a clean dir", c)
		}
	}
}

func TestCheck_AFlippedByteInAMiddleSegmentIsDamageNamingIt(t *testing.T) {
	f := newCheckFixture(t)
	segs := walSegments(t, f.dir)
	seg := segs[len(segs)-2] // after the tip: the open needs it
	flipByte(t, f.wal(seg), middle)
	rep := checkT(t, f.dir)
	p := wantDamageIn(t, rep, engine.WALDirName+"/"+seg)
	if p.Offset <= 0 {
		t.Fatalf("damage %+v: want the offset of the damaged frame", p)
	}
	if len(problemsOf(rep, ProblemTornTail)) != 0 || rep.Loaded {
		t.Fatalf("a flipped byte mid-log: torn tails %+v, loaded %v; want damage only, and an open refusing", problemsOf(rep, ProblemTornTail), rep.Loaded)
	}
	if db, err := openCopy(t, f.dir, f.opts); err == nil {
		db.Close()
		t.Fatal("an open accepts the log that check calls damaged")
	}
}

// cutLastSegment cuts the last n bytes of the last segment's entries (the
// zeros of a preallocated segment go with them) and returns the segment
// and where its entries ended.
func (f *checkFixture) cutLastSegment(t *testing.T, n int64) (string, int64) {
	t.Helper()
	segs := walSegments(t, f.dir)
	last := segs[len(segs)-1]
	end := walEntriesEnd(t, f.dir, last)
	if end == 0 && len(segs) > 1 {
		// The log had just left a full segment: as if the crash had
		// come before the empty tail's directory entry was durable.
		if err := os.Remove(f.wal(last)); err != nil {
			t.Fatal(err)
		}
		last = segs[len(segs)-2]
		end = walEntriesEnd(t, f.dir, last)
	}
	if end <= n {
		t.Fatalf("last segment %s: entries end at %d", last, end)
	}
	if err := os.Truncate(f.wal(last), end-n); err != nil {
		t.Fatal(err)
	}
	return last, end
}

func TestCheck_ACutLastSegmentAfterACrashIsATornTailNotDamage(t *testing.T) {
	for _, crashed := range []bool{true, false} {
		t.Run(map[bool]string{true: "crashed", false: "closed cleanly"}[crashed], func(t *testing.T) {
			f := newCheckFixture(t)
			if crashed {
				// A crash leaves no close marker: only then may a tail be torn.
				if err := os.Remove(f.wal("CLOSED")); err != nil {
					t.Fatal(err)
				}
			}
			last, end := f.cutLastSegment(t, 3)
			rep := checkT(t, f.dir)
			if !crashed {
				wantDamageIn(t, rep, engine.WALDirName+"/"+last)
				return
			}
			torn := problemsOf(rep, ProblemTornTail)
			if rep.Damaged() || len(torn) != 1 || torn[0].File != engine.WALDirName+"/"+last || torn[0].Offset < 0 || torn[0].Offset >= end-3 {
				t.Fatalf("want one torn tail in %s and no damage; problems %+v", last, rep.Problems)
			}
			db, err := openCopy(t, f.dir, f.opts)
			if err != nil {
				t.Fatalf("check calls the tail torn, but an open refuses: %v", err)
			}
			defer db.Close()
			if keys := db.Stats().Keys; !rep.Loaded || int64(keys) != rep.Keys {
				t.Fatalf("check counted %d keys (loaded %v), the open has %d", rep.Keys, rep.Loaded, keys)
			}
		})
	}
}

func TestCheck_AFlippedByteInACheckpointFileIsDamageNamingIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		file func(f *checkFixture) string
	}{
		{"base part", func(f *checkFixture) string { return f.base.Parts[0].Name }},
		{"older delta", func(f *checkFixture) string { return f.deltas[0].Name }},
		{"newest delta", func(f *checkFixture) string { return f.deltas[1].Name }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCheckFixture(t)
			name := tc.file(f)
			flipByte(t, filepath.Join(f.dir, name), middle)
			rep := checkT(t, f.dir)
			wantDamageIn(t, rep, name)
			for _, c := range rep.Checkpoints {
				if c.OK == (c.Name == name) {
					t.Fatalf("checkpoint file %+v: only %s is damaged", c, name)
				}
			}
		})
	}
}

func TestCheck_ALostLinkALaterOneNeedsIsDamage(t *testing.T) {
	f := newCheckFixture(t)
	lost, later := f.deltas[0], f.deltas[1]
	if err := os.Remove(filepath.Join(f.dir, lost.Name)); err != nil {
		t.Fatal(err)
	}
	rep := checkT(t, f.dir)
	p := wantDamageIn(t, rep, later.Name)
	if !strings.Contains(p.Detail, lost.Name) || !strings.Contains(p.Detail, "missing") {
		t.Fatalf("damage %+v: want it to name the missing %s", p, lost.Name)
	}
	if rep.Chain != nil && rep.Chain.Tip >= lost.V {
		t.Fatalf("chain %+v: it cannot reach past the lost link %d", rep.Chain, lost.V)
	}
}

func TestCheck_AfterAFallbackTheFilesMovedAsideAreNotesNotDamage(t *testing.T) {
	f := newCheckFixture(t)
	newest := f.deltas[1].Name
	flipByte(t, filepath.Join(f.dir, newest), middle)
	if rep := checkT(t, f.dir); !rep.Damaged() {
		t.Fatalf("a damaged newest delta: no damage")
	}
	// A real open falls back to the link before, moves the delta aside,
	// and loses nothing: the dir it leaves is sound.
	db := openT(t, f.dir, f.opts)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep := checkT(t, f.dir)
	if rep.Damaged() || rep.Keys != int64(len(f.state)) {
		t.Fatalf("after the fallback: %d keys (want %d), problems %+v", rep.Keys, len(f.state), rep.Problems)
	}
	var noted bool
	for _, p := range problemsOf(rep, ProblemNote) {
		noted = noted || p.File == newest+".damaged"
	}
	if !noted {
		t.Fatalf("the file moved aside is not noted: %+v", rep.Problems)
	}
}

func TestCheck_KeysOutsideEveryNamespaceAreDamage(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir, quiet(engine.Options{}))
	apply(t, db, new(store.Batch).Put(store.NSMeta.Key("x"), []byte("1")).Put([]byte("stray/1"), []byte("2")))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep := checkT(t, dir)
	if !rep.Damaged() || rep.StrayKeys != 1 || rep.Keys != 2 || !strings.Contains(problemsOf(rep, ProblemDamage)[0].Detail, "stray/1") {
		t.Fatalf("stray keys %d of %d; problems %+v", rep.StrayKeys, rep.Keys, rep.Problems)
	}
}

func TestCheck_RefusesADirAnOpenEngineHoldsAndReleasesItsLock(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir, quiet(engine.Options{}))
	if _, err := Dir(vfs.Default, dir, Options{}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("check of a dir in use: %v, want engine.ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkT(t, dir)
	lock, err := vfs.Default.Lock(filepath.Join(dir, engine.LockFileName))
	if err != nil {
		t.Fatalf("after check the lock is still held: %v", err)
	}
	lock.Close()
}

func TestCheck_RefusesWhatIsNotADataDir(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, files ...string) string {
		d := filepath.Join(root, name)
		for _, f := range append([]string{""}, files...) {
			p := filepath.Join(d, f)
			if strings.HasSuffix(f, "/") || f == "" {
				if err := os.MkdirAll(p, 0o750); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(p, []byte("x"), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	for _, dir := range []string{
		mk("empty"),
		mk("someone-elses", "LOCK", "CURRENT", "MANIFEST-000001"), // a LevelDB has a LOCK too
		mk("no-lock", "wal/"),
		filepath.Join(root, "missing"),
		filepath.Join(mk("file", "plain"), "plain"),
	} {
		before := testsupport.DirHashes(t, root)
		if _, err := Dir(vfs.Default, dir, Options{}); !errors.Is(err, ErrNotDataDir) {
			t.Errorf("check %s: %v, want ErrNotDataDir", dir, err)
		}
		if after := testsupport.DirHashes(t, root); !maps.Equal(before, after) {
			t.Errorf("check %s changed files (a LOCK created?): %v", dir, slices.Sorted(maps.Keys(after)))
		}
	}
}

func TestCheck_ReadsALegacySingleFileCheckpointAndFindsItsDamage(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir, quiet(engine.Options{CheckpointLogBytes: -1}))
	for i := range 30 {
		apply(t, db, new(store.Batch).Put(store.NSMeta.Key(fmt.Sprint(i)), []byte("v")))
	}
	snap := db.Snapshot()
	apply(t, db, new(store.Batch).Put(store.NSMeta.Key("after"), []byte("v")))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// What an earlier version wrote for snap (engine/legacy_test.go): the
	// format IDEMCKP2 of engine/ckptfile.go, written here byte by byte.
	img := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64([]byte("IDEMCKP2"), uint64(snap.Version())), uint64(snap.Len()))
	snap.Ascend(nil, func(it store.Item) bool {
		img = binary.AppendUvarint(binary.AppendUvarint(img, uint64(len(it.Key))), uint64(len(it.Value)))
		img = binary.AppendUvarint(append(append(img, it.Key...), it.Value...), uint64(it.Version))
		return true
	})
	img = append(binary.LittleEndian.AppendUint32(img, crc32.Checksum(img, crc32.MakeTable(crc32.Castagnoli))), "IDEMEND1"...)
	name := engine.CheckpointName(snap.Version()) + ".ckpt"
	if err := os.WriteFile(filepath.Join(dir, name), img, 0o640); err != nil {
		t.Fatal(err)
	}
	rep := checkT(t, dir)
	if rep.Damaged() || rep.Chain == nil || rep.Chain.Tip != snap.Version() || rep.Keys != 31 ||
		len(rep.Checkpoints) != 1 || rep.Checkpoints[0].Kind != "legacy" || rep.Checkpoints[0].Records != 30 {
		t.Fatalf("a legacy checkpoint: chain %+v, %d keys, files %+v, problems %+v", rep.Chain, rep.Keys, rep.Checkpoints, rep.Problems)
	}
	flipByte(t, filepath.Join(dir, name), middle)
	wantDamageIn(t, checkT(t, dir), name)
}

// The files a chain leaves at each step of its life — a base, a delta, a
// new base beside the old chain it keeps, a delta on that — are all sound:
// no step may read as damage.
func TestCheck_EveryStepOfAChainsLifeIsClean(t *testing.T) {
	dir := t.TempDir()
	opts := quiet(engine.Options{CheckpointLogBytes: -1, CheckpointDeltasMax: 1, CheckpointPartBytes: 1 << 10, WAL: wal.Options{SegmentBytes: 1024}})
	keys := map[string]bool{}
	for step := range 5 {
		db := openT(t, dir, opts)
		for i := range 20 {
			k := store.NSTable.Key("t", fmt.Sprint(step), fmt.Sprint(i%(10+step)))
			keys[string(k)] = true
			apply(t, db, new(store.Batch).Put(k, []byte(strings.Repeat("v", 30))))
		}
		if step > 0 {
			checkpointT(t, db)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		rep := checkT(t, dir)
		if len(rep.Problems) != 0 || rep.Keys != int64(len(keys)) || rep.Recovery.FromCheckpoint != rep.Chain.tipOrZero() {
			t.Fatalf("step %d: %d keys (want %d), chain %+v, recovery %+v, problems %+v", step, rep.Keys, len(keys), rep.Chain, rep.Recovery, rep.Problems)
		}
	}
}

func (c *Chain) tipOrZero() store.Version {
	if c == nil {
		return 0
	}
	return c.Tip
}
