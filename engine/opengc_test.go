package engine

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// gcPercent is the process's GC percent, read by setting it back.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestOpen_CollectionPausedDuringRecoveryAndPutBack: collection is off
// while opens recover — overlapping ones too — and the GC percent the
// process had is back once the last has finished, whether the open
// succeeded or failed; collection the process had turned off stays off.
func TestOpen_CollectionPausedDuringRecoveryAndPutBack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	first := pauseGCForOpen()
	second := pauseGCForOpen()
	if p := gcPercent(); p != -1 {
		t.Fatalf("during recovery: GC percent %d, want -1", p)
	}
	first()
	first() // a resume is once, however often it is called
	if p := gcPercent(); p != -1 {
		t.Fatalf("one of two recoveries finished: GC percent %d, want -1", p)
	}
	second()
	if p := gcPercent(); p != 77 {
		t.Fatalf("after recovery: GC percent %d, want 77", p)
	}

	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: -1, CollectorOffAtOpen: true, WAL: wal.Options{SegmentBytes: 1024}})
	db := openT(t, dir, opts)
	fillStore(t, db, 100)
	if p := gcPercent(); p != 77 {
		t.Fatalf("after Open: GC percent %d, want 77", p)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, walDirName, walSegments(t, dir)[1])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x04 // mid-log: corruption, not a torn tail
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, opts); err == nil {
		t.Fatal("Open of a corrupt log succeeded")
	}
	if p := gcPercent(); p != 77 {
		t.Fatalf("after a failed Open: GC percent %d, want 77", p)
	}

	debug.SetGCPercent(-1)
	resume := pauseGCForOpen()
	resume()
	if p := gcPercent(); p != -1 {
		t.Fatalf("collection was off before the recovery: GC percent %d after it, want -1", p)
	}
}

// TestReplay_CollectorBackOnPastTheLogBound: a replay that reads more than
// gcPauseLogBytes of log — a store run without checkpoints — puts the
// collector back on once, at the entry that crosses the bound, so that
// chunks of overwritten records do not pile up for the rest of it.
func TestReplay_CollectorBackOnPastTheLogBound(t *testing.T) {
	body := encodeBody(nil, []store.Op{{Key: []byte("k"), Value: []byte("v")}})
	calls, at := 0, uint64(0)
	r := replayer{db: bareDB(), next: 1}
	r.resumeGC = func() { calls++; at = r.next - 1 }
	r.bytes = gcPauseLogBytes - int64(len(body)) // entry 1 reaches the bound, entry 2 passes it
	for index := uint64(1); index <= 3; index++ {
		if err := r.entry(index, wal.KindBatch, body); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 || at != 2 {
		t.Fatalf("collector put back %d times, at entry %d; want once, at entry 2", calls, at)
	}
}
