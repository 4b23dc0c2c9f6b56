package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
)

// TestCheckpointStats_CountCompletedFailedAndBytes: a checkpoint with
// something new counts as completed, with its duration and bytes; one with
// nothing new counts as nothing; a failed one as a failure; and the newest
// checkpoint's size survives a reopen.
func TestCheckpointStats_CountCompletedFailedAndBytes(t *testing.T) {
	const keys = 50 // a non-empty checkpoint, well under one part
	ctx := context.Background()
	dir := t.TempDir()
	db := openT(t, dir, quiet(Options{}))
	put := func(i int) {
		t.Helper()
		k := []byte(fmt.Sprintf("k%03d", i))
		if _, err := db.Apply(ctx, new(store.Batch).Put(k, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		put(i)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st := db.Stats().Checkpoints
	if st.Completed != 1 || st.Failed != 0 || st.Duration.Count != 1 || st.Duration.Sum <= 0 {
		t.Fatalf("after one checkpoint: %+v", st)
	}
	if st.BytesWritten == 0 || uint64(st.Bytes) != st.BytesWritten {
		t.Fatalf("one checkpoint wrote %d bytes, the newest is %d bytes", st.BytesWritten, st.Bytes)
	}
	if err := db.Checkpoint(); err != nil { // nothing new: no checkpoint
		t.Fatal(err)
	}
	if again := db.Stats().Checkpoints; again.Completed != 1 || again.Duration.Count != 1 || again.BytesWritten != st.BytesWritten {
		t.Fatalf("a checkpoint with nothing new counted: %+v", again)
	}

	put(keys)
	disarm := testsupport.Arm(t, fault.CkptWriteBefore, `return("eio")`)
	if err := db.Checkpoint(); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("checkpoint with a failing write: %v", err)
	}
	disarm()
	if failed := db.Stats().Checkpoints; failed.Completed != 1 || failed.Failed != 1 || failed.Duration.Count != 1 {
		t.Fatalf("after a failed checkpoint: %+v", failed)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	st = db.Stats().Checkpoints
	if st.Completed != 2 || st.Failed != 1 || st.Duration.Count != 2 || st.Bytes <= 0 {
		t.Fatalf("after the retry: %+v", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, quiet(Options{}))
	defer db.Close()
	if re := db.Stats().Checkpoints; re.Bytes != st.Bytes || re.Completed != 0 || re.BytesWritten != 0 {
		t.Fatalf("reopened: %+v, want the newest checkpoint's %d bytes and no counts", re, st.Bytes)
	}
}

// TestStats_FailStopped: Stats says fail-stopped exactly when Health does.
func TestStats_FailStopped(t *testing.T) {
	ctx := context.Background()
	db := openT(t, t.TempDir(), quiet(Options{}))
	defer db.Close()
	if db.Stats().FailStopped {
		t.Fatal("a new store is fail-stopped")
	}
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("eio")`)
	if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("k"), []byte("v"))); !errors.Is(err, store.ErrAmbiguous) {
		t.Fatalf("Apply during a failed fsync: %v", err)
	}
	disarm()
	if !db.Stats().FailStopped || !errors.Is(db.Health(), store.ErrFailStopped) {
		t.Fatalf("after a failed fsync: Stats().FailStopped %v, Health %v", db.Stats().FailStopped, db.Health())
	}
}
