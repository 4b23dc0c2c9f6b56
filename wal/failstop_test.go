package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/vfs/errorfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Fail-stop (docs/design.md §3): after a write or fsync error the failing group's
// appenders get ErrAmbiguous, every later append ErrFailStopped, and only a
// reopen makes progress again.

func TestFailStop_FsyncErrorIsAmbiguousThenRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLogT(t, dir, Options{SegmentBytes: 4096})
	for i := uint64(1); i <= 10; i++ {
		appendSync(t, l, body(i))
	}
	before := fault.Hits(fault.WALSyncBefore)
	disarm := testsupport.Arm(t, fault.WALSyncBefore, `return("eio")`)
	ctx := context.Background()
	if err := l.Reserve(ctx); err != nil {
		t.Fatal(err)
	}
	_, c, err := l.Enqueue(KindBatch, body(11), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Wait(ctx)
	if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("append whose fsync failed: %v, want ErrAmbiguous", err)
	}
	if fault.Hits(fault.WALSyncBefore) == before {
		t.Fatalf("failpoint did not fire")
	}
	disarm()
	// Even with the fault gone the log never retries: it stays stopped.
	if err := l.Reserve(ctx); !errors.Is(err, ErrFailStopped) {
		t.Fatalf("reserve after fail-stop: %v, want ErrFailStopped", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close after fail-stop: %v", err)
	}

	l, _ = openLogT(t, dir, Options{SegmentBytes: 4096})
	n := l.NextIndex() - 1
	if n != 10 && n != 11 {
		t.Fatalf("after reopen the log ends at %d, want 10 or 11", n)
	}
	if idx := appendSync(t, l, []byte("after")); idx != n+1 {
		t.Fatalf("append after reopen at %d, want %d", idx, n+1)
	}
	l.Close()
	got, _, err := replayAll(t, dir, Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	checkBodies(t, got[:10], 10)
}

// A segment that a group created is not durable until its directory is
// fsynced: a crash before that loses the file itself, and with it the part
// of the group written there — which was never acknowledged.
func TestCrash_ANewSegmentIsLostUntilItsDirectoryIsSynced(t *testing.T) {
	opts := Options{SegmentBytes: 512}
	for _, via := range []string{"errorfs", "failpoint"} {
		t.Run(via, func(t *testing.T) {
			d := newMemDisk()
			l, _ := d.mustOpen(t, opts)
			var acked []string
			for i := uint64(1); i <= 8; i++ {
				b := []byte(strings.Repeat("x", 50))
				appendSync(t, l, b)
				acked = append(acked, string(b))
			}
			before := d.segments(t)
			if via == "errorfs" {
				d.efs.Add(errorfs.Rule{Op: errorfs.OpSyncDir, PathContains: "wal", Err: errorfs.EIO})
			} else {
				testsupport.Arm(t, fault.WALDirSyncBefore, `return("crash")`)
			}
			// Larger than what is left of the segment: the group cycles.
			err := appendGroup(l, []byte(strings.Repeat("y", 200)), []byte(strings.Repeat("z", 300)))
			if !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("group whose directory sync failed: %v, want ErrAmbiguous", err)
			}
			if after := d.segments(t); len(after) <= len(before) {
				t.Fatalf("the group did not create a segment (%d before, %d after)", len(before), len(after))
			}
			d.crash(l, memfs.KeepAll)
			if after := d.segments(t); len(after) != len(before) {
				t.Fatalf("the crash kept a segment whose directory entry was never synced: %d segments, want %d", len(after), len(before))
			}
			got, _, err := d.replay(opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) < len(acked) || !slices.Equal(got[:len(acked)], acked) {
				t.Fatalf("%d entries recovered, want the %d acknowledged first", len(got), len(acked))
			}
		})
	}
}

// An fsync error reported by the file system is never acknowledged: the
// group's appenders get ErrAmbiguous and the log fail-stops. A log that
// swallowed the error would acknowledge a write the crash then loses.
func TestFailStop_ASyncErrorAtTheSeamIsNeverAcknowledged(t *testing.T) {
	d := newMemDisk()
	l, _ := d.mustOpen(t, oneSegment)
	acked := []string{string(body(1)), string(body(2))}
	appendSync(t, l, body(1))
	appendSync(t, l, body(2))
	d.efs.Add(errorfs.Rule{Op: errorfs.OpSync, Err: errorfs.EIO})
	if err := appendGroup(l, body(3)); !errors.Is(err, ErrAmbiguous) || !errors.Is(err, errorfs.EIO) {
		t.Fatalf("append whose fsync failed with EIO: %v, want ErrAmbiguous wrapping EIO", err)
	}
	if err := appendGroup(l, body(4)); !errors.Is(err, ErrFailStopped) {
		t.Fatalf("append after the failed fsync: %v, want ErrFailStopped", err)
	}
	d.crash(l, nil)
	got, _, err := d.replay(oneSegment)
	if err != nil || !slices.Equal(got, acked) {
		t.Fatalf("after the crash: %q, %v; want exactly the acknowledged %q", got, err, acked)
	}
}

// TestCrash_AtEveryFileSystemCallNothingAcknowledgedIsLost crashes a log
// under concurrent appenders at each of the first few hundred file-system
// calls after open — writes, fsyncs, segment creations, directory syncs —
// and checks that every append that returned nil survives, in order. This
// is what catches a writer that acknowledges before its fsync returned.
func TestCrash_AtEveryFileSystemCallNothingAcknowledgedIsLost(t *testing.T) {
	opts := Options{SegmentBytes: 700}
	calls := 300
	if testing.Short() {
		calls = 120
	}
	for n := int64(1); n <= int64(calls); n++ {
		d := newMemDisk()
		l, _ := d.mustOpen(t, opts)
		d.fs.CrashAt(n)
		var mu sync.Mutex
		acked := map[string]bool{}
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					b := fmt.Appendf(nil, "w%d-%03d-%s", w, i, strings.Repeat("p", (i*7+w)%40))
					if err := appendGroup(l, b); err != nil {
						if !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrFailStopped) {
							t.Errorf("append: %v", err)
						}
						return
					}
					mu.Lock()
					acked[string(b)] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if !d.fs.Crashed() {
			t.Fatalf("crash at call %d never happened", n)
		}
		for _, tear := range []memfs.Tear{memfs.DropUnsynced, memfs.KeepAll} {
			d.crash(l, tear)
			got, _, err := d.replay(opts)
			if err != nil {
				t.Fatalf("crash at call %d: recovery: %v", n, err)
			}
			have := map[string]bool{}
			for _, b := range got {
				have[b] = true
			}
			for b := range acked {
				if !have[b] {
					t.Fatalf("crash at call %d: acknowledged entry %q lost (%d recovered, %d acknowledged)", n, b, len(got), len(acked))
				}
			}
		}
	}
}
