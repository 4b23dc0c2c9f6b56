package engine

import (
	"bufio"
	"bytes"
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

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/vfs"
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

// Checkpoint writes the current durable state to a new checkpoint file and
// then truncates the WAL before it. It may run concurrently with Apply.
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
	db.lastCkptIndex.Store(uint64(snap.version))
	db.ckptLogBytes.Store(logged)
	if err := db.log.TruncateFront(uint64(snap.version) + 1); err != nil {
		return fmt.Errorf("engine: truncate log after checkpoint %d: %w", snap.version, err)
	}
	return db.removeCheckpointsBefore(snap.version)
}

func (db *DB) writeCheckpoint(snap *Snapshot) error {
	final := filepath.Join(db.dir, checkpointName(snap.version))
	tmp := strings.TrimSuffix(final, ckptSuffix) + ckptTmpSuffix
	if err := fault.Inject(fault.CkptWriteBefore); err != nil {
		return err
	}
	f, err := db.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
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

// loadNewestCheckpoint fills the tree from the newest checkpoint that
// decodes, and returns its index (0 if none). A damaged newer checkpoint is
// skipped with a warning; if the WAL no longer covers the gap, replay reports
// the missing entries as corruption.
func (db *DB) loadNewestCheckpoint() (uint64, error) {
	idxs, err := listCheckpoints(db.fs, db.dir)
	if err != nil {
		return 0, err
	}
	for _, want := range idxs {
		name := checkpointName(want)
		data, err := vfs.ReadFile(db.fs, filepath.Join(db.dir, name))
		if err != nil {
			return 0, err
		}
		tree := index.NewKeySpace()
		at, err := decodeCheckpoint(data, func(k, v []byte, ver Version) {
			// Records alias data: one allocation holds the whole image.
			// k and v are adjacent in the image: one item aliases both.
			tree.Put(index.PackedKV(k[:len(k)+len(v):len(k)+len(v)], len(k), uint64(ver)))
		})
		if err == nil && at != want {
			err = fmt.Errorf("header index %d does not match file name", at)
		}
		if err != nil {
			db.opts.Logger.Warn("engine: skipping damaged checkpoint", "file", name, "err", err)
			continue
		}
		db.tree = tree
		db.applied = at
		db.ckptSize.Store(int64(len(data)))
		return uint64(at), nil
	}
	return 0, nil
}

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
	if removed {
		return vfs.SyncDir(db.fs, db.dir)
	}
	return nil
}

// checkpointer runs automatic checkpoints when enough log has accumulated.
func (db *DB) checkpointer() {
	defer close(db.ckptDone)
	for {
		select {
		case <-db.ckptStop:
			return
		case <-db.ckptRequests:
			if err := db.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
				db.opts.Logger.Error("engine: checkpoint failed", "err", err)
			}
		}
	}
}
