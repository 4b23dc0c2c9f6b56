package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// gatedFS holds every fsync of a WAL segment while armed: the test learns
// that the writer reached one (entered) and lets it go (open). It is how a
// test keeps the log's writer busy while batches queue up behind it, so
// that they deterministically form the next group.
type gatedFS struct {
	vfs.FS
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(filepath.Dir(name)) != "wal" || len(filepath.Base(name)) != 20 {
		return f, err
	}
	return gatedFile{f, g}, nil
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f gatedFile) Sync() error {
	if f.g.armed.CompareAndSwap(true, false) {
		f.g.entered <- struct{}{}
		<-f.g.gate
	}
	return f.File.Sync()
}

// incrementAfter is one increment of counter staged on its newest
// version, durable or not (GetLatest), conditioned on it, with marker i.
func incrementAfter(ctx context.Context, db *DB, i int) (*store.Batch, error) {
	n, ver := 0, store.Version(0)
	it, err := db.GetLatest(ctx, []byte("counter"))
	switch {
	case err == nil:
		n, _ = strconv.Atoi(string(it.Value))
		ver = it.Version
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	b := new(store.Batch).AtVersion([]byte("counter"), ver).Put([]byte("counter"), []byte(strconv.Itoa(n+1)))
	return b.Put([]byte(fmt.Sprintf("marker-%02d", i)), []byte("x")), nil
}

// TestGetLatest_ChainOfIncrementsSharesAGroupAndACrashKeepsAPrefix is
// issue 37's many-increments-per-fsync on the engine: increments of one
// key, each staged on the one before it while that one is not yet durable
// (GetLatest, released by OnSequenced), all pass their conditions and go
// to the log as one group; a power loss that tears that group at any byte
// keeps a prefix of the increments — the counter equals the markers kept,
// and they are exactly the first ones.
func TestGetLatest_ChainOfIncrementsSharesAGroupAndACrashKeepsAPrefix(t *testing.T) {
	testsupport.RequireFailpoints(t)
	const incs = 6
	crashAt := func(keep int) (counter int, markers map[string]bool, unsynced int) {
		disk := newMemDisk()
		g := &gatedFS{FS: disk.FS(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
		opts := quiet(Options{FS: g, WAL: wal.Options{NoPreallocation: true}})
		db := openT(t, memDataDir, opts)
		ctx := context.Background()
		if _, err := db.Apply(ctx, new(store.Batch).Put([]byte("base"), []byte("0"))); err != nil {
			t.Fatal(err)
		}
		// Hold the writer in the fsync of a first group, so that every
		// increment queues behind it and forms the next group.
		g.armed.Store(true)
		blocker := make(chan error, 1)
		go func() { _, err := db.Apply(ctx, new(store.Batch).Put([]byte("blocker"), []byte("x"))); blocker <- err }()
		<-g.entered
		errs := make([]error, incs)
		var wg sync.WaitGroup
		next := make(chan struct{}, 1)
		next <- struct{}{}
		for i := range incs {
			awaitSequenced(t, next) // the one before: stage on it
			b, err := incrementAfter(ctx, db, i)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				_, errs[i] = db.Apply(store.OnSequenced(ctx, func() { next <- struct{}{} }), b)
			})
		}
		awaitSequenced(t, next) // the last
		disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("power loss")`)
		close(g.gate)
		if err := <-blocker; err != nil {
			t.Fatalf("the group before the increments: %v", err)
		}
		wg.Wait()
		disarm()
		for i, err := range errs {
			if !errors.Is(err, store.ErrAmbiguous) {
				t.Fatalf("increment %d, whose group's fsync failed: %v (a failed condition means it did not stage on its predecessor)", i, err)
			}
		}
		for _, n := range disk.Crash(db, memfs.KeepUnsynced(keep)) {
			unsynced += n
		}
		db, err := disk.reopen(quiet(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		got := scanAll(t, db)
		if _, ok := got["blocker"]; !ok {
			t.Fatal("the durable group before the increments is lost")
		}
		markers = map[string]bool{}
		for k := range got {
			if len(k) > 7 && k[:7] == "marker-" {
				markers[k] = true
			}
		}
		if it, ok := got["counter"]; ok {
			counter, _ = strconv.Atoi(string(it.Value))
		}
		return counter, markers, unsynced
	}
	_, _, unsynced := crashAt(0)
	if unsynced <= 0 {
		t.Fatalf("the increments left %d unsynced bytes", unsynced)
	}
	seen := map[int]bool{}
	for keep := 0; keep <= unsynced; keep++ {
		counter, markers, _ := crashAt(keep)
		if len(markers) != counter {
			t.Fatalf("cut after %d of %d bytes: counter %d with markers %v", keep, unsynced, counter, markers)
		}
		for i := range counter {
			if !markers[fmt.Sprintf("marker-%02d", i)] {
				t.Fatalf("cut after %d of %d bytes: counter %d without increment %d: not a prefix (%v)", keep, unsynced, counter, i, markers)
			}
		}
		seen[counter] = true
	}
	for c := 0; c <= incs; c++ {
		if !seen[c] {
			t.Errorf("no cut kept exactly %d increments (seen %v)", c, seen)
		}
	}
}

// awaitSequenced waits for an increment to be sequenced: one that failed
// its condition never is (it waits on its predecessor's fsync, held).
func awaitSequenced(t *testing.T, next <-chan struct{}) {
	t.Helper()
	select {
	case <-next:
	case <-time.After(30 * time.Second):
		t.Fatal("an increment was not sequenced: it did not stage on its predecessor's pending write")
	}
}

// TestGetLatest_ReadsPendingGetDoesNot: a write sequenced and not yet
// durable is what GetLatest returns (value and version), while Get —
// every answer's read — still returns the durable state; a pending
// delete reads as not found.
func TestGetLatest_ReadsPendingGetDoesNot(t *testing.T) {
	disk := newMemDisk()
	g := &gatedFS{FS: disk.FS(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	db := openT(t, memDataDir, quiet(Options{FS: g, WAL: wal.Options{NoPreallocation: true}}))
	ctx := context.Background()
	v1, err := db.Apply(ctx, new(store.Batch).Put([]byte("k"), []byte("old")).Put([]byte("gone"), []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	done := make(chan error, 1)
	seq := make(chan struct{}, 1)
	go func() {
		_, err := db.Apply(store.OnSequenced(ctx, func() { seq <- struct{}{} }),
			new(store.Batch).Put([]byte("k"), []byte("new")).Delete([]byte("gone")))
		done <- err
	}()
	<-seq
	<-g.entered
	if it, err := db.GetLatest(ctx, []byte("k")); err != nil || string(it.Value) != "new" || it.Version <= v1 {
		t.Fatalf("GetLatest of a pending write: %q@%d %v, want new after %d", it.Value, it.Version, err, v1)
	}
	if _, err := db.GetLatest(ctx, []byte("gone")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetLatest of a pending delete: %v, want ErrNotFound", err)
	}
	if it, err := db.Get(ctx, []byte("k")); err != nil || string(it.Value) != "old" || it.Version != v1 {
		t.Fatalf("Get while the write is pending: %q@%d %v, want old@%d", it.Value, it.Version, err, v1)
	}
	close(g.gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pending write never became durable")
	}
	if it, err := db.Get(ctx, []byte("k")); err != nil || string(it.Value) != "new" {
		t.Fatalf("Get once durable: %q %v", it.Value, err)
	}
}
