package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Checkpoints (file formats: ckptfile.go, delta.go; chains: ckptchain.go).
//
// Checkpoint writes either a delta on the current chain — what changed
// since its newest link — or the whole store as a new base: a generation
// of parts, each durable on its own, resuming the generation an earlier
// call — or an earlier process — left incomplete. Once the link is
// durable it is recorded in the log. A delta truncates nothing: the log is
// kept from the base's link on, so a lost delta falls back to the links
// before it and the log. A new base truncates the log before the tip of
// the chain it replaces, which stays as the fallback for a lost base
// (recover.go). Later bases come from merges (merge.go).

// checkpointer writes the checkpoints (docs/design.md §2): the automatic
// ones on its goroutine (run), and the links Checkpoint asks for. It owns
// the writing; the chain it writes, and the locks, are the DB's, shared
// with the merger and the collector.
type checkpointer struct {
	db       *DB
	requests chan struct{} // never closed: onDurable may send until the log is drained
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when run returns
}

func newCheckpointer(db *DB) *checkpointer {
	return &checkpointer{db: db, requests: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// pendingGen is a generation being written: where it resumes.
type pendingGen struct {
	v0    store.Version
	exact bool       // every part so far from the snapshot at v0
	parts []partMeta // written so far, in key order
}

// next is the number and first key of the generation's next part.
func (g *pendingGen) next() (seq int, start []byte) {
	if n := len(g.parts); n > 0 {
		return n, g.parts[n-1].end
	}
	return 0, nil
}

// Checkpoint makes a complete checkpoint of the current durable state —
// a delta on the current chain, or a new base (ckptchain.go), resuming an
// incomplete base — and starts a merge into a new base if one is due
// (merge.go: written in the background, or by nobody while automatic
// checkpoints are off); then runs one pass of the value-log collector
// (vlog_gc.go). It may run concurrently with Apply.
func (db *DB) Checkpoint() (err error) {
	if db.closed.Load() {
		return store.ErrClosed
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	defer db.observeCheckpoint(time.Now(), db.lastCkptIndex.Load(), &err)
	if err := db.gc.adoptSpills(); err != nil {
		return err
	}
	logged := db.loggedBytes.Load()
	if db.ckpts.nextIsDelta() {
		err = db.ckpts.checkpointDelta(logged)
	} else {
		err = db.ckpts.checkpointBase(logged)
	}
	if err != nil {
		return err
	}
	return db.gc.collectValueLog()
}

// checkpointBase writes the whole store as a new base generation, or
// resumes the one pending.
func (cp *checkpointer) checkpointBase(logged int64) error {
	db := cp.db
	g := db.ckptPending
	var snap *Snapshot
	if g == nil {
		// The new base is one snapshot: the writes noted from it on are
		// exactly what the first delta on it needs. Nothing applied since
		// the newest link: no base, and the dirty set is kept — it may
		// hold the value-log collector's moves, which change no version
		// and must reach the next link written, base or delta.
		skip := false
		snap = cp.snapshotWith(func() {
			if skip = uint64(db.applied) == db.lastCkptIndex.Load(); !skip {
				db.dirty.reset()
			}
		})
		if skip {
			return nil
		}
		g = &pendingGen{v0: snap.version, exact: true}
		db.ckptPending = g
	} else {
		snap = db.Snapshot()
		g.exact = false // parts from more than one snapshot
	}
	began := time.Now()
	for {
		select {
		case <-cp.stop:
			return errCheckpointStopped
		default:
		}
		last, err := cp.writePart(snap, g)
		if err != nil {
			return err
		}
		if last {
			break
		}
	}
	db.ckptPending = nil
	return cp.linked(&ckptChain{base: generation{v0: g.v0, parts: g.parts}, exact: g.exact}, logged, began)
}

// checkpointDelta writes what changed since the chain's tip as a delta on
// it. A delta that is not written gives its keys back to the dirty set: the
// next one covers them.
func (cp *checkpointer) checkpointDelta(logged int64) error {
	db := cp.db
	c := db.chain
	var taken *dirtySet
	snap := cp.snapshotWith(func() { taken = db.dirty.take() })
	owed := true // taken's keys, until a delta file holds them
	giveBack := func() {
		if owed {
			owed = false
			db.treeMu.Lock()
			db.dirty.restore(taken)
			db.treeMu.Unlock()
		}
	}
	// Deferred too, for a panic: its unwinding releases ckptMu
	// (Checkpoint's defer) before the process dies, and a checkpoint that
	// gets in meanwhile would write a delta without these keys, which an
	// open trusts, replaying the log only after it.
	defer giveBack()
	if taken.lost {
		// Overflowed since nextIsDelta looked: only a full one is exact.
		giveBack()
		return cp.checkpointBase(logged)
	}
	if snap.version == c.tip() {
		return nil
	}
	began := time.Now()
	m, err := cp.writeDelta(snap, taken, c)
	if err != nil {
		return err
	}
	owed = false
	return cp.linked(c.with(m), logged, began)
}

// linked makes next, durable on disk, the newest checkpoint: recorded in
// the log. A new base (from a snapshot) makes the chain before it the
// fallback: the log is truncated before that chain's tip + 1, and every
// checkpoint file but the two chains' removed. A delta truncates nothing:
// the log is kept from the base on, so that a lost delta falls back to the
// links before it and the log (merge.go truncates it once the chain is
// merged into a new base).
func (cp *checkpointer) linked(next *ckptChain, logged int64, began time.Time) error {
	db := cp.db
	prevChain := db.chain
	v := next.tip()
	isBase := len(next.deltas) == 0
	db.chain = next
	if isBase {
		db.fallback, db.merges.merging = prevChain, nil
		db.baseLogBytes.Store(logged)
	}
	db.ckptSize.Store(next.bytes())
	db.deltaNext.Store(cp.nextIsDelta())
	db.lastCkptIndex.Store(uint64(v))
	db.ckptLogBytes.Store(logged)
	if err := cp.logCheckpoint(uint64(v)); err != nil {
		return fmt.Errorf("engine: record checkpoint %s in the log: %w", genName(v), err)
	}
	db.ckptLinks++
	// Complete once recorded in the log; truncation failures are reported
	// on their own. The base's bytes and parts are the whole generation's,
	// duration this call's (a resumed generation had earlier parts).
	if !isBase {
		db.ckpt.deltas.Add(1)
		d := next.deltas[len(next.deltas)-1]
		db.opts.Logger.Info("engine: delta checkpoint written", "index", uint64(v), "bytes", d.size, "records", d.count,
			"chain_deltas", len(next.deltas), "chain_bytes", next.bytes(), "duration", time.Since(began))
		db.merges.maybeStartMerge()
		if err := cp.removeCheckpointFilesBut(db.merges.keptFiles(), next.base.v0); err != nil {
			return err
		}
		return db.gc.removeRetired()
	}
	db.opts.Logger.Info("engine: checkpoint written", "index", uint64(v), "bytes", next.base.bytes(), "parts", len(next.base.parts),
		"duration", time.Since(began))
	keepFrom := uint64(1)
	if prevChain != nil {
		keepFrom = uint64(prevChain.tip()) + 1
	}
	if err := db.log.TruncateFront(keepFrom); err != nil {
		return fmt.Errorf("engine: truncate log after checkpoint %s: %w", genName(v), err)
	}
	if err := cp.removeCheckpointFilesBut(db.merges.keptFiles(), store.Version(keepFrom-1)); err != nil {
		return err
	}
	return db.gc.removeRetired()
}

// snapshotWith takes a snapshot and runs fn under the same tree lock: what
// fn does to the dirty set happens exactly at the snapshot.
func (cp *checkpointer) snapshotWith(fn func()) *Snapshot {
	db := cp.db
	db.treeMu.Lock()
	defer db.treeMu.Unlock()
	fn()
	return &Snapshot{tree: db.tree.Clone(), version: db.applied, db: db}
}

// writeDelta writes the delta at snap on chain c: the value at snap of
// every key in dirty, or a tombstone if the chain's files may hold it.
func (cp *checkpointer) writeDelta(snap *Snapshot, dirty *dirtySet, c *ckptChain) (deltaMeta, error) {
	db := cp.db
	m := deltaMeta{name: deltaName(snap.version), v: snap.version, base: c.base.v0, prev: c.tip(), ptrs: ptrCompact, packed: true}
	var spills spillList
	var scratch [vlogPtrLen]byte
	size, err := cp.writeCkptFile(m.name, func(w io.Writer) error {
		dw := newDeltaWriter(w, m.v, m.base, m.prev)
		err := atSnapshot(snap.tree, dirty.sortDistinct(), func(k dirtyKey, it index.KV, ok bool) error {
			if ok {
				val, indirect, err := db.stored(it, &spills, scratch[:])
				if err != nil {
					return err
				}
				dw.put(it, val, store.Version(it.Version()), indirect)
			} else if k.existed || !c.exact {
				dw.tombstone(k.key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		m.count = dw.count
		if err := dw.finish(); err != nil {
			return err
		}
		return cp.spilled(&spills)
	})
	m.size = size
	return m, err
}

// spilled makes the values a checkpoint file about to be synced points
// at durable, and the tree's items pointers: the value log is durable
// before any pointer to it is, in the file or in RAM. On failure the
// spilled records are garbage and the checkpoint fails.
func (cp *checkpointer) spilled(spills *spillList) error {
	db := cp.db
	if spills.empty() {
		return nil
	}
	if err := db.vlog.sync(); err != nil {
		db.vlog.discardUnsynced()
		return fmt.Errorf("engine: sync the value log: %w", err)
	}
	spills.install(db)
	return nil
}

// writePart writes g's next part from snap and reports whether it was the
// last. On failure g is unchanged.
func (cp *checkpointer) writePart(snap *Snapshot, g *pendingGen) (last bool, err error) {
	db := cp.db
	seq, start := g.next()
	var end []byte
	var count uint64
	var spills spillList
	var scratch [vlogPtrLen]byte
	size, err := cp.writeCkptFile(partName(g.v0, seq), func(wr io.Writer) error {
		w := newPartWriter(wr, g.v0, seq, snap.version, start)
		defer func() { count = w.count }()
		last = true
		var serr error
		snap.tree.Ascend(index.Probe(start), func(it index.KV) bool {
			if w.bytes >= db.opts.CheckpointPartBytes {
				end, last = it.AppendKey(nil), false
				return false
			}
			val, indirect, err := db.stored(it, &spills, scratch[:])
			if err != nil {
				serr = err
				return false
			}
			w.add(it, val, it.Version(), indirect)
			return true
		})
		if serr != nil {
			return serr
		}
		if err := w.finish(end, last); err != nil {
			return err
		}
		return cp.spilled(&spills)
	})
	if err != nil {
		return false, err
	}
	g.parts = append(g.parts, partMeta{name: partName(g.v0, seq), v0: g.v0, seq: seq, version: snap.version,
		start: start, end: end, last: last, count: count, size: size})
	return last, nil
}

// writeCkptFile makes a checkpoint file durable under name: written by
// write to a temp file, fsynced, renamed, the directory fsynced. On
// failure the temp file is removed (a full disk must get its space back).
func (cp *checkpointer) writeCkptFile(name string, write func(io.Writer) error) (size int64, err error) {
	db := cp.db
	final := filepath.Join(db.dir, name)
	tmp := final + ckptTmpSuffix
	if err := fault.Inject(fault.CkptWriteBefore); err != nil {
		return 0, err
	}
	f, err := db.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return 0, err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			if rerr := db.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				db.opts.Logger.Warn("engine: could not remove a failed checkpoint's temp file", "file", tmp, "err", rerr)
			}
		}
	}()
	if err := write(&writebackFile{f: f}); err != nil {
		f.Close()
		db.vlog.discardUnsynced()
		return 0, err
	}
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if err := fault.Inject(fault.CkptSyncBefore); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := fault.Inject(fault.CkptRenameBefore); err != nil {
		return 0, err
	}
	if err := db.fs.Rename(tmp, final); err != nil {
		return 0, err
	}
	renamed = true
	if err := fault.Inject(fault.CkptDirSyncBefore); err != nil {
		return 0, err
	}
	if err := vfs.SyncDir(db.fs, db.dir); err != nil {
		return 0, err
	}
	db.ckpt.bytes.Add(uint64(size))
	return size, nil
}

// logCheckpoint appends a wal.KindCheckpoint entry naming the checkpoint
// whose replay starts after v0, so that a later recovery that does not
// find it knows it is missing. It holds mu like Apply, keeping log order
// equal to sequence order.
func (cp *checkpointer) logCheckpoint(v0 uint64) error {
	return cp.logCheckpointBody(binary.AppendUvarint(nil, v0))
}

// mergeRecordFlag follows the index in the record of a merged base
// (merge.go). Readers that know only the index ignore it.
const mergeRecordFlag = 'M'

// logMerge records that the base merged at v0 was linked: an open that
// loads the chain it replaced, because the merged base is gone, sees the
// record in the log it replays and says so.
func (cp *checkpointer) logMerge(v0 uint64) error {
	return cp.logCheckpointBody(append(binary.AppendUvarint(nil, v0), mergeRecordFlag))
}

// mergeRecord returns the base a checkpoint record says was merged.
func mergeRecord(body []byte) (uint64, bool) {
	n, k := binary.Uvarint(body)
	return n, k > 0 && len(body) == k+1 && body[k] == mergeRecordFlag
}

func (cp *checkpointer) logCheckpointBody(body []byte) error {
	db := cp.db
	ctx := context.Background()
	if err := db.log.Reserve(ctx); err != nil {
		return db.submitErr(err)
	}
	db.mu.Lock()
	if db.failed != nil {
		db.mu.Unlock()
		db.log.Unreserve()
		return fmt.Errorf("%w: %w", store.ErrFailStopped, db.failed)
	}
	_, commit, err := db.log.Enqueue(wal.KindCheckpoint, body, nil)
	db.mu.Unlock()
	if err != nil {
		return db.submitErr(err)
	}
	return db.awaitDurable(ctx, commit)
}

// ckptWritebackBytes is how much checkpoint data may be written before its
// writeback is started (see vfs.Writebacker).
const ckptWritebackBytes = 1 << 20

// writebackFile starts writeback of a checkpoint file every
// ckptWritebackBytes, as pebble's BytesPerSync does: on ext4 a WAL fsync
// waits for a journal commit, and a commit with tens of megabytes of
// checkpoint data still dirty stalls every appender behind it.
type writebackFile struct {
	f             vfs.File
	written, last int64
}

func (w *writebackFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if wb, ok := w.f.(vfs.Writebacker); ok && err == nil && w.written-w.last >= ckptWritebackBytes {
		w.last = w.written
		err = wb.StartWriteback(w.written)
	}
	return n, err
}

// removeCheckpointFilesBut removes every checkpoint file not in keep —
// older chains, abandoned incomplete generations, stale parts — and the
// damaged ones moved aside that the link at prev supersedes.
func (cp *checkpointer) removeCheckpointFilesBut(keep map[string]bool, prev store.Version) error {
	db := cp.db
	ents, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return err
	}
	var victims []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) || strings.HasSuffix(name, ckptTmpSuffix) || keep[name] {
			continue
		}
		if strings.HasSuffix(name, damagedSuffix) && ckptOwner(name) > prev {
			continue // kept for an operator until a newer checkpoint supersedes it
		}
		victims = append(victims, name)
	}
	if len(victims) == 0 {
		return nil
	}
	if err := removeFiles(db.fs, db.dir, victims); err != nil {
		return err
	}
	return vfs.SyncDir(db.fs, db.dir)
}

// ckptOwner is the generation a checkpoint file belongs to.
func ckptOwner(name string) store.Version {
	rest := strings.TrimPrefix(name, ckptPrefix)
	if len(rest) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(rest[:20], 10, 64)
	if err != nil {
		return 0
	}
	return store.Version(v)
}

// Retry bounds of automatic checkpoints: a failed checkpoint (a full
// disk, say) is retried after ckptRetryMin, doubling up to ckptRetryMax,
// instead of at every group commit.
const (
	ckptRetryMin = time.Second
	ckptRetryMax = time.Minute
)

// run runs automatic checkpoints when enough log has accumulated
// (and at once after an open that left a checkpoint incomplete).
func (cp *checkpointer) run() {
	db := cp.db
	defer close(cp.done)
	backoff := time.Duration(0)
	for {
		select {
		case <-cp.stop:
			return
		case <-cp.requests:
		}
		err := db.Checkpoint()
		if err == nil || errors.Is(err, store.ErrClosed) || errors.Is(err, errCheckpointStopped) {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, ckptRetryMin), ckptRetryMax)
		db.opts.Logger.Error("engine: checkpoint failed", "err", err, "retry_in", backoff)
		select {
		case <-cp.stop:
			return
		case <-time.After(backoff):
			cp.maybeRequestCheckpoint()
		}
	}
}
