package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// TestFailStop_IOErrorIsAmbiguousThenRefusesWritesUntilReopen: when a
// group's write or fsync fails, its Apply gets ErrAmbiguous, every later
// Apply ErrFailStopped (even with the fault gone: an fsync is never
// retried), reads keep serving the durable state, and Close + Open recovers
// a store that accepts writes, with the ambiguous batch all there or not at
// all.
func TestFailStop_IOErrorIsAmbiguousThenRefusesWritesUntilReopen(t *testing.T) {
	for _, name := range []string{fault.WALSyncBefore, fault.WALWriteBefore, fault.WALWriteAfter, fault.WALSyncAfter} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			opts := quiet(Options{WAL: wal.Options{SegmentBytes: 4096}})
			db := openT(t, dir, opts)
			for i := 0; i < 20; i++ {
				k := []byte(fmt.Sprintf("k%02d", i))
				if _, err := db.Apply(ctx, new(store.Batch).Absent(k).Put(k, []byte("v"))); err != nil {
					t.Fatal(err)
				}
			}
			durable := scanAll(t, db)

			before := fault.Hits(name)
			disarm := testsupport.Arm(t, name, `return("eio")`)
			amb := new(store.Batch).Put([]byte("amb/a"), []byte("x")).Put([]byte("amb/b"), []byte("x")).Delete([]byte("k00"))
			_, err := db.Apply(ctx, amb)
			if !errors.Is(err, store.ErrAmbiguous) || !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("Apply whose group failed at %s: %v, want ErrAmbiguous", name, err)
			}
			if fault.Hits(name) == before {
				t.Fatalf("failpoint %s did not fire", name)
			}
			disarm()

			for _, b := range []*store.Batch{
				new(store.Batch).Put([]byte("later"), []byte("x")),
				new(store.Batch).Absent([]byte("k01")).Put([]byte("k01"), []byte("y")), // would fail its condition
			} {
				if _, err := db.Apply(ctx, b); !errors.Is(err, store.ErrFailStopped) {
					t.Fatalf("Apply after fail-stop: %v, want ErrFailStopped", err)
				}
			}
			// Reads serve exactly the durable state: the ambiguous batch is
			// not visible before it is known durable.
			sameState(t, "reads after fail-stop", scanAll(t, db), durable)
			if snap := db.Snapshot(); snap.Len() != len(durable) {
				t.Fatalf("snapshot after fail-stop has %d keys, want %d", snap.Len(), len(durable))
			}
			if err := db.Close(); err != nil {
				t.Fatalf("close after fail-stop: %v", err)
			}

			db = openT(t, dir, opts)
			got := scanAll(t, db)
			_, a := got["amb/a"]
			_, b := got["amb/b"]
			_, k0 := got["k00"]
			switch {
			case a && b && !k0: // applied
				delete(durable, "k00")
				durable["amb/a"], durable["amb/b"] = got["amb/a"], got["amb/b"]
			case !a && !b && k0: // not applied
			default:
				t.Fatalf("ambiguous batch partly applied: amb/a %v, amb/b %v, k00 deleted %v", a, b, !k0)
			}
			sameState(t, "after reopen", got, durable)
			if _, err := db.Apply(ctx, new(store.Batch).Absent([]byte("later")).Put([]byte("later"), []byte("x"))); err != nil {
				t.Fatalf("Apply after reopen: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckpoint_IOErrorKeepsLogAndStoreWritable: a failed checkpoint
// (at any of its steps) is reported, loses nothing and does not stop
// writes; the next checkpoint and a reopen succeed.
func TestCheckpoint_IOErrorKeepsLogAndStoreWritable(t *testing.T) {
	for _, name := range fault.Names("engine") {
		if strings.HasPrefix(name, "engine/ckpt-merge-") {
			continue // a merge's steps: TestMerge_AFailedStepLosesNothingAndIsRetried
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			opts := quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 1024},
				ColdValue: testCold, ValueLogSegmentBytes: 256})
			db := openT(t, dir, opts)
			put := func(i int) {
				t.Helper()
				if _, err := db.Apply(ctx, new(store.Batch).Put([]byte(fmt.Sprintf("k%03d", i%50)), []byte(fmt.Sprintf("value %04d of the test", i)))); err != nil {
					t.Fatal(err)
				}
			}
			// A first checkpoint spills every value; the writes after it
			// leave its value-log segments dead, for the collector.
			for i := 0; i < 100; i++ {
				put(i)
			}
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			for i := 100; i < 150; i++ {
				put(i)
			}
			before := fault.Hits(name)
			disarm := testsupport.Arm(t, name, `return("eio")`)
			if err := db.Checkpoint(); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("checkpoint with %s armed: %v, want the injected error", name, err)
			}
			if fault.Hits(name) == before {
				t.Fatalf("failpoint %s did not fire", name)
			}
			disarm()
			for i := 100; i < 200; i++ {
				put(i)
			}
			if err := db.Checkpoint(); err != nil {
				t.Fatalf("checkpoint after the fault: %v", err)
			}
			put(200)
			want := scanAll(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openT(t, dir, opts)
			defer db.Close()
			sameState(t, "after reopen", scanAll(t, db), want)
		})
	}
}
