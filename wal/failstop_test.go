package wal

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/idemdb/idem/fault"
)

// Fail-stop (DESIGN §3): after a write or fsync error the failing group's
// appenders get ErrAmbiguous, every later append ErrFailStopped, and only a
// reopen makes progress again.

// armT arms a failpoint and returns its disarm function, which also runs at
// cleanup. It disarms exactly once: fault.Disable of a disarmed failpoint
// unbalances fault's armed counter (see fault's skipped
// TestDisable_TwiceKeepsOtherFailpointsArmed).
func armT(t *testing.T, name, terms string) (disarm func()) {
	t.Helper()
	if !fault.Compiled {
		t.Skip("failpoints compiled out (-tags nofailpoint)")
	}
	if err := fault.Enable(name, terms); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	disarm = func() {
		once.Do(func() {
			if err := fault.Disable(name); err != nil {
				t.Errorf("disable %s: %v", name, err)
			}
		})
	}
	t.Cleanup(disarm)
	return disarm
}

func TestFailStop_FsyncErrorIsAmbiguousThenRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLogT(t, dir, Options{SegmentBytes: 4096})
	for i := uint64(1); i <= 10; i++ {
		appendSync(t, l, body(i))
	}
	before := fault.Hits(fault.WALSyncBefore)
	disarm := armT(t, fault.WALSyncBefore, `return("eio")`)
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

// DurableTail must describe the file it names: when a failed group had
// already made tidwall start a new segment, none of that segment is durable.
func TestCrash_DurableTailOfNewSegmentStartsAtZero(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 512}
	l, _ := openLogT(t, dir, opts)
	var n uint64
	for n = 1; n <= 8; n++ {
		appendSync(t, l, []byte(strings.Repeat("x", 50)))
	}
	n--
	oldPath, oldDurable := l.DurableTail()
	if oldDurable == 0 {
		t.Fatalf("no durable bytes in %s", oldPath)
	}
	disarm := armT(t, fault.WALSyncBefore, `return("crash")`)
	ctx := context.Background()
	if err := l.Reserve(ctx); err != nil {
		t.Fatal(err)
	}
	// Larger than what is left of the segment: the group cycles.
	_, c, err := l.Enqueue(KindBatch, []byte(strings.Repeat("y", 200)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("got %v, want ErrAmbiguous", err)
	}
	path, durable := l.DurableTail()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if path == oldPath {
		t.Fatalf("group did not start a new segment")
	}
	if durable != 0 || durable > fi.Size() {
		t.Fatalf("DurableTail = %s %d (file has %d bytes), want 0 for a segment created by the failed group", path, durable, fi.Size())
	}
	if err := l.Crash(DropUnsynced); err != nil {
		t.Fatal(err)
	}
	disarm()

	l, rep := openLogT(t, dir, opts)
	defer l.Close()
	if rep.Segment != "" {
		t.Fatalf("dropping unsynced bytes left debris to repair: %+v", rep)
	}
	if got := l.NextIndex() - 1; got != n && got != n+1 {
		t.Fatalf("log ends at %d, want %d or %d", got, n, n+1)
	}
}
