package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
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
	v1, err := db.Apply(ctx, new(Batch).Absent([]byte("a")).Put([]byte("a"), []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, new(Batch).Absent([]byte("a")).Put([]byte("a"), []byte("2"))); !errors.Is(err, ErrConditionFailed) {
		t.Fatalf("second create: %v, want ErrConditionFailed", err)
	}
	if k, ok := FailedKey(err); ok && string(k) != "a" {
		t.Fatalf("failed key %q", k)
	}
	v2, err := db.Apply(ctx, new(Batch).AtVersion([]byte("a"), v1).Put([]byte("a"), []byte("3")).Put([]byte("b"), []byte("x")))
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
		if _, err := db.Apply(ctx, new(Batch).Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, new(Batch).Delete([]byte("k000"))); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openT(t, dir, Options{})
	defer db.Close()
	if _, err := db.Get(ctx, []byte("k000")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("k000: %v", err)
	}
	if it, err := db.Get(ctx, []byte("k099")); err != nil || string(it.Value) != "99" {
		t.Fatalf("k099: %q %v", it.Value, err)
	}
}
