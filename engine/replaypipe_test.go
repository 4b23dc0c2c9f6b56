package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// pipeLogBatches is how many of the replay's batches the test log fills:
// enough for the pipe to carry several while the applier works.
const pipeLogBatches = 4

// pipeBatchOps is the replay batch these tests set (smallReplayBatches),
// a sixteenth of replayBatchOps: the pipe's properties are in how many
// batches it carries, not in their size, and a log of four full batches
// took 5-23 s a test under -race.
const pipeBatchOps = 1 << 12

// pipeLogOps is how many ops each of the test log's entries holds: a
// sixteenth of a batch, so that batches end between and within entries.
const pipeLogOps = pipeBatchOps / 16

// pipeLogKeys is how many distinct keys the log writes: each about five
// times, in different batches, puts and deletes.
const pipeLogKeys = pipeLogBatches * pipeBatchOps / 5

// smallReplayBatches makes the replay's batches pipeBatchOps ops for the
// rest of the test (no engine test runs in parallel with these).
func smallReplayBatches(t *testing.T) {
	old := replayBatchFull
	replayBatchFull = pipeBatchOps
	t.Cleanup(func() { replayBatchFull = old })
}

// writePipeLog fills dir's log with pipeLogBatches replay batches' worth of
// puts and deletes over many WAL segments, and returns its segments. It
// makes the replay's batches small first (smallReplayBatches).
func writePipeLog(t *testing.T, dir string) []string {
	t.Helper()
	smallReplayBatches(t)
	db := openT(t, dir, quiet(Options{CheckpointLogBytes: -1, WAL: wal.Options{SegmentBytes: 32 << 10}}))
	for i := range pipeLogBatches * pipeBatchOps / pipeLogOps {
		b := new(store.Batch)
		for j := range pipeLogOps {
			k := []byte(fmt.Sprintf("k%06d", (i*pipeLogOps+j*7919)%pipeLogKeys))
			if j%5 == 4 {
				b.Delete(k)
			} else {
				b.Put(k, []byte(fmt.Sprintf("v%d", i)))
			}
		}
		if _, err := db.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return walSegments(t, dir)
}

// replayBoth replays dir's log into two fresh DBs: through the pipe over
// an empty chain's overlay, as an open of a store with no checkpoint does
// (replayoverlay.go), and entry by entry on one goroutine into the tree,
// as an open did before both. It returns both DBs and errors.
func replayBoth(t *testing.T, dir string) (piped, serial *DB, pipedErr, serialErr error) {
	t.Helper()
	log, _, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	piped, serial = bareDB(), bareDB()
	pr := replayer{db: piped, next: 1, over: &replayOverlay{}}
	pipedErr = pr.replay(log)
	sr := replayer{db: serial, next: 1}
	serialErr = log.Replay(1, sr.entry)
	if serialErr == nil {
		if serialErr = sr.handOff(); serialErr == nil {
			serialErr = sr.reachedEnd(log.NextIndex())
		}
	}
	return piped, serial, pipedErr, serialErr
}

// sameTrees fails unless a and b hold the same items, live bytes and
// applied version.
func sameTrees(t *testing.T, what string, a, b *DB) {
	t.Helper()
	if !slices.Equal(holding(a.tree), holding(b.tree)) || a.liveBytes != b.liveBytes || a.applied != b.applied {
		t.Fatalf("%s: piped replay holds %d items (live %d, applied %d), serial %d (live %d, applied %d)", what,
			a.tree.Len(), a.liveBytes, a.applied, b.tree.Len(), b.liveBytes, b.applied)
	}
}

// TestReplayPipe_LeavesWhatASerialReplayLeaves: an intact log of several
// replay batches replays through the pipe to the same tree, live bytes
// and applied version as entry by entry on one goroutine.
func TestReplayPipe_LeavesWhatASerialReplayLeaves(t *testing.T) {
	dir := t.TempDir()
	writePipeLog(t, dir)
	piped, serial, perr, serr := replayBoth(t, dir)
	if perr != nil || serr != nil {
		t.Fatalf("piped: %v, serial: %v", perr, serr)
	}
	if piped.applied == 0 || piped.tree.Len() == 0 {
		t.Fatal("nothing replayed")
	}
	sameTrees(t, "intact log", piped, serial)
}

// TestReplayPipe_CorruptEntryIsReportedAsBefore: a flipped bit in a
// segment near the log's end, batches after the replay's first, fails the
// piped replay with the error a serial replay gives — the same segment,
// entry and offset — having applied the same batches before it, and the
// open with it refuses as before.
func TestReplayPipe_CorruptEntryIsReportedAsBefore(t *testing.T) {
	dir := t.TempDir()
	segs := writePipeLog(t, dir)
	if len(segs) < 4 {
		t.Fatalf("want ≥ 4 segments, have %v", segs)
	}
	seg := segs[len(segs)-2]
	path := filepath.Join(dir, walDirName, seg)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(data)
	data[k+int(n)/2] ^= 0x10 // the segment's first entry
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	piped, serial, perr, serr := replayBoth(t, dir)
	var pwe, swe *wal.CorruptionError
	if !errors.As(perr, &pwe) || !errors.As(serr, &swe) || perr.Error() != serr.Error() || pwe.Segment != seg {
		t.Fatalf("piped: %v, serial: %v; want the same corruption in segment %s", perr, serr, seg)
	}
	if piped.applied < store.Version(pipeBatchOps/pipeLogOps) {
		t.Fatalf("applied %d: the corruption came before the pipe carried a batch", piped.applied)
	}
	sameTrees(t, "up to the corruption", piped, serial)
	_, err = Open(dir, quiet(Options{CheckpointLogBytes: -1}))
	if we := wantCorruption(t, err); we == nil || we.Segment != seg || we.Index != pwe.Index {
		t.Fatalf("open: %v, want the corruption of segment %s entry %d", err, seg, pwe.Index)
	}
}

// TestReplayPipe_ApplierPanicStopsTheReader: a broken invariant on the
// applier's side (a batch not newer than the tree) panics on the replay's
// caller, as before, and the reader stops instead of reading the rest of
// the log into batches nobody applies.
func TestReplayPipe_ApplierPanicStopsTheReader(t *testing.T) {
	dir := t.TempDir()
	writePipeLog(t, dir)
	log, _, err := wal.Open(filepath.Join(dir, walDirName), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	db := bareDB()
	db.applied = store.Version(log.NextIndex()) // every entry is "older"
	r := replayer{db: db, next: 1}
	testsupport.MustPanic(t, "versions strictly increase", func() { _ = r.replay(log) })
	// After the stop the reader sends no batch it had not begun to send:
	// the one waiting in the pipe and at most one racing the stop.
	sent, closed := 0, false
	testsupport.Poll(t, "the reader to close the pipe", 10*time.Second, func() bool {
		select {
		case _, ok := <-r.pipe.full:
			if ok {
				sent++
			}
			closed = !ok
		default:
		}
		return closed
	})
	if sent > replayPipeDepth+1 {
		t.Fatalf("the reader sent %d batches after the applier stopped (the log holds %d)", sent, pipeLogBatches)
	}
}
