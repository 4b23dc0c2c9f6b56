package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An open reports the chain it loaded, in bytes, and how long each of its
// steps took: nothing loaded for a store without a checkpoint, and
// exactly the chain's files once one is written.
func TestOpenPhases_ReportTheChainLoadedAndEachStep(t *testing.T) {
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1})
	db := openT(t, dir, opts)
	for i := range 20 {
		putT(t, db, fmt.Sprintf("k%03d", i), "v")
	}
	db = reopenT(t, db, dir, opts)
	young := db.Stats().Recovery
	if young.ChainBytes != 0 || young.ReplayedBytes == 0 {
		t.Fatalf("a store without a checkpoint: chain %d bytes, replayed %d bytes; want 0 and the log", young.ChainBytes, young.ReplayedBytes)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		putT(t, db, fmt.Sprintf("n%03d", i), "v")
	}
	db = reopenT(t, db, dir, opts)
	rec := db.Stats().Recovery
	if want := ckptFilesBytes(t, dir); rec.ChainBytes != want || want == 0 {
		t.Fatalf("the open loaded a chain of %d bytes; its files hold %d", rec.ChainBytes, want)
	}
	if p := rec.Phases; p.LogOpen <= 0 || p.ChainLoad <= 0 || p.Replay <= 0 {
		t.Fatalf("phases %+v: each step takes some time", p)
	}
}

// ckptFilesBytes sums the checkpoint files in dir (one chain here).
func ckptFilesBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ckptPrefix) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
