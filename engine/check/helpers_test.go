package check

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Helpers over the engine's public API, for data dirs to check.

func quiet(o engine.Options) engine.Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

func openT(t *testing.T, dir string, opts engine.Options) *engine.DB {
	t.Helper()
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

func apply(t *testing.T, db *engine.DB, b *store.Batch) {
	t.Helper()
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func checkpointT(t *testing.T, db *engine.DB) {
	t.Helper()
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// layoutT lists dir's checkpoint files as recovery does.
func layoutT(t *testing.T, dir string) *engine.CheckpointLayout {
	t.Helper()
	l, err := engine.ListCheckpoints(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// walSegments names the log's segment files, oldest first.
func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, engine.WALDirName))
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

// walEntriesEnd is where segment's entries end.
func walEntriesEnd(t *testing.T, dir, segment string) int64 {
	t.Helper()
	rep, err := wal.Verify(filepath.Join(dir, engine.WALDirName), wal.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Segments {
		if s.Name == segment {
			return s.EntriesEnd
		}
	}
	t.Fatalf("no segment %s in %+v", segment, rep.Segments)
	return 0
}
