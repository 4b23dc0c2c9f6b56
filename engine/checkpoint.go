package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// A checkpoint is every key of the store at one log index, in key order:
//
//	header  "IDEMCKP2" | index u64 | count u64
//	records count × ( uvarint(len key) | uvarint(len value) | key | value | uvarint(version) )
//	footer  crc32c(header ‖ records) u32 | "IDEMEND1"
//
// Key and value are adjacent so that the loaded tree's items alias the image
// (index.KV keeps key ‖ value in one slice). It is written to ckpt-<index>.tmp, fsynced, renamed to ckpt-<index>.ckpt
// and the directory fsynced; only then may the WAL drop what it covers.
const (
	ckptMagic     = "IDEMCKP2"
	ckptEndMagic  = "IDEMEND1"
	ckptHeaderLen = 8 + 8 + 8
	ckptFooterLen = 4 + 8
	ckptPrefix    = "ckpt-"
	ckptSuffix    = ".ckpt"
	ckptTmpSuffix = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checkpointName(index Version) string {
	return fmt.Sprintf("%s%020d%s", ckptPrefix, index, ckptSuffix)
}

// Checkpoint writes the current durable state to a new checkpoint file,
// records it in the log, and then truncates the log before the previous
// checkpoint — not before this one: the previous checkpoint and the log
// from it on are what recovery falls back to if this one is damaged or
// lost (see recover.go). That costs one more checkpoint file and up to
// one checkpoint interval of log on disk. It may run concurrently with
// Apply.
func (db *DB) Checkpoint() error {
	if db.closed.Load() {
		return ErrClosed
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	logged := db.loggedBytes.Load()
	snap := db.Snapshot()
	if uint64(snap.version) == db.lastCkptIndex.Load() {
		return nil
	}
	if err := db.writeCheckpoint(snap); err != nil {
		return err
	}
	prev := db.lastCkptIndex.Load()
	db.lastCkptIndex.Store(uint64(snap.version))
	db.ckptLogBytes.Store(logged)
	if err := db.logCheckpoint(uint64(snap.version)); err != nil {
		return fmt.Errorf("engine: record checkpoint %d in the log: %w", snap.version, err)
	}
	if err := db.log.TruncateFront(prev + 1); err != nil {
		return fmt.Errorf("engine: truncate log after checkpoint %d: %w", snap.version, err)
	}
	return db.removeCheckpointsBefore(Version(prev))
}

// logCheckpoint appends a wal.KindCheckpoint entry naming the checkpoint
// at index, so that a later recovery that does not find it knows it is
// missing. It holds mu like Apply, keeping log order equal to sequence
// order.
func (db *DB) logCheckpoint(index uint64) error {
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
	_, commit, err := db.log.Enqueue(wal.KindCheckpoint, binary.AppendUvarint(nil, index), nil)
	db.mu.Unlock()
	if err != nil {
		return db.submitErr(err)
	}
	return db.awaitDurable(ctx, commit)
}

// writeCheckpoint writes snap to ckpt-<index>.tmp, fsyncs it, renames it
// into place and fsyncs the directory. On failure the temp file is removed
// (a full disk must get its space back).
func (db *DB) writeCheckpoint(snap *Snapshot) (err error) {
	final := filepath.Join(db.dir, checkpointName(snap.version))
	tmp := strings.TrimSuffix(final, ckptSuffix) + ckptTmpSuffix
	if err := fault.Inject(fault.CkptWriteBefore); err != nil {
		return err
	}
	f, err := db.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			if rerr := db.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				db.opts.Logger.Warn("engine: could not remove a failed checkpoint's temp file", "file", tmp, "err", rerr)
			}
		}
	}()
	if err := encodeCheckpoint(&writebackFile{f: f}, snap); err != nil {
		f.Close()
		return err
	}
	if fi, err := f.Stat(); err == nil {
		db.ckptSize.Store(fi.Size())
	}
	if err := fault.Inject(fault.CkptSyncBefore); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fault.Inject(fault.CkptRenameBefore); err != nil {
		return err
	}
	if err := db.fs.Rename(tmp, final); err != nil {
		return err
	}
	renamed = true
	if err := fault.Inject(fault.CkptDirSyncBefore); err != nil {
		return err
	}
	return vfs.SyncDir(db.fs, db.dir)
}

// ckptWritebackBytes is how much checkpoint data may be written before its
// writeback is started (see startWriteback).
const ckptWritebackBytes = 1 << 20

// writebackFile starts writeback of a checkpoint file every
// ckptWritebackBytes.
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

// encodeCheckpoint streams snap to w.
func encodeCheckpoint(w io.Writer, snap *Snapshot) error {
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	var hdr [ckptHeaderLen]byte
	copy(hdr[:8], ckptMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(snap.version))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(snap.Len()))
	bw.Write(hdr[:])
	var scratch [3 * binary.MaxVarintLen64]byte
	snap.tree.AscendAll(func(it index.KV) bool {
		key, val := it.Key(), it.Value()
		n := binary.PutUvarint(scratch[:], uint64(len(key)))
		n += binary.PutUvarint(scratch[n:], uint64(len(val)))
		bw.Write(scratch[:n])
		bw.Write(key)
		bw.Write(val)
		bw.Write(scratch[:binary.PutUvarint(scratch[:], it.Version)])
		return true
	})
	if err := bw.Flush(); err != nil {
		return err
	}
	var ftr [ckptFooterLen]byte
	binary.LittleEndian.PutUint32(ftr[:4], crc.Sum32())
	copy(ftr[4:], ckptEndMagic)
	_, err := w.Write(ftr[:])
	return err
}

var _ hash.Hash32 = crc32.New(castagnoli)

// decodeCheckpoint validates a whole checkpoint image and calls fn for each
// record in order. Keys and values alias data, the value right after its key.
func decodeCheckpoint(data []byte, fn func(key, value []byte, version Version)) (Version, error) {
	if len(data) < ckptHeaderLen+ckptFooterLen {
		return 0, errors.New("short file")
	}
	if string(data[:8]) != ckptMagic {
		return 0, errors.New("bad magic")
	}
	body, ftr := data[:len(data)-ckptFooterLen], data[len(data)-ckptFooterLen:]
	if string(ftr[4:]) != ckptEndMagic {
		return 0, errors.New("missing end marker (incomplete write)")
	}
	if binary.LittleEndian.Uint32(ftr[:4]) != crc32.Checksum(body, castagnoli) {
		return 0, errors.New("checksum mismatch")
	}
	at := Version(binary.LittleEndian.Uint64(body[8:]))
	count := binary.LittleEndian.Uint64(body[16:])
	rest := body[ckptHeaderLen:]
	var prev []byte
	for i := uint64(0); i < count; i++ {
		klen, n1 := binary.Uvarint(rest)
		if n1 <= 0 {
			return 0, fmt.Errorf("record %d: bad key length", i)
		}
		vlen, n2 := binary.Uvarint(rest[n1:])
		if n2 <= 0 {
			return 0, fmt.Errorf("record %d: bad value length", i)
		}
		r := rest[n1+n2:]
		if klen == 0 || klen > uint64(len(r)) || vlen > uint64(len(r))-klen {
			return 0, fmt.Errorf("record %d: bad key or value", i)
		}
		// The key's capacity spans its value: the two can be taken as one slice.
		key, val := r[:klen:klen+vlen], r[klen:klen+vlen:klen+vlen]
		r = r[klen+vlen:]
		ver, n := binary.Uvarint(r)
		if n <= 0 || ver == 0 || Version(ver) > at {
			return 0, fmt.Errorf("record %d: bad version", i)
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			return 0, fmt.Errorf("record %d: keys out of order", i)
		}
		prev = key
		rest = r[n:]
		fn(key, val, Version(ver))
	}
	if len(rest) != 0 {
		return 0, fmt.Errorf("%d trailing bytes", len(rest))
	}
	return at, nil
}

// listCheckpoints returns checkpoint indexes present in dir, newest first,
// and removes leftover temporary files.
func listCheckpoints(fsys vfs.FS, dir string) ([]Version, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Version
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) {
			continue
		}
		if strings.HasSuffix(name, ckptTmpSuffix) {
			fsys.Remove(filepath.Join(dir, name)) // an interrupted checkpoint
			continue
		}
		num := strings.TrimSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix)
		if v, err := strconv.ParseUint(num, 10, 64); err == nil && strings.HasSuffix(name, ckptSuffix) {
			out = append(out, Version(v))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out, nil
}

// removeCheckpointsBefore removes checkpoints older than v, and damaged
// ones moved aside that v supersedes.
func (db *DB) removeCheckpointsBefore(v Version) error {
	idxs, err := listCheckpoints(db.fs, db.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, i := range idxs {
		if i < v {
			if err := db.fs.Remove(filepath.Join(db.dir, checkpointName(i))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed = true
		}
	}
	ents, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		num, ok := strings.CutSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix+damagedSuffix)
		if n, err := strconv.ParseUint(num, 10, 64); ok && err == nil && Version(n) < v {
			if err := db.fs.Remove(filepath.Join(db.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed = true
		}
	}
	if removed {
		return vfs.SyncDir(db.fs, db.dir)
	}
	return nil
}

// Retry bounds of automatic checkpoints: a failed checkpoint (a full
// disk, say) is retried after ckptRetryMin, doubling up to ckptRetryMax,
// instead of at every group commit.
const (
	ckptRetryMin = time.Second
	ckptRetryMax = time.Minute
)

// checkpointer runs automatic checkpoints when enough log has accumulated.
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
		if err == nil || errors.Is(err, ErrClosed) {
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
