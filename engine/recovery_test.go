package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal"
)

// Bounded recovery: a process that keeps crashing before it logged a
// checkpoint interval of its own must not make every restart replay more.
// The tail replayed at open counts towards the next checkpoint, which then
// runs in the background right after the open.

// TestOpen_RecoveryStaysBoundedAcrossACrashLoop crashes the store after
// each small burst of writes — less than a checkpoint interval per life —
// and checks that no open ever replays more than one interval plus one
// life's writes, and that the log on disk stays bounded.
func TestOpen_RecoveryStaysBoundedAcrossACrashLoop(t *testing.T) {
	const (
		interval = 64 << 10
		lives    = 40
		perLife  = 40 // batches of ~600 bytes: ~24 KiB per life, over 50 keys (a ~30 KiB store)
	)
	opts := Options{CheckpointLogBytes: interval, WAL: wal.Options{SegmentBytes: 16 << 10}}
	disk := newMemDisk()
	ctx := context.Background()
	value := []byte(strings.Repeat("v", 560))
	maxReplayed, checkpoints := int64(0), 0
	for life := range lives {
		db, err := disk.reopen(opts)
		if err != nil {
			t.Fatalf("life %d: open: %v", life, err)
		}
		rec := db.Stats().Recovery
		maxReplayed = max(maxReplayed, rec.ReplayedBytes)
		if rec.ReplayedBytes >= interval {
			// The open asked for a checkpoint (the store is smaller than
			// an interval, so the interval is the trigger): let it finish,
			// as a process that lives a few seconds would.
			waitFor(t, "the checkpoint after a long replay", func() bool { return db.Stats().Checkpoint > rec.FromCheckpoint })
			checkpoints++
		}
		for i := range perLife {
			k := fmt.Appendf(nil, "k%03d", (life*perLife+i)%50)
			if _, err := db.Apply(ctx, new(Batch).Put(k, value)); err != nil {
				t.Fatal(err)
			}
		}
		disk.Crash(db, memfs.DropUnsynced)
	}
	if limit := int64(interval + perLife*700); maxReplayed > limit {
		t.Fatalf("an open replayed %d bytes, more than one interval plus one life (%d)", maxReplayed, limit)
	}
	if checkpoints == 0 {
		t.Fatal("no open ever checkpointed its replayed tail")
	}
	if used := disk.FS().Used(); used > 6*interval {
		t.Fatalf("the disk holds %d bytes after %d crashes, want it bounded by a few checkpoint intervals", used, lives)
	}
	t.Logf("max replayed %d bytes; %d checkpoints after open; %d bytes on disk", maxReplayed, checkpoints, disk.FS().Used())
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
