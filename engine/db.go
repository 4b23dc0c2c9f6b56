package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// DB is the local, single-process Store: a data directory holding the WAL
// (wal/) and checkpoints (ckpt-<index>.ckpt).
//
// Concurrency. Apply sequences batches under mu: it checks conditions
// against the durable tree overlaid with pending (batches sequenced but not
// yet durable), records its own writes in pending, and enqueues its body to
// the WAL while still holding mu, so log order equals sequence order. The
// WAL's writer goroutine, after each group's fsync, applies the group to the
// tree under treeMu (onDurable) and only then releases the group's callers.
// Reads take treeMu shared and therefore see exactly the durable state: a
// value is never visible before its batch is fsynced.
type DB struct {
	dir  string
	opts Options
	log  *wal.Log
	fs   vfs.FS // fds: every open of the engine's own files
	fds  *vfs.WaitFS
	lock io.Closer

	mu      sync.Mutex
	pending map[string]pendingWrite // latest not-yet-durable write per key
	failed  error                   // set once the log fail-stopped
	stopped atomic.Bool             // failed != nil, readable without mu
	closed  atomic.Bool

	treeMu  sync.RWMutex
	tree    *index.Ordered[index.KV]
	applied store.Version // last batch applied to tree
	durable store.Version // last log entry installed, of any kind (set by recover, then by onDurable under treeMu)

	ckptMu        sync.Mutex // one checkpoint at a time
	loggedBytes   atomic.Int64
	ckptLogBytes  atomic.Int64 // loggedBytes at the last checkpoint
	ckptSize      atomic.Int64 // bytes of the newest chain's files (base and deltas)
	mapped        atomic.Int64 // bytes of checkpoint files mapped (Options.MapCheckpoints)
	lastCkptIndex atomic.Uint64
	deltaNext     atomic.Bool   // the next checkpoint is likely a delta (the interval to wait for)
	liveNow       atomic.Int64  // liveBytes as of the last group installed
	ckptPending   *pendingGen   // an incomplete checkpoint to resume; under ckptMu
	chain         *ckptChain    // the newest complete checkpoint (nil: none); under ckptMu
	fallback      *ckptChain    // the chain the base replaced, kept for a lost file of chain (nil: none); under ckptMu
	baseLogBytes  atomic.Int64  // loggedBytes where the log kept on disk starts (the base's link, about)
	dirty         *dirtySet     // keys written since the chain's tip (dirty.go); under treeMu
	liveBytes     int64         // the tree's records as a checkpoint would hold them (estimate); under treeMu
	ckpt          *ckptStats    // ckptstats.go
	recovery      RecoveryStats // set by recover, then read-only
	restore       *RestoreEpoch // restore.go: nil if never restored; set by Open, then read-only

	vlog      *valueLog        // vlog.go
	vlogLive  map[uint32]int64 // bytes of records the tree points at, by segment; under treeMu
	ckptLinks uint64           // checkpoint links made since open; under ckptMu
	vlogStats vlogCounters

	// The components that work on the state above (each file says how).
	ckpts  *checkpointer // checkpoint.go
	merges *merger       // merge.go
	gc     *collector    // vlog_gc.go
}

type pendingWrite struct {
	version store.Version
	deleted bool
	value   []byte     // the engine-owned value written (GetLatest)
	commit  wal.Commit // durability of the batch that made this write
}

// applyRec travels with a batch through the WAL to onDurable.
type applyRec struct {
	ops []store.Op // engine-owned copies
}

const (
	walDirName   = "wal"
	lockFileName = "LOCK"
)

// Open opens or creates the store in dir: newest valid checkpoint, then WAL
// replay after it. It fails with ErrLocked if another process has the dir,
// and with ErrCorruption if files are damaged beyond torn-tail repair.
func Open(dir string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if err := vfs.MkdirAllSynced(opts.FS, dir, 0o750); err != nil {
		return nil, err
	}
	lock, err := opts.FS.Lock(filepath.Join(dir, lockFileName))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, err
	}
	// The engine's opens (checkpoints, deltas, the value log, directory
	// syncs) wait out a shortage of descriptors from the end of Open to
	// the start of Close, as the WAL's do (vfs.WaitFS says why).
	fds := vfs.NewWaitFS(opts.FS, opts.Logger)
	db := &DB{
		dir:     dir,
		fs:      fds,
		fds:     fds,
		opts:    opts,
		lock:    lock,
		pending: make(map[string]pendingWrite),
		tree:    index.NewKeySpace(),
		ckpt:    newCkptStats(),
		dirty:   newDirtySet(),
	}
	db.ckpts, db.merges, db.gc = newCheckpointer(db), newMerger(db), newCollector(db)
	// Before recovery writes anything: the epoch must precede every
	// write the restored store acknowledges.
	if db.restore, err = armRestore(db.fs, dir, time.Now()); err != nil {
		lock.Close()
		return nil, err
	}
	if db.restore != nil {
		opts.Logger.Warn("engine: this store was restored from a backup", "restored_at", db.restore.RestoredAt,
			"backup_version", uint64(db.restore.BackupVersion), "backup_time", db.restore.BackupTime)
	}
	if db.vlog, err = openValueLog(db.fs, dir, opts.ValueLogSegmentBytes); err != nil {
		lock.Close()
		return nil, err
	}
	db.vlogLive = map[uint32]int64{}
	if err := recoverAtOpen(db); err != nil {
		db.vlog.close()
		lock.Close()
		return nil, err
	}
	db.gc.retireUnreferenced()
	fds.Begin()
	go db.ckpts.run()
	go db.merges.run()
	if db.ckptPending != nil && opts.CheckpointLogBytes > 0 {
		db.ckpts.requests <- struct{}{} // resume the checkpoint a crash interrupted
	}
	db.ckptMu.Lock()
	db.merges.maybeStartMerge() // resume a merge a crash interrupted, or start a due one
	if db.merges.merging == nil {
		db.merges.deltaRuns = nil
	}
	db.ckptMu.Unlock()
	db.ckpts.maybeRequestCheckpoint()
	return db, nil
}

// ownOps copies ops' keys and values — a put's into one allocation of its
// own (key ‖ value, with room after the value for the version the log
// gives the batch: the layout of index.KV, which versioned completes) —
// so that the tree never aliases a caller's buffer or a large log buffer.
func ownOps(ops []store.Op) []store.Op {
	out := make([]store.Op, len(ops))
	// A put's key ‖ value becomes a tree item and lives as long as it, so
	// each put gets an allocation of its own. A delete's key is only needed
	// until the batch is published, so all of them share one.
	deleted := 0
	for _, op := range ops {
		if op.Delete {
			deleted += len(op.Key)
		}
	}
	keys := make([]byte, 0, deleted)
	for i, op := range ops {
		if op.Delete {
			keys = append(keys, op.Key...)
			out[i] = store.Op{Key: keys[len(keys)-len(op.Key) : len(keys) : len(keys)], Delete: true}
			continue
		}
		buf := make([]byte, len(op.Key)+len(op.Value), len(op.Key)+len(op.Value)+binary.MaxVarintLen64)
		n := copy(buf, op.Key)
		copy(buf[n:], op.Value)
		out[i] = store.Op{Key: buf[:n:n], Value: buf[n:len(buf):cap(buf)]}
	}
	return out
}

// versioned writes v after an owned put's value, in the room ownOps (or
// the replay's arena) left there, and returns the op as a tree item.
func versioned(op store.Op, v store.Version) index.KV {
	n := len(op.Key) + len(op.Value)
	if cap(op.Value)-len(op.Value) < binary.MaxVarintLen64 {
		panic("engine: invariant broken: an owned put has no room for its version")
	}
	buf := unsafe.Slice(unsafe.SliceData(op.Key), n+binary.MaxVarintLen64)
	binary.PutUvarint(buf[n:], uint64(v))
	return index.PackedKV(buf, len(op.Key), len(op.Value))
}

// applyToTree installs a durable batch. Caller holds treeMu or is the sole
// owner of the tree (replay).
//
// Invariant: versions strictly increase. A batch's version is its log
// index, and batches reach the tree in log order — replay walks the log
// forward from the checkpoint, onDurable receives groups in log order — so
// a version at or below the last one applied means the sequencing is
// broken (a bug, never bad input: replay checks the log it reads first).
// Writing it would put an older value over a newer one; we panic instead.
func (db *DB) applyToTree(v store.Version, ops []store.Op) {
	db.checkNewer(v)
	for _, op := range ops {
		db.applyOp(v, op, false)
	}
	db.applied = v
}

// checkNewer panics unless v is newer than every batch applied (see
// applyToTree).
func (db *DB) checkNewer(v store.Version) {
	if v <= db.applied {
		panic(fmt.Sprintf("engine: invariant broken: versions strictly increase, but batch %d is applied after batch %d", v, db.applied))
	}
}

// applyOp installs one op of batch v; replayed says it comes from the
// replay, whose puts' keys the dirty set may share (dirtySet.noteShared).
func (db *DB) applyOp(v store.Version, op store.Op, replayed bool) {
	var old index.KV
	var existed bool
	if op.Delete {
		old, existed = db.tree.Delete(index.Probe(op.Key))
	} else {
		old, existed = db.tree.Put(versioned(op, v))
		db.liveBytes += recordBytes(len(op.Key), len(op.Value))
	}
	if existed {
		db.liveBytes -= recordBytes(old.KeyLen(), len(old.Value()))
		unlive(db.vlogLive, old)
	}
	if replayed && !op.Delete {
		db.dirty.noteShared(op.Key, existed)
	} else {
		db.dirty.note(op.Key, existed)
	}
}

// recordBytes estimates a record's size in a checkpoint.
func recordBytes(klen, vlen int) int64 { return int64(klen + vlen + ckptRecordOverhead) }

// onDurable runs on the WAL writer after each fsynced group, before the
// group's callers are released. Groups arrive in log order, so entry
// indexes strictly increase from one call to the next (checked: a
// violation is a bug in the log, and installing it would break
// applyToTree's own invariant).
func (db *DB) onDurable(entries []wal.Entry) {
	db.installDurable(entries)
	var bytes int64
	db.mu.Lock()
	for _, e := range entries {
		bytes += int64(len(e.Body))
		rec, ok := e.Tag.(*applyRec)
		if !ok {
			continue
		}
		for _, op := range rec.ops {
			if p, ok := db.pending[unsafeString(op.Key)]; ok && p.version == store.Version(e.Index) {
				delete(db.pending, unsafeString(op.Key))
			}
		}
	}
	db.mu.Unlock()
	db.loggedBytes.Add(bytes)
	db.ckpts.maybeRequestCheckpoint()
}

// installDurable applies a durable group's batches to the tree.
func (db *DB) installDurable(entries []wal.Entry) {
	db.treeMu.Lock()
	defer db.treeMu.Unlock()
	for _, e := range entries {
		if store.Version(e.Index) <= db.durable {
			panic(fmt.Sprintf("engine: invariant broken: durable log entries strictly increase, but entry %d follows entry %d", e.Index, db.durable))
		}
		db.durable = store.Version(e.Index)
		if rec, ok := e.Tag.(*applyRec); ok {
			db.applyToTree(store.Version(e.Index), rec.ops)
		}
	}
	db.liveNow.Store(db.liveBytes)
}

// maybeRequestCheckpoint asks the checkpointer for a checkpoint once the log
// after the last one — the tail replayed at open included — has grown by
// checkpointInterval.
func (cp *checkpointer) maybeRequestCheckpoint() {
	db := cp.db
	if db.opts.CheckpointLogBytes <= 0 {
		return
	}
	if db.loggedBytes.Load()-db.ckptLogBytes.Load() >= cp.checkpointInterval() {
		select {
		case cp.requests <- struct{}{}:
		default:
		}
	}
}

// checkpointInterval is the log to accumulate before the next checkpoint:
// CheckpointLogBytes, whatever the store holds — the first base, then
// deltas, which cost what changed; a chain is rebased by merging its own
// files in the background (merge.go), not by the checkpointer, so the log
// a restart replays stays bounded by the setting. Only a store without
// deltas (CheckpointDeltasMax < 0) waits for the store's size too before
// rewriting it whole.
func (cp *checkpointer) checkpointInterval() int64 {
	db := cp.db
	if db.deltaNext.Load() || db.opts.CheckpointDeltasMax >= 0 {
		return db.opts.CheckpointLogBytes
	}
	return max(db.opts.CheckpointLogBytes, db.liveNow.Load())
}

// Close waits for in-flight batches and closes the files. A clean close does
// not checkpoint: the next Open replays the log tail.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return store.ErrClosed
	}
	// A checkpoint waiting for a descriptor gives up (it is resumed or
	// redone at the next open): Close never hangs on a flood.
	db.fds.Stop()
	close(db.ckpts.stop)
	<-db.ckpts.done
	<-db.merges.done
	err := db.log.Close()
	if cerr := db.vlog.close(); err == nil {
		err = cerr
	}
	if cerr := db.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// Dir is the data directory.
func (db *DB) Dir() string { return db.dir }

// Stats are counters for metrics and benchmarks.
type Stats struct {
	WAL     wal.Stats
	Keys    int
	Applied store.Version
	// Checkpoint is the index of the newest checkpoint (written, or loaded
	// at open); 0 if none.
	Checkpoint store.Version
	// Recovery describes the last open.
	Recovery RecoveryStats
	// Checkpoints count the checkpoints written since open.
	Checkpoints CheckpointStats
	// FailStopped: Health reports ErrFailStopped (the store needs a
	// restart).
	FailStopped bool
	// ValueLog describes the value log (vlog.go).
	ValueLog ValueLogStats
	// DescriptorWaits counts the opens of the engine's own files
	// (checkpoints, deltas, value log) that met EMFILE or ENFILE and
	// waited for a descriptor instead of failing; WAL.DescriptorWaits
	// counts the log's.
	DescriptorWaits uint64
}

// RecoveryStats says what the open that started this DB replayed.
type RecoveryStats struct {
	FromCheckpoint  store.Version // the checkpoint loaded (0: none)
	ReplayedEntries int64         // log entries replayed after it
	ReplayedBytes   int64         // their body bytes
	// ChainBytes is the size of the checkpoint chain's files the open
	// loaded (base and deltas; 0: none). With Phases it says what a
	// restart's time follows: the chain's load grows with the store, the
	// replay is bounded by the checkpoint interval (docs/engine.md,
	// "Restart of a growing store").
	ChainBytes int64
	// MappedBytes is how much of it the open mapped instead of reading
	// (Options.MapCheckpoints): mapped for the process's life.
	MappedBytes int64
	Phases      OpenPhases
}

// Stats returns current counters.
func (db *DB) Stats() Stats {
	db.treeMu.RLock()
	n, applied := db.tree.Len(), db.applied
	db.treeMu.RUnlock()
	return Stats{WAL: db.log.Stats(), Keys: n, Applied: applied,
		Checkpoint: store.Version(db.lastCkptIndex.Load()), Recovery: db.recovery,
		Checkpoints: db.checkpointStats(), FailStopped: errors.Is(db.Health(), store.ErrFailStopped), ValueLog: db.valueLogStats(),
		DescriptorWaits: db.fds.Waits()}
}

// Health reports why the store cannot take writes: nil when healthy,
// ErrClosed, or an error wrapping ErrFailStopped after an I/O failure (the
// store must be closed and reopened).
func (db *DB) Health() error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	if !db.stopped.Load() {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.failed != nil {
		return fmt.Errorf("%w: %w", store.ErrFailStopped, db.failed)
	}
	return nil
}
