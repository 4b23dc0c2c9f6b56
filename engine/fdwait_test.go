package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/wal"
)

// Out of file descriptors (issue 35): EMFILE or ENFILE on an open is
// waited out, by the WAL and by checkpoints alike; it never fail-stops the
// store and never fails a checkpoint. A real I/O error is what it was.

// A checkpoint whose file's open meets a shortage 3 times completes, base
// and delta alike, and the store recovers from it.
func TestDescriptors_ACheckpointWaitsOutAShortage(t *testing.T) {
	for _, kind := range []struct{ name, tmp string }{
		{"base", ckptSuffix + ckptTmpSuffix},
		{"delta", deltaSuffix + ckptTmpSuffix},
	} {
		t.Run(kind.name, func(t *testing.T) {
			disk := newMemDisk()
			efs := errorfs.Wrap(disk.FS())
			opts := deltaTestOpts()
			opts.FS = efs
			db := openT(t, memDataDir, opts)
			fillStore(t, db, 200)
			if kind.name == "delta" {
				checkpointT(t, db)
				apply(t, db, new(store.Batch).Put([]byte("after-base"), []byte("1")))
			}
			efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: kind.tmp, Times: 3, Err: errorfs.EMFILE})
			if err := db.Checkpoint(); err != nil {
				t.Fatalf("checkpoint whose open met EMFILE 3 times: %v, want it to wait", err)
			}
			st := db.Stats()
			if st.DescriptorWaits != 1 || st.Checkpoints.Failed != 0 || st.FailStopped {
				t.Fatalf("waits %d, failed checkpoints %d, fail-stopped %v; want 1, 0, false",
					st.DescriptorWaits, st.Checkpoints.Failed, st.FailStopped)
			}
			want := scanAll(t, db)
			db = reopenT(t, db, memDataDir, opts)
			defer db.Close()
			if got := db.Stats().Recovery; got.FromCheckpoint != st.Checkpoint {
				t.Fatalf("recovery %+v, want from checkpoint %d", got, st.Checkpoint)
			}
			sameState(t, "after reopen", scanAll(t, db), want)
		})
	}
}

// An EIO on the same open fails the checkpoint, as it always did (the
// store stays writable; a checkpoint is retried, not waited for).
func TestDescriptors_EIOOnACheckpointStillFailsIt(t *testing.T) {
	disk := newMemDisk()
	efs := errorfs.Wrap(disk.FS())
	opts := deltaTestOpts()
	opts.FS = efs
	db := openT(t, memDataDir, opts)
	defer db.Close()
	fillStore(t, db, 50)
	efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: ckptSuffix + ckptTmpSuffix, Err: errorfs.EIO})
	if err := db.Checkpoint(); !errors.Is(err, errorfs.EIO) {
		t.Fatalf("checkpoint whose open failed with EIO: %v, want EIO", err)
	}
	if w := db.Stats().DescriptorWaits; w != 0 {
		t.Fatalf("DescriptorWaits %d after an EIO, want 0", w)
	}
}

// walRoll makes every WAL segment roll open a file (no spare).
func walRoll() Options {
	return quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024, NoPreallocation: true}})
}

// A WAL segment roll under the engine waits out a shortage: every Apply
// succeeds, nothing fail-stops, and every acknowledged batch is there
// after a reopen. An EIO on the same open fail-stops, as it always did.
func TestDescriptors_AWALRollWaitsOutAShortageButNotEIO(t *testing.T) {
	for _, tc := range []struct {
		err       error
		failStops bool
	}{{errorfs.EMFILE, false}, {errorfs.ENFILE, false}, {errorfs.EIO, true}} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			disk := newMemDisk()
			efs := errorfs.Wrap(disk.FS())
			opts := walRoll()
			opts.FS = efs
			db := openT(t, memDataDir, opts)
			efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: "/wal/0000", Times: 3, Err: tc.err})
			var err error
			for i := 0; i < 60 && err == nil; i++ { // about 4 segments' worth
				_, err = db.Apply(context.Background(), new(store.Batch).Put([]byte(fmt.Sprintf("k%03d", i)), []byte("value of the test")))
			}
			st := db.Stats()
			if !tc.failStops {
				if err != nil || st.FailStopped || st.WAL.DescriptorWaits != 1 {
					t.Fatalf("apply: %v, fail-stopped %v, WAL waits %d; want nil, false, 1", err, st.FailStopped, st.WAL.DescriptorWaits)
				}
			} else if !errors.Is(err, store.ErrAmbiguous) || !errors.Is(db.Health(), store.ErrFailStopped) {
				t.Fatalf("apply whose segment open failed with EIO: %v, health %v; want ErrAmbiguous, then fail-stopped", err, db.Health())
			}
			want := scanAll(t, db)
			db.Close()
			db = disk.open(t, walRoll())
			defer db.Close()
			got := scanAll(t, db)
			if tc.failStops {
				delete(got, fmt.Sprintf("k%03d", len(want))) // the ambiguous batch may be there
			}
			sameState(t, "after reopen", got, want)
		})
	}
}

// Close while a checkpoint's open keeps failing with EMFILE returns: the
// wait ends and the checkpoint fails (the next open resumes or redoes it).
func TestDescriptors_CloseEndsACheckpointsWait(t *testing.T) {
	disk := newMemDisk()
	efs := errorfs.Wrap(disk.FS())
	opts := deltaTestOpts()
	opts.FS = efs
	db := openT(t, memDataDir, opts)
	fillStore(t, db, 50)
	want := scanAll(t, db)
	efs.Add(errorfs.Rule{Op: errorfs.OpCreate, PathContains: ckptSuffix + ckptTmpSuffix, Sticky: true, Err: errorfs.EMFILE})
	ckpt := make(chan error, 1)
	go func() { ckpt <- db.Checkpoint() }()
	testsupport.Poll(t, "a checkpoint waiting for a descriptor", testsupport.Patience, func() bool { return db.fds.Waiting() > 0 })
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(testsupport.Patience):
		t.Fatal("Close hangs while a checkpoint waits for a descriptor")
	}
	if err := <-ckpt; !errors.Is(err, errorfs.EMFILE) {
		t.Fatalf("the waiting checkpoint: %v, want EMFILE", err)
	}
	efs.Clear()
	db = disk.open(t, deltaTestOpts())
	defer db.Close()
	sameState(t, "after reopen", scanAll(t, db), want)
}
