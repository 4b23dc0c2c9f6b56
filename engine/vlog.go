package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// The value log (WiscKey's, Badger's vlog, Bitcask's data files).
//
// Values the host calls cold (Options.ColdValue: terminal receipts,
// tombstones) leave RAM at the checkpoint that first writes them: the
// checkpointer appends the value to the value log, makes it durable, and
// then — in the checkpoint file and in the tree — keeps the key, the
// version and a pointer of at most 12 bytes instead. A value is therefore durable in
// the log (WAL) until a checkpoint holds it, and in the value log before
// any pointer to it exists: no crash leaves a pointer to nothing. The
// write path is untouched: a group commit still logs whole values, and the
// value log is written off the request path, once per value.
//
//	vlog/<segment>.vlog    segment = 10 decimal digits, increasing
//	record  crc32c(rest) u32 | uvarint(len key) | uvarint(len value) | key | value
//	pointer segment | offset | record length  (vlogptr.go)
//
// A record holds its key so that a read can prove the pointer led where it
// should (a misdirected or damaged pointer is ErrCorruption, never another
// key's value) and so that the collector can ask the tree whether a record
// is still the one in use (vlog_gc.go). Segments are written by one
// process front to back and never appended to after an open, so only the
// newest segment of a crashed process can end in a torn record, and no
// pointer points there.
const (
	vlogDirName       = "vlog"
	vlogSuffix        = ".vlog"
	vlogRecordHdrMax  = 4 + 2*binary.MaxVarintLen32
	vlogSegmentMaxCap = 1<<32 - 1 // offsets are u32
)

func (p vlogPtr) String() string {
	return fmt.Sprintf("%s@%d+%d", vlogSegName(p.seg), p.off, p.n)
}

func vlogSegName(seg uint32) string { return fmt.Sprintf("%010d%s", seg, vlogSuffix) }

func parseVlogSegName(name string) (uint32, bool) {
	rest, ok := strings.CutSuffix(name, vlogSuffix)
	if !ok || len(rest) != 10 {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 10, 32)
	return uint32(v), err == nil && v > 0
}

// appendVlogRecord encodes one record.
func appendVlogRecord(dst, key, value []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	dst = append(dst, key...)
	dst = append(dst, value...)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst
}

// parseVlogRecord checks one record's checksum and framing and returns its
// key and value (aliasing rec).
func parseVlogRecord(rec []byte) (key, value []byte, err error) {
	if len(rec) < 6 {
		return nil, nil, errors.New("short record")
	}
	if binary.LittleEndian.Uint32(rec) != crc32.Checksum(rec[4:], castagnoli) &&
		!fault.Planted(fault.BugVlogIgnoresCRC) { // planted only under -tags idem_selftest
		return nil, nil, errors.New("checksum mismatch")
	}
	klen, n1 := binary.Uvarint(rec[4:])
	if n1 <= 0 {
		return nil, nil, errors.New("bad key length")
	}
	vlen, n2 := binary.Uvarint(rec[4+n1:])
	if n2 <= 0 {
		return nil, nil, errors.New("bad value length")
	}
	body := rec[4+n1+n2:]
	if klen == 0 || klen > store.KeyBytesMax || klen+vlen != uint64(len(body)) {
		return nil, nil, errors.New("lengths do not match the record")
	}
	return body[:klen:klen], body[klen:], nil
}

// vlogSegment is one open segment file.
type vlogSegment struct {
	id   uint32
	f    vfs.File
	size int64 // bytes in the file (appended so far, for the active one)
}

// valueLog is the set of segments of one data directory. Reads take mu
// shared across their pread, so a segment is never closed under one;
// appends (the checkpointer's alone, under ckptMu) need no lock beyond
// installing a new segment.
type valueLog struct {
	fs     vfs.FS
	dir    string
	segMax int64

	mu   sync.RWMutex
	segs map[uint32]*vlogSegment

	// Writer state, owned by the checkpointer.
	active   *vlogSegment
	buf      []byte // appended, not yet written to active
	unsynced []*vlogSegment
	nextID   uint32
}

// openValueLog opens dir's segments for reading. Appends go to a new
// segment: one a crashed process left may end in a torn record.
func openValueLog(fsys vfs.FS, dataDir string, segMax int64) (*valueLog, error) {
	vl := &valueLog{fs: fsys, dir: filepath.Join(dataDir, vlogDirName), segMax: segMax, segs: map[uint32]*vlogSegment{}, nextID: 1}
	ents, err := fsys.ReadDir(vl.dir)
	if errors.Is(err, os.ErrNotExist) {
		return vl, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		id, ok := parseVlogSegName(e.Name())
		if !ok {
			continue
		}
		f, err := fsys.OpenFile(filepath.Join(vl.dir, e.Name()), os.O_RDONLY, 0)
		if err != nil {
			vl.close()
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			vl.close()
			return nil, err
		}
		vl.segs[id] = &vlogSegment{id: id, f: f, size: fi.Size()}
		vl.nextID = max(vl.nextID, id+1)
	}
	return vl, nil
}

// read returns the value ptr points at, which must be key's: a fresh
// slice, the caller's to keep. Anything else — a missing segment, a short
// read, a bad checksum, another key — is ErrCorruption naming the place.
func (vl *valueLog) read(key []byte, ptr vlogPtr) ([]byte, error) {
	rec := make([]byte, ptr.n)
	vl.mu.RLock()
	s := vl.segs[ptr.seg]
	var err error
	if s == nil {
		err = errors.New("no such segment")
	} else if int64(ptr.off)+int64(ptr.n) > s.size {
		err = fmt.Errorf("past the segment's end (%d bytes)", s.size)
	} else {
		_, err = s.f.ReadAt(rec, int64(ptr.off))
	}
	vl.mu.RUnlock()
	if err != nil {
		return nil, valueDamaged(key, ptr, err)
	}
	k, v, err := parseVlogRecord(rec)
	if err == nil && !bytes.Equal(k, key) {
		err = fmt.Errorf("the record is %q's", k)
	}
	if err != nil {
		return nil, valueDamaged(key, ptr, err)
	}
	return v, nil
}

func valueDamaged(key []byte, ptr vlogPtr, err error) error {
	return &store.ValueError{Key: bytes.Clone(key), Err: fmt.Errorf("%w: value of %q at %s: %v", store.ErrCorruption, key, ptr, err)}
}

// append adds key's value to the active segment (a new one first if it
// would not fit) and returns where. It is durable only after sync.
func (vl *valueLog) append(key, value []byte) (vlogPtr, error) {
	n := int64(vlogRecordHdrMax + len(key) + len(value))
	if vl.active == nil || vl.active.size+int64(len(vl.buf))+n > vl.segMax {
		if err := vl.rotate(); err != nil {
			return vlogPtr{}, err
		}
	}
	off := vl.active.size + int64(len(vl.buf))
	vl.buf = appendVlogRecord(vl.buf, key, value)
	ptr := vlogPtr{seg: vl.active.id, off: uint32(off), n: uint32(vl.active.size + int64(len(vl.buf)) - off)}
	if len(vl.buf) >= vlogWriteChunk {
		if err := vl.flush(); err != nil {
			return vlogPtr{}, err
		}
	}
	return ptr, nil
}

// vlogWriteChunk is how much is buffered before a write.
const vlogWriteChunk = 1 << 20

// flush writes the buffer to the active segment.
func (vl *valueLog) flush() error {
	if len(vl.buf) == 0 {
		return nil
	}
	if err := fault.Inject(fault.VlogWriteBefore); err != nil {
		return err
	}
	s := vl.active
	if _, err := s.f.Write(vl.buf); err != nil {
		return err
	}
	vl.mu.Lock() // readers check size under mu
	s.size += int64(len(vl.buf))
	vl.mu.Unlock()
	vl.buf = vl.buf[:0]
	if len(vl.unsynced) == 0 || vl.unsynced[len(vl.unsynced)-1] != s {
		vl.unsynced = append(vl.unsynced, s)
	}
	return nil
}

// rotate ends the active segment and starts a new one. The new file's
// directory entry is made durable at once: a pointer into it must never
// outlive a crash that loses the file.
func (vl *valueLog) rotate() error {
	if err := vl.flush(); err != nil {
		return err
	}
	if err := vfs.MkdirAllSynced(vl.fs, vl.dir, 0o750); err != nil {
		return err
	}
	id := vl.nextID
	f, err := vl.fs.OpenFile(filepath.Join(vl.dir, vlogSegName(id)), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o640)
	if err != nil {
		return err
	}
	if err := vfs.SyncDir(vl.fs, vl.dir); err != nil {
		f.Close()
		return err
	}
	s := &vlogSegment{id: id, f: f}
	vl.mu.Lock()
	vl.segs[id] = s
	vl.mu.Unlock()
	vl.active, vl.nextID = s, id+1
	return nil
}

// sync makes everything appended durable.
func (vl *valueLog) sync() error {
	if err := vl.flush(); err != nil {
		return err
	}
	for len(vl.unsynced) > 0 {
		if err := fault.Inject(fault.VlogSyncBefore); err != nil {
			return err
		}
		if err := vl.unsynced[0].f.Sync(); err != nil {
			return err
		}
		vl.unsynced = vl.unsynced[1:]
	}
	return nil
}

// syncSegment makes segment id durable: one an earlier process wrote and
// may not have synced (it was killed between spilling and syncing).
func (vl *valueLog) syncSegment(id uint32) error {
	vl.mu.RLock()
	defer vl.mu.RUnlock()
	if s := vl.segs[id]; s != nil {
		if err := fault.Inject(fault.VlogSyncBefore); err != nil {
			return err
		}
		return s.f.Sync()
	}
	return nil
}

// discardUnsynced drops what a failed checkpoint appended but did not
// sync: its bytes stay in the file as garbage no pointer reaches (the
// collector reclaims them), and the next append starts a new segment, so
// a failed write never leaves a hole under a later record.
func (vl *valueLog) discardUnsynced() {
	vl.buf, vl.unsynced, vl.active = vl.buf[:0], nil, nil
}

// remove deletes a segment no pointer reaches any more.
func (vl *valueLog) remove(id uint32) error {
	vl.mu.Lock()
	s := vl.segs[id]
	delete(vl.segs, id)
	vl.mu.Unlock()
	if s == nil {
		return nil
	}
	s.f.Close()
	if err := vl.fs.Remove(filepath.Join(vl.dir, vlogSegName(id))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return vfs.SyncDir(vl.fs, vl.dir)
}

// ids lists the segments, oldest first.
func (vl *valueLog) ids() []uint32 {
	vl.mu.RLock()
	defer vl.mu.RUnlock()
	out := make([]uint32, 0, len(vl.segs))
	for id := range vl.segs {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// size is a segment's length as written so far (0 if it is gone); it
// may be read from any goroutine.
func (vl *valueLog) size(id uint32) int64 {
	vl.mu.RLock()
	defer vl.mu.RUnlock()
	if s := vl.segs[id]; s != nil {
		return s.size
	}
	return 0
}

// records calls fn for each record of segment id from its start, in order,
// until fn returns false or the segment ends. A record whose framing holds
// but whose checksum does not (damage) is passed over; it stops at the first
// record whose framing does not hold (a torn tail: nothing after it can be
// found) and returns the offset it reached.
func (vl *valueLog) records(id uint32, fn func(ptr vlogPtr, key, value []byte) bool) (int64, error) {
	vl.mu.RLock()
	s := vl.segs[id]
	vl.mu.RUnlock()
	if s == nil {
		return 0, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 1<<20)
	var off int64
	for off < s.size {
		h, err := r.Peek(min(vlogRecordHdrMax, int(s.size-off)))
		if err != nil && !errors.Is(err, io.EOF) {
			return off, err
		}
		if len(h) < 6 { // less than the smallest record: a torn tail
			return off, nil
		}
		klen, n1 := binary.Uvarint(h[4:])
		if n1 <= 0 {
			return off, nil
		}
		vlen, n2 := binary.Uvarint(h[4+n1:])
		if n2 <= 0 || klen == 0 || klen > store.KeyBytesMax || vlen > store.BatchBytesMax {
			return off, nil
		}
		n := int64(4+n1+n2) + int64(klen+vlen)
		if off+n > s.size {
			return off, nil
		}
		rec := make([]byte, n)
		if _, err := io.ReadFull(r, rec); err != nil {
			return off, err
		}
		k, v, err := parseVlogRecord(rec)
		if err != nil {
			off += n // damaged: its neighbours are still records
			continue
		}
		if !fn(vlogPtr{seg: id, off: uint32(off), n: uint32(n)}, k, v) {
			return off + n, nil
		}
		off += n
	}
	return off, nil
}

func (vl *valueLog) close() error {
	vl.mu.Lock()
	defer vl.mu.Unlock()
	var first error
	for id, s := range vl.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
		delete(vl.segs, id)
	}
	return first
}
