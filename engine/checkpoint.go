package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Checkpoints (file format: ckptfile.go).
//
// Checkpoint writes the store as a generation of parts, each durable on
// its own, resuming the generation an earlier call — or an earlier process
// — left incomplete. Once the generation is complete it is recorded in the
// log, and the log is truncated before the *previous* complete checkpoint,
// not before this one: the previous checkpoint and the log from it on are
// what recovery falls back to if this one is damaged or lost (recover.go).
// That costs one more checkpoint and up to one checkpoint interval of log
// on disk.

// pendingGen is a generation being written: where it resumes.
type pendingGen struct {
	v0    Version
	seq   int    // the next part's number
	start []byte // the next part's first key
	bytes int64  // size of the parts written so far
}

// Checkpoint makes a complete checkpoint of the current durable state
// (resuming an incomplete one) and truncates the log behind the previous
// one. It may run concurrently with Apply.
func (db *DB) Checkpoint() (err error) {
	if db.closed.Load() {
		return ErrClosed
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	defer db.observeCheckpoint(time.Now(), db.lastCkptIndex.Load(), &err)
	logged := db.loggedBytes.Load()
	snap := db.Snapshot()
	g := db.ckptPending
	if g == nil {
		if uint64(snap.version) == db.lastCkptIndex.Load() {
			return nil
		}
		g = &pendingGen{v0: snap.version}
		db.ckptPending = g
	}
	began := time.Now()
	for {
		select {
		case <-db.ckptStop:
			return errCheckpointStopped
		default:
		}
		last, err := db.writePart(snap, g)
		if err != nil {
			return err
		}
		if last {
			break
		}
	}
	db.ckptPending = nil
	db.ckptSize.Store(g.bytes)
	prev := db.lastCkptIndex.Load()
	db.lastCkptIndex.Store(uint64(g.v0))
	db.ckptLogBytes.Store(logged)
	if err := db.logCheckpoint(uint64(g.v0)); err != nil {
		return fmt.Errorf("engine: record checkpoint %s in the log: %w", genName(g.v0), err)
	}
	// Complete once recorded in the log; truncation failures are reported
	// on their own. bytes and parts are the whole generation's, duration
	// this call's (a resumed generation had earlier parts written before).
	db.opts.Logger.Info("engine: checkpoint written", "index", uint64(g.v0), "bytes", g.bytes, "parts", g.seq,
		"duration", time.Since(began))
	if err := db.log.TruncateFront(prev + 1); err != nil {
		return fmt.Errorf("engine: truncate log after checkpoint %s: %w", genName(g.v0), err)
	}
	return db.removeGenerationsBefore(Version(prev), g.v0, g.seq)
}

// writePart writes g's next part from snap and reports whether it was the
// last. On failure the temp file is removed (a full disk must get its
// space back) and g is unchanged.
func (db *DB) writePart(snap *Snapshot, g *pendingGen) (last bool, err error) {
	final := filepath.Join(db.dir, partName(g.v0, g.seq))
	tmp := final + ckptTmpSuffix
	if err := fault.Inject(fault.CkptWriteBefore); err != nil {
		return false, err
	}
	f, err := db.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return false, err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			if rerr := db.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				db.opts.Logger.Warn("engine: could not remove a failed checkpoint's temp file", "file", tmp, "err", rerr)
			}
		}
	}()
	w := newPartWriter(&writebackFile{f: f}, g.v0, g.seq, snap.version, g.start)
	var end []byte
	last = true
	snap.tree.Ascend(index.Probe(g.start), func(it index.KV) bool {
		if w.bytes >= db.opts.CheckpointPartBytes {
			end, last = append([]byte(nil), it.Key()...), false
			return false
		}
		w.add(it)
		return true
	})
	if err := w.finish(end, last); err != nil {
		f.Close()
		return false, err
	}
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if err := fault.Inject(fault.CkptSyncBefore); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := fault.Inject(fault.CkptRenameBefore); err != nil {
		return false, err
	}
	if err := db.fs.Rename(tmp, final); err != nil {
		return false, err
	}
	renamed = true
	if err := fault.Inject(fault.CkptDirSyncBefore); err != nil {
		return false, err
	}
	if err := vfs.SyncDir(db.fs, db.dir); err != nil {
		return false, err
	}
	g.seq++
	g.start = end
	g.bytes += size
	db.ckpt.bytes.Add(uint64(size))
	return last, nil
}

// logCheckpoint appends a wal.KindCheckpoint entry naming the checkpoint
// whose replay starts after v0, so that a later recovery that does not
// find it knows it is missing. It holds mu like Apply, keeping log order
// equal to sequence order.
func (db *DB) logCheckpoint(v0 uint64) error {
	ctx := context.Background()
	if err := db.log.Reserve(ctx); err != nil {
		return db.submitErr(err)
	}
	db.mu.Lock()
	if db.failed != nil {
		db.mu.Unlock()
		db.log.Unreserve()
		return fmt.Errorf("%w: %w", ErrFailStopped, db.failed)
	}
	_, commit, err := db.log.Enqueue(wal.KindCheckpoint, binary.AppendUvarint(nil, v0), nil)
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

// removeGenerationsBefore removes every checkpoint file but those of keep
// (parts 0..keepParts-1) and of v (the previous complete checkpoint) —
// older generations, abandoned incomplete ones, stale parts — and damaged
// ones moved aside that v supersedes.
func (db *DB) removeGenerationsBefore(v, keep Version, keepParts int) error {
	ents, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return err
	}
	var victims []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) || strings.HasSuffix(name, ckptTmpSuffix) {
			continue
		}
		owner := ckptOwner(name)
		_, seq, isPart := parsePartName(name)
		switch {
		case owner == keep && isPart && seq >= keepParts:
			victims = append(victims, name) // left by an earlier attempt
		case owner == v || owner == keep:
		case strings.HasSuffix(name, damagedSuffix) && owner > v:
			// Kept for an operator until a newer checkpoint supersedes it.
		default:
			victims = append(victims, name)
		}
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
func ckptOwner(name string) Version {
	rest := strings.TrimPrefix(name, ckptPrefix)
	if len(rest) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(rest[:20], 10, 64)
	if err != nil {
		return 0
	}
	return Version(v)
}

// Retry bounds of automatic checkpoints: a failed checkpoint (a full
// disk, say) is retried after ckptRetryMin, doubling up to ckptRetryMax,
// instead of at every group commit.
const (
	ckptRetryMin = time.Second
	ckptRetryMax = time.Minute
)

// checkpointer runs automatic checkpoints when enough log has accumulated
// (and at once after an open that left a checkpoint incomplete).
func (db *DB) checkpointer() {
	defer close(db.ckptDone)
	backoff := time.Duration(0)
	for {
		select {
		case <-db.ckptStop:
			return
		case <-db.ckptRequests:
		}
		err := db.Checkpoint()
		if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, errCheckpointStopped) {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, ckptRetryMin), ckptRetryMax)
		db.opts.Logger.Error("engine: checkpoint failed", "err", err, "retry_in", backoff)
		select {
		case <-db.ckptStop:
			return
		case <-time.After(backoff):
			db.maybeRequestCheckpoint()
		}
	}
}
