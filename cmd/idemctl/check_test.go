package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/check"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// idemctl end to end through run: exit 0 on a clean dir (a torn tail
// allowed, printed as a warning), 1 on damage, 2 for a command line it
// cannot run, a dir in use or one that is not a data dir; -json is the
// engine's report.

var storeOpts = engine.Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10,
	WAL: wal.Options{SegmentBytes: 1024}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	// Half the documents' values go to the value log at checkpoints.
	ColdValue: func(key, _ []byte) bool { return key[len(key)-1]%2 == 0 }}

// dataDir is a closed data dir of keys keys: a base checkpoint, a delta on
// it, and a log tail of several segments.
func dataDir(t *testing.T) (dir string, keys int) {
	t.Helper()
	dir = t.TempDir()
	db, err := engine.Open(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(from, to int) {
		for i := from; i < to; i++ {
			k := store.NSTable.Key("t", "0", fmt.Sprintf("doc-%03d", i))
			if _, err := db.Apply(ctx, new(store.Batch).Put(k, []byte(strings.Repeat("v", 40)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 40)
	checkpoint := func() {
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint()
	put(20, 50)
	checkpoint()
	put(50, 80)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, 80
}

// files lists a dir's files of the given suffix, sorted.
func files(t *testing.T, dir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// idemctl runs the command and returns its exit status and output.
func idemctl(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func checkJSON(t *testing.T, dir string) (int, check.Report) {
	t.Helper()
	code, out, errOut := idemctl("check", "-json", dir)
	var rep check.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check -json: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	return code, rep
}

func TestRun_CheckOfACleanDirExitsZero(t *testing.T) {
	dir, keys := dataDir(t)
	code, out, errOut := idemctl("check", dir)
	if code != exitOK || errOut != "" || !strings.Contains(out, "result") || !strings.HasSuffix(strings.TrimSpace(out), "clean") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{string(store.NSTable), "0 damage", "closed cleanly", ".delta"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not mention %q:\n%s", want, out)
		}
	}
	code, rep := checkJSON(t, dir)
	if code != exitOK || rep.Damaged() || !rep.Loaded || rep.Keys != int64(keys) || rep.Chain == nil || rep.Chain.Deltas != 1 {
		t.Fatalf("check -json: exit %d, %+v", code, rep)
	}
	// The flag after the dir: the same report.
	if code, after, _ := idemctl("check", dir, "-json"); code != exitOK || !strings.HasPrefix(strings.TrimSpace(after), "{") {
		t.Fatalf("check DIR -json: exit %d:\n%s", code, after)
	}
	if rep.ValueLog.Values == 0 || rep.ValueLog.Damaged != 0 || rep.ValueLog.Segments == 0 {
		t.Fatalf("check -json: value log %+v, want values read back and none damaged", rep.ValueLog)
	}
	for _, n := range rep.Namespaces {
		if (n.Namespace == store.NSTable) != (n.Keys == int64(keys)) {
			t.Fatalf("namespace %s has %d keys; want all %d in %s", n.Namespace, n.Keys, keys, store.NSTable)
		}
	}
}

func TestRun_CheckFindingDamageExitsOneNamingTheFile(t *testing.T) {
	dir, _ := dataDir(t)
	delta := files(t, dir, ".delta")[0]
	b, err := os.ReadFile(filepath.Join(dir, delta))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, delta), b, 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, _ := idemctl("check", dir)
	if code != exitDamage || !strings.Contains(out, "DAMAGE: "+delta) || !strings.Contains(out, "DAMAGED") {
		t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitDamage, delta, out)
	}
	code, rep := checkJSON(t, dir)
	if code != exitDamage || !rep.Damaged() {
		t.Fatalf("check -json: exit %d, damaged %v", code, rep.Damaged())
	}
}

func TestRun_CheckFindingAFlippedValueLogByteExitsOneNamingTheSegment(t *testing.T) {
	dir, _ := dataDir(t)
	seg := filepath.Join("vlog", files(t, filepath.Join(dir, "vlog"), ".vlog")[0])
	b, err := os.ReadFile(filepath.Join(dir, seg))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x01 // the last record: a value the delta spilled, in use
	if err := os.WriteFile(filepath.Join(dir, seg), b, 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, _ := idemctl("check", dir)
	if code != exitDamage || !strings.Contains(out, "DAMAGE: "+seg) || !strings.Contains(out, "does not read back") {
		t.Fatalf("exit %d, want %d naming %s:\n%s", code, exitDamage, seg, out)
	}
	code, rep := checkJSON(t, dir)
	if code != exitDamage || rep.ValueLog.Damaged != 1 {
		t.Fatalf("check -json: exit %d, value log %+v; want exactly the one damaged value", code, rep.ValueLog)
	}
}

func TestRun_CheckOfATornTailWarnsAndExitsZero(t *testing.T) {
	dir, _ := dataDir(t)
	walDir := filepath.Join(dir, "wal")
	if err := os.Remove(filepath.Join(walDir, "CLOSED")); err != nil { // as a crash leaves it
		t.Fatal(err)
	}
	vr, err := wal.Verify(walDir, wal.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	segs := vr.Segments
	if n := len(segs); segs[n-1].EntriesEnd == 0 && n > 1 {
		// The log had just left a full segment: as if the crash had come
		// before the empty tail's directory entry was durable.
		if err := os.Remove(filepath.Join(walDir, segs[n-1].Name)); err != nil {
			t.Fatal(err)
		}
		segs = segs[:n-1]
	}
	last := segs[len(segs)-1]
	// The entries' end, not the file's: a preallocated segment's zeros follow them.
	if err := os.Truncate(filepath.Join(walDir, last.Name), last.EntriesEnd-3); err != nil {
		t.Fatal(err)
	}
	code, out, _ := idemctl("check", dir)
	if code != exitOK || !strings.Contains(out, "warning (torn tail): wal/"+last.Name) || strings.Contains(out, "DAMAGE") {
		t.Fatalf("exit %d, want a torn-tail warning and exit 0:\n%s", code, out)
	}
}

func TestRun_CheckRefusesADirInUseOrNotADataDirWithTwo(t *testing.T) {
	dir, _ := dataDir(t)
	db, err := engine.Open(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := idemctl("check", dir)
	db.Close()
	if code != exitUsage || out != "" || !strings.Contains(errOut, "locked") {
		t.Fatalf("a dir in use: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = idemctl("check", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "not a data directory") {
		t.Fatalf("an empty dir: exit %d, stderr %q", code, errOut)
	}
}

func TestRun_UsageErrorsExitTwo(t *testing.T) {
	dir, _ := dataDir(t)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"check"},
		{"check", dir, dir},
		{"check", "-bogus", dir},
		{"check", dir, "--", "-json"}, // after --, a second dir
		{"help", "frobnicate"},
		{"help", "check", "extra"},
	} {
		if code, _, errOut := idemctl(args...); code != exitUsage || errOut == "" {
			t.Errorf("idemctl %q: exit %d, stderr %q; want %d and a reason", args, code, errOut, exitUsage)
		}
	}
}

func TestRun_HelpListsEveryCommandAndEachUsage(t *testing.T) {
	code, out, _ := idemctl("help")
	for _, c := range commands() {
		if code != exitOK || !strings.Contains(out, c.name+" "+c.synopsis) {
			t.Fatalf("help: exit %d, does not list %s:\n%s", code, c.name, out)
		}
		code, out, _ := idemctl("help", c.name)
		if code != exitOK || !strings.Contains(out, "usage: idemctl "+c.name) {
			t.Fatalf("help %s: exit %d:\n%s", c.name, code, out)
		}
	}
	if code, _, errOut := idemctl("check", "-h"); code != exitOK || !strings.Contains(errOut, "-json") {
		t.Fatalf("check -h: exit %d, stderr %q", code, errOut)
	}
	// help shows every flag's default, a verb's included.
	code, out, _ = idemctl("help", "receipts")
	for _, want := range []string{`(default "http://127.0.0.1:8420")`, "list flags:", `(default "all")`, "(default 100)"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("help receipts: exit %d, no %s:\n%s", code, want, out)
		}
	}
}

// TestRun_CheckOfAYoungDirSaysNoCheckpointYet: a dir whose log has not yet
// reached the first checkpoint is described as what it is, not an alarm.
func TestRun_CheckOfAYoungDirSaysNoCheckpointYet(t *testing.T) {
	dir := t.TempDir()
	db, err := engine.Open(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		k := store.NSTable.Key("t", "0", fmt.Sprintf("doc-%03d", i))
		if _, err := db.Apply(context.Background(), new(store.Batch).Put(k, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := idemctl("check", dir)
	if code != exitOK || errOut != "" || !strings.HasSuffix(strings.TrimSpace(out), "clean") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "no checkpoint yet: an open replays the log (entries 1..5)") || strings.Contains(out, "none usable") {
		t.Fatalf("a young dir is not described as one:\n%s", out)
	}
}
