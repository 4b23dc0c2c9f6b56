package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// Fixtures of every on-disk format ever written: testdata/vN-dir, a data
// dir as the build of format generation N left it after a clean close,
// and testdata/vN-state.json, every key's "version value" in it. They are
// frozen: v6 is v5's chain as a restored backup (its BACKUP manifest and
// RESTORED epoch, format 1 each); v2 (single-file IDEMCKP2 checkpoint) and v3 (parts IDEMCKP3,
// delta IDEMDLT1) were written by the builds of their day; v4 (IDEMCKP4,
// IDEMDLT2 and the value log), v7 (IDEMCKP5, IDEMDLT3: compact
// value-log pointers), v8 (IDEMCKP6, IDEMDLT4: packed keys) and v9
// (IDEMCKP7: parts carry their tally) by
// TestFormats_WriteFixture below in the build of their day, with
// `go test ./engine -run TestFormats_WriteFixture -args -fixtures.write`
// once. A new format adds a vN-dir (newestFixture); an old one is never
// rewritten.
var writeFixtures = flag.Bool("fixtures.write", false, "write testdata/"+newestFixture+"-dir (only when adding it)")

// newestFixture is the fixture of the formats this build writes.
const newestFixture = "v9"

// TestFormats_WriteFixture writes the newest fixture under
// -fixtures.write and otherwise does nothing.
func TestFormats_WriteFixture(t *testing.T) {
	if !*writeFixtures {
		t.Skip("only with -fixtures.write")
	}
	dir := filepath.Join("testdata", newestFixture+"-dir")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cold := func(_, v []byte) bool { return bytes.HasPrefix(v, []byte("cold")) }
	db := openT(t, dir, quiet(Options{CheckpointLogBytes: -1, ColdValue: cold}))
	for i := range 40 {
		putT(t, db, fmt.Sprintf("k%03d", i), fmt.Sprintf("cold base value %d, long enough for the value log", i))
	}
	putT(t, db, "hot", "a value that stays in RAM")
	for _, k := range fixtureHexKeys {
		putT(t, db, k, "cold value of "+k+", long enough for the value log")
		putT(t, db, "hot/"+k, "a hot value of "+k)
	}
	if err := db.Checkpoint(); err != nil { // the base: a part, values in vlog/
		t.Fatal(err)
	}
	for i := 20; i < 30; i++ {
		putT(t, db, fmt.Sprintf("k%03d", i), fmt.Sprintf("cold delta value %d", i))
	}
	putT(t, db, fixtureHexKeys[1], "cold delta value of a packed key")
	del := new(store.Batch).Delete([]byte("k007")).Delete([]byte(fixtureHexKeys[2]))
	if _, err := db.Apply(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil { // a delta
		t.Fatal(err)
	}
	for i := 25; i < 45; i++ { // in the log only
		putT(t, db, fmt.Sprintf("k%03d", i), fmt.Sprintf("log value %d", i))
	}
	state := map[string]string{}
	for k, it := range scanAll(t, db) {
		state[k] = fmt.Sprintf("%d %s", it.Version, it.Value)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "LOCK"))
	b, _ := json.MarshalIndent(state, "", " ")
	if err := os.WriteFile(filepath.Join("testdata", newestFixture+"-state.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixtureHexKeys are keys packed in checkpoints from v8 on (ending in 32
// lowercase hex digits), and their neighbours that are not.
var fixtureHexKeys = []string{
	"rcpt/v1/00112233445566778899aabbccddeeff",
	"rcpt/v1/0123456789abcdef0123456789abcdef",
	"rcpt/v1/fedcba9876543210fedcba9876543210",
	"rcpt/v1/0123456789ABCDEF0123456789ABCDEF",
	"rcpt/v1/0123456789abcdef0123456789abcde",
	"0123456789abcdef0123456789abcdef",
	"k0123456789abcdef0123456789abcdef",
}

// fixtureDirs are testdata's vN-dir fixtures.
func fixtureDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "v*-dir"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return dirs
}

// TestFormats_EveryFixtureOpens: each fixture data dir, copied, opens
// with every key at its version and value, Check finds nothing wrong in
// it, and a checkpoint in today's format over it reopens the same.
func TestFormats_EveryFixtureOpens(t *testing.T) {
	for _, fixture := range fixtureDirs(t) {
		t.Run(filepath.Base(fixture), func(t *testing.T) {
			dir, want := copyFixture(t, fixture)
			// The fixtures keep no LOCK (an empty file every open makes);
			// check wants it as the mark of a data dir.
			if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o640); err != nil {
				t.Fatal(err)
			}
			_, problems := checkDirT(t, dir)
			for _, p := range problems {
				// The fixtures' keys are the engine's alone, in no
				// namespace of the layers above: that one is expected.
				// A note (the restore v6 records) is no damage.
				if p.Kind == "note" {
					continue
				}
				if p.File != "" || !strings.Contains(p.Detail, "outside every registered namespace") {
					t.Fatalf("check: %+v", p)
				}
			}
			opts := quiet(Options{CheckpointLogBytes: -1, ColdValue: func(_, v []byte) bool { return true }})
			for _, step := range []string{"as written", "after a checkpoint in today's format"} {
				db := openT(t, dir, opts)
				got := map[string]string{}
				for k, it := range scanAll(t, db) {
					got[k] = fmt.Sprintf("%d %s", it.Version, it.Value)
				}
				if !maps.Equal(got, want) {
					t.Fatalf("%s: %d keys %v\nwant %d keys %v", step, len(got), got, len(want), want)
				}
				if err := db.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestFormats_EveryVersionReadHasAFixture: every format version this
// build reads (Formats, what idemd -version prints) is in some fixture:
// a checkpoint part, delta or close marker by its magic, a log frame by
// its header, the value log by a segment. A reader dropped or broken for
// an old version then fails TestFormats_EveryFixtureOpens.
func TestFormats_EveryVersionReadHasAFixture(t *testing.T) {
	seen := map[string]bool{}
	frame := []byte{0xD1, 0xE3, wal.FrameVersion} // a frame's header (wal/frame.go)
	for _, fixture := range fixtureDirs(t) {
		err := filepath.WalkDir(fixture, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if len(b) >= 8 {
				seen[string(b[:8])] = true
			}
			switch {
			case d.Name() == backupManifestName || d.Name() == restoreEpochName:
				var head struct{ Format int }
				if err := json.Unmarshal(b, &head); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				name := backupFormatName(head.Format)
				if d.Name() == restoreEpochName {
					name = restoreFormatName(head.Format)
				}
				seen[name] = true
			case strings.HasSuffix(path, vlogSuffix):
				seen[valueLogFormat] = true
			case filepath.Base(filepath.Dir(path)) == "wal" && bytes.Contains(b, frame):
				seen[fmt.Sprint("frame", wal.FrameVersion)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range Formats() {
		if !slices.Contains(f.Reads, f.Writes) {
			t.Errorf("%s: writes %s but does not read it", f.Name, f.Writes)
		}
		for _, v := range f.Reads {
			if !seen[v] {
				t.Errorf("%s %s: no fixture under testdata/ has it", f.Name, v)
			}
		}
	}
}
