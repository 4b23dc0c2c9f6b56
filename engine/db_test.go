package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

func openT(t *testing.T, dir string, opts Options) *DB {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

func TestApply_ConditionsAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openT(t, dir, Options{})
	v1, err := db.Apply(ctx, new(store.Batch).Absent([]byte("a")).Put([]byte("a"), []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := db.Apply(ctx, new(store.Batch).Absent([]byte("a")).Put([]byte("a"), []byte("2")))
	if !errors.Is(cerr, store.ErrConditionFailed) {
		t.Fatalf("second create: %v, want ErrConditionFailed", cerr)
	}
	if k, ok := store.FailedKey(cerr); !ok || string(k) != "a" {
		t.Fatalf("FailedKey(%v) = %q, %v; want \"a\", true", cerr, k, ok)
	}
	v2, err := db.Apply(ctx, new(store.Batch).AtVersion([]byte("a"), v1).Put([]byte("a"), []byte("3")).Put([]byte("b"), []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	if v2 <= v1 {
		t.Fatalf("versions not increasing: %d then %d", v1, v2)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, Options{})
	defer db.Close()
	it, err := db.Get(ctx, []byte("a"))
	if err != nil || string(it.Value) != "3" || it.Version != v2 {
		t.Fatalf("after reopen a = %q@%d, %v; want 3@%d", it.Value, it.Version, err, v2)
	}
	items, err := db.Scan(ctx, []byte("a"), nil, 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("scan: %v %v", items, err)
	}
}

func TestCheckpoint_TruncatesAndReopens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openT(t, dir, Options{CheckpointLogBytes: -1})
	for i := 0; i < 100; i++ {
		if _, err := db.Apply(ctx, new(store.Batch).Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, new(store.Batch).Delete([]byte("k000"))); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openT(t, dir, Options{})
	defer db.Close()
	if _, err := db.Get(ctx, []byte("k000")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("k000: %v", err)
	}
	if it, err := db.Get(ctx, []byte("k099")); err != nil || string(it.Value) != "99" {
		t.Fatalf("k099: %q %v", it.Value, err)
	}
}

// TestCheckpoint_ManyMegabytesRoundTrip: a checkpoint several times
// ckptWritebackBytes long (its writeback is started chunk by chunk while it
// is written) reopens to exactly the store it was taken of, with the log
// before it truncated away.
func TestCheckpoint_ManyMegabytesRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1 << 20}})
	db := openT(t, dir, opts)
	val := bytes.Repeat([]byte("v"), 16<<10)
	for i := range 4 * ckptWritebackBytes / len(val) {
		if _, err := db.Apply(ctx, new(store.Batch).Put([]byte(fmt.Sprintf("k%05d", i)), val)); err != nil {
			t.Fatal(err)
		}
	}
	want := scanAll(t, db)
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if size := db.ckptSize.Load(); size < 4*ckptWritebackBytes {
		t.Fatalf("checkpoint of %d bytes, want at least %d", size, 4*ckptWritebackBytes)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "reopened from the checkpoint", scanAll(t, db), want)
}
