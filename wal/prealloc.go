package wal

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/idemdb/idem/internal/tidwall"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/vfs"
)

// Preallocated segments. An fdatasync after a write that grows a file must
// also make the new size and the new blocks durable: a journal commit on
// ext4 and XFS. A write over blocks that are already allocated, and inside
// the file's durable size, needs only its data flushed. On this project's
// disk a 2.5 KB write + fdatasync takes about 150 µs p50 over zeros that
// were written and fsynced before, and 250 µs appended (docs/benchmarks.md)
// — and that fsync is most of a keyed request's latency at concurrency 1.
// So the log writes its segments into files written full of zeros and
// fsynced beforehand, as PostgreSQL does with wal_init_zero.
//
// The spare is such a file. It is prepared off the write path, as
// SPARE.partial — zeros, fsync — and renamed to SPARE; a new segment is SPARE
// renamed to the segment's name. The spare stays open from its preparation
// on, and the segment is written through that same descriptor: a segment
// roll opens no file, so a process out of descriptors (a flood of
// connections) still rolls (see also Log.dirFile). The writer's directory fsync after a new
// segment (writeGroup) makes both renames durable at once, so preparing a
// spare syncs no directory. A log only takes a spare it made itself since
// Open: after a crash a SPARE may hold the entries of a segment whose
// rename was not yet durable. Leftovers stay until the next spare made
// replaces them (O_TRUNC, then rename over SPARE), so that an open that is
// refused changes nothing.
//
// The zeros past a segment's entries (its fill) read as the end of its
// entries: a zero length prefix is never written (frames are at least
// frameHeader bytes), and scanSegment takes one as the end only when
// nothing but zeros follows.

const (
	spareName     = "SPARE"
	spareTempName = "SPARE.partial"
	// spareChunkBytes is the size of one zero write of a spare, and how
	// far a spare's preparation runs past a Close before it stops.
	spareChunkBytes = 1 << 20
	// spareSlackDiv: a spare is 1/spareSlackDiv longer than SegmentBytes.
	// tidwall leaves a segment only once it holds SegmentBytes, so the
	// group that fills it ends past that; what goes beyond the spare is
	// appended, one slower fsync per segment at most.
	spareSlackDiv = 16
	// spareTriggerBytesMax: a spare is prepared once the tail segment
	// holds this much (a quarter of a segment, if less). A log that writes
	// less after Open never pays a segment of zeros for it.
	spareTriggerBytesMax = 256 << 10
)

var zeroChunk [spareChunkBytes]byte

// isZero reports whether b holds nothing but zero bytes.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroChunk))
		if !bytes.Equal(b[:n], zeroChunk[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

type spareState int

const (
	spareNone      spareState = iota // none on disk, none being made
	sparePreparing                   // a goroutine is writing SPARE.partial
	spareReady                       // SPARE is whole and fsynced
	spareFailed                      // the last one failed: no retry before the next segment
)

// preallocator keeps one spare segment ready for the log in dir.
type preallocator struct {
	fs      vfs.FS
	dir     string
	size    int64 // bytes of zeros in a spare
	trigger int   // tail bytes at which a spare is prepared
	log     *slog.Logger
	fsyncs  *Histogram // segment fsyncs: a spare becomes a segment
	// tailFilled: the tail segment is preallocated. The writer's (ioMu),
	// and set while tidwall opens or cycles a segment.
	tailFilled bool

	mu    sync.Mutex
	state spareState
	spare vfs.File      // SPARE, open for writing, while spareReady
	stop  chan struct{} // closed by close to end a preparation early
	done  chan struct{} // closed when the running preparation returns

	taken, failed atomic.Uint64
}

func newPreallocator(fsys vfs.FS, dir string, segmentBytes int, log *slog.Logger, fsyncs *Histogram) *preallocator {
	size := int64(segmentBytes) + int64(segmentBytes)/spareSlackDiv
	size = (size + zeroBlockBytes - 1) / zeroBlockBytes * zeroBlockBytes
	return &preallocator{fs: fsys, dir: dir, size: size, trigger: min(spareTriggerBytesMax, segmentBytes/4),
		log: log, fsyncs: fsyncs}
}

// sparesIn names the spare files in dir.
func sparesIn(fsys vfs.FS, dir string) ([]string, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if name := e.Name(); name == spareName || name == spareTempName {
			out = append(out, name)
		}
	}
	return out, nil
}

// ensure starts preparing a spare unless one is ready, being made, or the
// last attempt failed.
func (p *preallocator) ensure() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != spareNone {
		return
	}
	p.state = sparePreparing
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.prepare(p.stop, p.done)
}

func (p *preallocator) ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == spareReady
}

func (p *preallocator) prepare(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	f, err := p.writeSpare(stop)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.state, p.spare = spareReady, f
	case errors.Is(err, errSpareStopped):
		p.state = spareNone
	default:
		p.state = spareFailed
		p.failed.Add(1)
		// A spare only makes fsyncs cheaper: without one the next
		// segment is an ordinary file (a full disk lands here).
		p.log.Warn("wal: could not preallocate the next segment", "dir", p.dir, "err", err)
	}
}

// writeSpare writes SPARE.partial full of zeros, fsyncs it and renames it to
// SPARE, which it returns open. On failure it removes what it wrote.
func (p *preallocator) writeSpare(stop <-chan struct{}) (_ vfs.File, err error) {
	tmp := filepath.Join(p.dir, spareTempName)
	defer func() {
		if err != nil {
			if rerr := p.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				p.log.Warn("wal: could not remove a partial spare segment", "file", tmp, "err", rerr)
			}
		}
	}()
	if err := fault.Inject(fault.WALSpareWriteBefore); err != nil {
		return nil, err
	}
	f, err := p.fs.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	for written := int64(0); written < p.size; {
		select {
		case <-stop:
			return nil, errSpareStopped
		default:
		}
		n, err := f.Write(zeroChunk[:min(int64(len(zeroChunk)), p.size-written)])
		if err != nil {
			return nil, err
		}
		written += int64(n)
	}
	if err := fault.Inject(fault.WALSpareSyncBefore); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := p.fs.Rename(tmp, filepath.Join(p.dir, spareName)); err != nil {
		return nil, err
	}
	return f, nil
}

// createSegment is tidwall's CreateSegment: the ready spare renamed to
// path, or else an ordinary empty file. The caller (tidwall, under the
// writer's ioMu) fsyncs the directory before anything in it is
// acknowledged.
func (p *preallocator) createSegment(path string) (tidwall.File, error) {
	if f, ok := p.takeSpare(path); ok {
		p.tailFilled = true
		return timedFile{File: f, fsyncs: p.fsyncs}, nil
	}
	p.tailFilled = false
	f, err := p.fs.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, err
	}
	return timedFile{File: f, fsyncs: p.fsyncs}, nil
}

// takeSpare renames a ready spare to path and opens it for writing at 0.
// Any failure falls back to an ordinary file (createSegment truncates
// path, whether the rename happened or not).
func (p *preallocator) takeSpare(path string) (vfs.File, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case spareFailed:
		p.state = spareNone // a new segment: worth another try
		return nil, false
	case spareReady:
	default:
		return nil, false
	}
	f := p.spare
	p.state, p.spare = spareNone, nil
	err := fault.Inject(fault.WALSpareTakeBefore)
	if err == nil {
		err = p.fs.Rename(filepath.Join(p.dir, spareName), path)
	}
	if err == nil {
		// The descriptor the spare was written through: no open here.
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		p.failed.Add(1)
		p.log.Warn("wal: could not use the preallocated segment", "segment", path, "err", err)
		return nil, false
	}
	p.taken.Add(1)
	return f, true
}

// close stops a running preparation and waits for it. A ready spare stays
// on disk: Open changes nothing, and the next spare made replaces it.
func (p *preallocator) close() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	if p.state == sparePreparing {
		close(stop)
	}
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spare != nil {
		p.spare.Close()
		p.spare = nil
		p.state = spareNone
	}
}
