package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs/errorfs"
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
			// and the merge it may start (the log is cut to a new base
			// only once that is linked), as a process that lives a few
			// seconds would. Without the merge's wait the disk bound
			// below depended on the machine's load: a run at load 6
			// crashed every life before its merge linked.
			testsupport.Poll(t, "the checkpoint and its merge after a long replay", testsupport.Patience, func() bool {
				return db.Stats().Checkpoint > rec.FromCheckpoint && !mergeInFlight(db)
			})
			checkpoints++
		}
		for i := range perLife {
			k := fmt.Appendf(nil, "k%03d", (life*perLife+i)%50)
			if _, err := db.Apply(ctx, new(store.Batch).Put(k, value)); err != nil {
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

// TestCheckpoint_ACrashMidCheckpointKeepsItsParts: a checkpoint cut short
// by a crash is resumed by the next process from its last durable part —
// not restarted — and the generation it completes, written by two
// processes from two snapshots, recovers the exact state.
func TestCheckpoint_ACrashMidCheckpointKeepsItsParts(t *testing.T) {
	ctx := context.Background()
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, CheckpointPartBytes: 1 << 10, WAL: wal.Options{SegmentBytes: 4 << 10}}
	efs := errorfs.Wrap(disk.FS())
	o := disk.opts(opts)
	o.FS = efs
	db := openT(t, memDataDir, o)
	fillStore(t, db, 200)
	// The third part's rename fails: two parts are durable, then the power goes.
	efs.Add(errorfs.Rule{Op: errorfs.OpRename, PathContains: ckptSuffix + ckptTmpSuffix, Nth: 3, Err: errorfs.EIO})
	if err := db.Checkpoint(); !errors.Is(err, errorfs.EIO) {
		t.Fatalf("checkpoint whose third part fails: %v", err)
	}
	for i := range 50 {
		k := []byte(fmt.Sprintf("k%03d", i))
		if _, err := db.Apply(ctx, new(store.Batch).Put(k, []byte(fmt.Sprintf("changed-after-the-first-parts-%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	state := scanAll(t, db)
	disk.Crash(db, memfs.DropUnsynced)

	db = disk.open(t, opts)
	sameState(t, "after the crash", scanAll(t, db), state)
	gens, err := listGenerations(disk.FS(), memDataDir)
	if err != nil || len(gens) != 1 || gens[0].complete() || len(gens[0].parts) != 2 {
		t.Fatalf("after the crash: %+v, %v; want one incomplete checkpoint of two parts", gens, err)
	}
	interrupted := gens[0]
	if db.ckptPending == nil || db.ckptPending.v0 != interrupted.v0 || len(db.ckptPending.parts) != 2 {
		t.Fatalf("the open does not resume the interrupted checkpoint: %+v", db.ckptPending)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	gens, _ = listGenerations(disk.FS(), memDataDir)
	if len(gens) != 1 || !gens[0].complete() || gens[0].v0 != interrupted.v0 {
		t.Fatalf("after resuming: %+v, want the interrupted checkpoint completed", gens)
	}
	for i, p := range gens[0].parts[:2] {
		if p.version != interrupted.parts[i].version {
			t.Fatalf("part %d was rewritten (version %d, was %d): progress was lost", i, p.version, interrupted.parts[i].version)
		}
	}
	if last := gens[0].parts[len(gens[0].parts)-1]; last.version <= interrupted.parts[0].version {
		t.Fatalf("the resumed parts come from the old snapshot (version %d)", last.version)
	}
	disk.Crash(db, memfs.DropUnsynced)
	db = disk.open(t, opts)
	defer db.Close()
	if got := db.Stats().Recovery.FromCheckpoint; got != interrupted.v0 {
		t.Fatalf("recovered from checkpoint %d, want the one two processes wrote (%d)", got, interrupted.v0)
	}
	sameState(t, "from the checkpoint two processes wrote", scanAll(t, db), state)
}

// TestOpen_RecoveryStaysBoundedWhenACheckpointOutlastsALife: every process
// lives long enough to write two parts of a checkpoint of many, then
// crashes. Checkpoints still complete — each life adds its parts — so the
// log a restart replays stays bounded however many lives there are.
func TestOpen_RecoveryStaysBoundedWhenACheckpointOutlastsALife(t *testing.T) {
	ctx := context.Background()
	disk := newMemDisk()
	opts := Options{CheckpointLogBytes: -1, CheckpointPartBytes: 2 << 10, WAL: wal.Options{SegmentBytes: 8 << 10}}
	value := []byte(strings.Repeat("v", 200))
	const lives, perLife = 60, 30
	maxReplayed, completed := int64(0), map[store.Version]bool{}
	for life := range lives {
		efs := errorfs.Wrap(disk.FS())
		o := disk.opts(opts)
		o.FS = efs
		db, err := Open(memDataDir, o)
		if err != nil {
			t.Fatalf("life %d: %v", life, err)
		}
		maxReplayed = max(maxReplayed, db.Stats().Recovery.ReplayedBytes)
		for i := range perLife {
			k := fmt.Appendf(nil, "k%03d", (life*perLife+i)%300) // a ~70 KiB store: many parts
			if _, err := db.Apply(ctx, new(store.Batch).Put(k, value)); err != nil {
				t.Fatal(err)
			}
		}
		efs.Add(errorfs.Rule{Op: errorfs.OpRename, PathContains: ckptSuffix + ckptTmpSuffix, Nth: 3, Err: errorfs.EIO})
		switch err := db.Checkpoint(); {
		case err == nil:
			completed[db.Stats().Checkpoint] = true
		case !errors.Is(err, errorfs.EIO):
			t.Fatalf("life %d: checkpoint: %v", life, err)
		}
		disk.Crash(db, memfs.DropUnsynced)
	}
	if len(completed) < 3 {
		t.Fatalf("%d checkpoints completed in %d lives of two parts each", len(completed), lives)
	}
	// A checkpoint of ~35 parts takes ~18 lives; the log replayed spans at
	// most two checkpoints' worth of lives.
	if limit := int64(2 * 20 * perLife * 230); maxReplayed > limit {
		t.Fatalf("an open replayed %d bytes, want at most %d", maxReplayed, limit)
	}
	t.Logf("%d checkpoints completed; max replayed %d bytes", len(completed), maxReplayed)
}

// mergeInFlight reports whether a merge of the chain is being written.
func mergeInFlight(db *DB) bool {
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	return db.merges.merging != nil
}
