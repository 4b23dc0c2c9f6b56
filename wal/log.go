package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/internal/tidwall"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/vfs"
)

// Entry is one appended record. Body must not be modified until the append
// is durable. Tag is the caller's and is handed back in OnDurable.
type Entry struct {
	Index uint64
	Kind  Kind
	Body  []byte
	Tag   any
}

// group is the unit of one WriteBatch and one fsync.
type group struct {
	entries []Entry
	bytes   int
	done    chan struct{}
	err     error
	self    *Log        // set when its appender writes it itself, on an idle log (EnqueueAll)
	claimed atomic.Bool // the one waiter that writes a self group took it
}

// Commit is the handle of one enqueued entry.
type Commit struct{ g *group }

// Wait blocks until the entry's group is durable (nil), failed (ErrAmbiguous
// or ErrFailStopped), or ctx ends (ctx.Err(): the entry may still become
// durable).
func (c Commit) Wait(ctx context.Context) error {
	if l := c.g.self; l != nil && c.g.claimed.CompareAndSwap(false, true) {
		// The first waiter writes the entry (its appender, or anyone
		// waiting on it first): a write is never abandoned half-way, so
		// it runs to the end whatever ctx says.
		l.writeSelf(c.g)
		return c.g.err
	}
	select {
	case <-c.g.done:
		return c.g.err
	default:
	}
	select {
	case <-c.g.done:
		return c.g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are cumulative counters since Open.
type Stats struct {
	Groups  uint64 // group commits written
	Entries uint64 // entries made durable
	Fsyncs  uint64 // fsync calls on segment files (tidwall's included) and the directory; FsyncDuration.Count
	Bytes   uint64 // frame bytes written
	// FsyncDuration: nanoseconds per fsync call, failed ones included.
	FsyncDuration HistogramSnapshot
	// GroupEntries: entries per group commit (Count is Groups, Sum Entries).
	GroupEntries HistogramSnapshot
	// Preallocated counts segments started on a spare (prealloc.go);
	// PreallocFailures spares that could not be made or taken.
	Preallocated, PreallocFailures uint64
	// Lingered counts groups the writer held open while the cores were
	// busy (linger.go).
	Lingered uint64
	// DescriptorWaits counts opens that met EMFILE or ENFILE and waited
	// for a descriptor instead of failing (vfs.WaitFS).
	DescriptorWaits uint64
}

// Log is a write-ahead log. All methods are safe for concurrent use except
// Replay, which must run before the first Enqueue.
type Log struct {
	dir   string
	opts  Options
	tw    *tidwall.Log
	slots chan struct{}
	// reserveN serializes multi-slot reservations: two of them each holding
	// part of what they need could otherwise wait on each other forever.
	reserveN sync.Mutex

	mu      sync.Mutex
	cond    sync.Cond
	queue   []*group // groups not yet taken by the writer; the last one is open
	next    uint64   // index of the next Enqueue
	failed  error
	closing bool
	// writerBusy: the writer holds a group it has not yet handed on;
	// selfWriting: an appender is writing its own group. Either one keeps
	// the other from writing, which keeps log order (EnqueueAll, writeSelf).
	writerBusy  bool
	selfWriting bool
	started     bool // an Enqueue happened: Replay is no longer allowed
	openedClean bool // Open found a valid close marker (and removed it)

	ioMu      sync.Mutex // held by the writer during a group and by TruncateFront
	segs      []segmentFile
	tailBytes int    // bytes in the tail segment, mirroring tidwall's cycling rule
	written   uint64 // index of the last entry written and fsynced (snapshot.go)
	twBatch   tidwall.Batch
	frameBuf  []byte
	parts     []groupPart   // scratch of writeGroup
	prealloc  *preallocator // nil with Options.NoPreallocation
	// dirFile is the log's directory, open from Open to Close: the
	// directory sync of a segment roll takes no descriptor (with the
	// spare's, prealloc.go, a roll opens nothing).
	dirFile vfs.File
	fds     *vfs.WaitFS // the log's FS (opts.FS)
	// tailImage is the tail segment as Open's repair read it, for the
	// first Replay to read instead of the file; nil once a Replay or an
	// Enqueue has run.
	tailImage atomic.Pointer[[]byte]
	tailFirst uint64 // the first index of tailImage's segment

	writerDone chan struct{}
	// coresBusy tells the writer whether to linger, and lingerWait waits
	// (linger.go); tests replace both (under mu, which the writer holds
	// when it takes them up).
	coresBusy  func() bool
	lingerWait func(time.Duration)
	lingered   atomic.Uint64
	publishing atomic.Int64 // groups handed to the publisher, not yet published
	groups     atomic.Uint64
	entries    atomic.Uint64
	bytes      atomic.Uint64
	// fsyncs times every fsync (stats.go); groupEntries sizes every group.
	fsyncs       *Histogram
	groupEntries *Histogram
}

// Open opens or creates the log in dir. A torn final group write is cut
// first (see tail.go); damage that is not one fails with a
// *CorruptionError and changes nothing.
func Open(dir string, opts Options) (*Log, RepairReport, error) {
	opts = opts.withDefaults()
	// Every open of the log's waits out a shortage of descriptors from
	// the end of Open to the start of Close (vfs.WaitFS says why).
	fds := vfs.NewWaitFS(opts.FS, opts.Logger)
	opts.FS = fds
	fsys := opts.FS
	if err := vfs.MkdirAllSynced(fsys, dir, 0o750); err != nil {
		return nil, RepairReport{}, err
	}
	rep, tail, closed, err := repairBeforeOpen(dir, opts)
	if err != nil {
		return nil, rep, err
	}
	fsyncs := NewHistogram(fsyncBounds)
	tw, pre, err := openTidwall(dir, opts, fsyncs, tail)
	if err != nil {
		return nil, rep, err
	}
	l, err := newLog(dir, opts, tw, pre, tail)
	if err != nil {
		tw.Close()
		return nil, rep, err
	}
	l.fsyncs, l.fds = fsyncs, fds
	if closed != notClosed {
		// From the first write on, a stop is a crash again.
		if err := removeMarker(fsys, dir); err != nil {
			tw.Close()
			l.dirFile.Close()
			return nil, rep, err
		}
		l.openedClean = closed == closedCleanly
	}
	warnDamageFiles(fsys, dir, opts.Logger)
	fds.Begin()
	go l.run()
	return l, rep, nil
}

// repairBeforeOpen reads the segments and the close marker and cuts a torn
// tail (repair.go) before tidwall reads the log, which would refuse one.
// tail is the repaired tail's shape, nil when repair did not read it.
func repairBeforeOpen(dir string, opts Options) (rep RepairReport, tail *tailShape, closed closeState, err error) {
	fsys := opts.FS
	segs, startIndex, err := listSegments(fsys, dir)
	if err != nil {
		return rep, nil, closed, err
	}
	marker, closed, err := readMarker(fsys, dir)
	if err != nil {
		return rep, nil, closed, err
	}
	switch n := len(segs); {
	case n == 0 && closed == closedCleanly:
		return rep, nil, closed, &CorruptionError{Segment: segmentName(marker.tailFirst), Path: filepath.Join(dir, segmentName(marker.tailFirst)),
			Index: marker.lastIndex, Reason: "the log was closed cleanly, but it has no segments now"}
	case n > 0 && segs[n-1].first > startIndex:
		// A segment older than an interrupted truncation's START file is
		// deleted by tidwall's loader, so only a tail after it can be torn.
		rep, tail, err = repairTail(fsys, dir, segs[n-1], marker, closed, 2*int64(opts.GroupBytesMax), opts.Logger)
		if err != nil {
			return RepairReport{}, nil, closed, err
		}
		if rep.Segment != "" {
			opts.Logger.Warn("wal: cut torn tail", "segment", rep.Segment, "offset", rep.CutOffset,
				"dropped_bytes", rep.DroppedLen, "kept", rep.TornCopy, "why", rep.Why)
		}
	}
	return rep, tail, closed, nil
}

// openTidwall opens the segments under our frames: we fsync once per
// group, and new segments come from the preallocator unless it is off.
// tail, if repair read it, spares tidwall reading the tail again.
func openTidwall(dir string, opts Options, fsyncs *Histogram, tail *tailShape) (*tidwall.Log, *preallocator, error) {
	var known *tidwall.KnownTail
	if tail != nil && tail.image != nil {
		known = &tidwall.KnownTail{Index: tail.first, Entries: int(tail.entries), End: tail.end}
	}
	var pre *preallocator
	var createSegment func(string) (tidwall.File, error)
	if !opts.NoPreallocation {
		pre = newPreallocator(opts.FS, dir, opts.SegmentBytes, opts.Logger, fsyncs)
		createSegment = pre.createSegment
	}
	tw, err := tidwall.Open(dir, &tidwall.Options{
		NoSync:           true, // we fsync once per group
		SegmentSize:      opts.SegmentBytes,
		SegmentCacheSize: 1,
		NoCopy:           true,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
		FS:               twFS{fs: opts.FS, fsyncs: fsyncs},
		CreateSegment:    createSegment,
		KnownTail:        known,
	})
	if err != nil {
		if errors.Is(err, tidwall.ErrCorrupt) {
			return nil, nil, &CorruptionError{Segment: dir, Path: dir, Reason: "tidwall: " + err.Error()}
		}
		return nil, nil, err
	}
	return tw, pre, nil
}

// warnDamageFiles says which kept copies of cut bytes are in dir.
func warnDamageFiles(fsys vfs.FS, dir string, log *slog.Logger) {
	files, err := damageFiles(fsys, dir)
	if err != nil || len(files) == 0 {
		return
	}
	var total int64
	names := make([]string, len(files))
	for i, f := range files {
		names[i], total = f.Name, total+f.Bytes
	}
	log.Warn("wal: damage files kept for inspection (safe to delete; removed with their segment)",
		"dir", dir, "files", names, "bytes", total)
}

// newLog builds the Log over an open tidwall log. tail is the repaired
// tail's shape, nil when repair did not read it (a new log, or a tail that
// an interrupted truncation's START file leaves to tidwall).
func newLog(dir string, opts Options, tw *tidwall.Log, pre *preallocator, tail *tailShape) (_ *Log, err error) {
	dirFile, err := opts.FS.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dirFile.Close()
		}
	}()
	// tidwall may have created the first segment.
	if err := dirFile.Sync(); err != nil {
		return nil, err
	}
	last, err := tw.LastIndex()
	if err != nil {
		return nil, err
	}
	segs, _, err := listSegments(opts.FS, dir)
	if err != nil {
		return nil, err
	}
	var image []byte
	if tail == nil {
		if tail, err = tailShapeOf(opts.FS, dir, segs[len(segs)-1]); err != nil {
			return nil, err
		}
	} else if tail.image != nil && tw.OpenedFromKnownTail() {
		image = tail.image
	}
	if pre != nil {
		pre.tailFilled = tail.fill
	}
	l := &Log{
		dir:        dir,
		opts:       opts,
		tw:         tw,
		slots:      make(chan struct{}, opts.QueueEntriesMax),
		next:       last + 1,
		segs:       segs,
		tailBytes:  tail.end,
		written:    last,
		prealloc:   pre,
		dirFile:    dirFile,
		writerDone: make(chan struct{}),
		coresBusy:  newCoreWatch().busy,
		lingerWait: time.Sleep,

		groupEntries: NewHistogram(groupEntriesBounds),
	}
	l.cond.L = &l.mu
	if image != nil {
		l.tailImage.Store(&image)
		l.tailFirst = tail.first
	}
	return l, nil
}

// FirstIndex is the index of the oldest entry still on disk (it may precede
// the last checkpoint: truncation removes whole segments only).
func (l *Log) FirstIndex() uint64 {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	return l.segs[0].first
}

// LastIndex is the index of the newest enqueued entry (0 for an empty log).
func (l *Log) LastIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// Stats returns cumulative counters.
func (l *Log) Stats() Stats {
	fsyncs := l.fsyncs.Snapshot()
	s := Stats{Groups: l.groups.Load(), Entries: l.entries.Load(), Fsyncs: fsyncs.Count, Bytes: l.bytes.Load(),
		FsyncDuration: fsyncs, GroupEntries: l.groupEntries.Snapshot(), Lingered: l.lingered.Load(),
		DescriptorWaits: l.fds.Waits()}
	if p := l.prealloc; p != nil {
		s.Preallocated, s.PreallocFailures = p.taken.Load(), p.failed.Load()
	}
	return s
}

// Reserve takes one queue slot for a following Enqueue, blocking while
// QueueEntriesMax entries are in flight. A slot that is not followed by an
// Enqueue must be returned with Unreserve.
func (l *Log) Reserve(ctx context.Context) error {
	if err := l.writable(); err != nil {
		return err
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unreserve returns a slot taken by Reserve that was not used.
func (l *Log) Unreserve() { <-l.slots }

// ReserveN takes n slots for a following EnqueueAll of n entries, all or
// none: on error no slot is held. n must be in 1..QueueEntriesMax.
func (l *Log) ReserveN(ctx context.Context, n int) error {
	if n < 1 || n > l.opts.QueueEntriesMax {
		return fmt.Errorf("wal: reserve %d slots (1..%d)", n, l.opts.QueueEntriesMax)
	}
	if n == 1 {
		return l.Reserve(ctx) // holds nothing while it waits
	}
	l.reserveN.Lock()
	defer l.reserveN.Unlock()
	for i := range n {
		if err := l.Reserve(ctx); err != nil {
			l.UnreserveN(i)
			return err
		}
	}
	return nil
}

// UnreserveN returns n slots taken by ReserveN that were not used.
func (l *Log) UnreserveN(n int) {
	for range n {
		<-l.slots
	}
}

func (l *Log) writable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closing:
		return ErrClosed
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailStopped, l.failed)
	}
	return nil
}

// NextIndex is the index the next Enqueue will assign.
func (l *Log) NextIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// refusal is why an Enqueue is refused, nil if it is not. Caller holds mu.
func (l *Log) refusal() error {
	switch {
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailStopped, l.failed)
	case l.closing:
		return ErrClosed
	}
	return nil
}

// Enqueue appends an entry to the open group and returns its index. The
// caller must hold a slot from Reserve; on error the slot is released.
// Enqueue never blocks on I/O.
func (l *Log) Enqueue(kind Kind, body []byte, tag any) (uint64, Commit, error) {
	return l.EnqueueAll([]Entry{{Kind: kind, Body: body, Tag: tag}})
}

// EnqueueAll appends entries back to back, assigning their indexes from
// first on, all in one group so that one fsync makes them durable together
// (a crash may still keep a prefix of them). The caller holds one slot per
// entry (ReserveN); on error they are released. It never blocks on I/O.
func (l *Log) EnqueueAll(entries []Entry) (first uint64, c Commit, err error) {
	l.mu.Lock()
	if err := l.refusal(); err != nil {
		l.mu.Unlock()
		l.UnreserveN(len(entries))
		return 0, Commit{}, err
	}
	first = l.next
	size := 0
	for i := range entries {
		entries[i].Index = first + uint64(i)
		size += frameSize(len(entries[i].Body), false)
	}
	l.next += uint64(len(entries))
	if !l.started {
		l.tailImage.Store(nil) // no Replay can use it now
	}
	l.started = true
	if len(l.queue) == 0 && !l.writerBusy && !l.selfWriting && l.publishing.Load() == 0 {
		// The log is idle: the appender writes and publishes its own
		// entries in Commit.Wait, saving the two goroutine handoffs of a
		// round trip through the writer. Entries enqueued meanwhile wait
		// in the queue; the writer starts on them once these are
		// published, so log order and publication order stay index order.
		l.selfWriting = true
		g := &group{done: make(chan struct{}), self: l, bytes: size, entries: entries}
		l.mu.Unlock()
		return first, Commit{g}, nil
	}
	var g *group
	if n := len(l.queue); n > 0 {
		last := l.queue[n-1]
		if len(last.entries)+len(entries) <= l.opts.GroupEntriesMax && last.bytes+size <= l.opts.GroupBytesMax {
			g = last
		}
	}
	if g == nil {
		// A new group takes all of them even beyond the group bounds, as
		// it takes a single entry larger than GroupBytesMax.
		g = &group{done: make(chan struct{})}
		l.queue = append(l.queue, g)
		l.cond.Signal()
	}
	g.entries = append(g.entries, entries...)
	g.bytes += size
	l.mu.Unlock()
	return first, Commit{g}, nil
}

// TruncateFront removes whole segments all of whose entries precede index
// (the first index a checkpoint does not cover). The tail segment always stays.
func (l *Log) TruncateFront(index uint64) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	removed := 0
	for len(l.segs) > 1 && l.segs[1].first <= index {
		if err := fault.Inject(fault.WALTruncateBefore); err != nil {
			return err
		}
		if err := l.opts.FS.Remove(filepath.Join(l.dir, l.segs[0].name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := removeDamageFilesOf(l.opts.FS, l.dir, l.segs[0].name); err != nil {
			return err
		}
		l.segs = l.segs[1:]
		removed++
	}
	if removed == 0 {
		return nil
	}
	if err := fault.Inject(fault.WALTruncateAfter); err != nil {
		return err
	}
	return l.syncDir()
}

// Replay calls fn for every entry with index ≥ from, in order. It must run
// before the first Enqueue. A damaged or missing entry anywhere is a
// *CorruptionError (the tail was already repaired by Open). Bodies passed to
// fn are only valid during the call.
func (l *Log) Replay(from uint64, fn func(index uint64, kind Kind, body []byte) error) error {
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if started {
		return errors.New("wal: Replay after Enqueue")
	}
	l.ioMu.Lock()
	segs := append([]segmentFile(nil), l.segs...)
	l.ioMu.Unlock()
	tailImage := l.tailImage.Swap(nil) // held only until the log is replayed
	last := l.next - 1
	if from == 0 {
		from = 1
	}
	if segs[0].first > from {
		return &CorruptionError{Segment: segs[0].name, Path: filepath.Join(l.dir, segs[0].name), Index: from,
			Reason: fmt.Sprintf("entries %d..%d are missing (log starts at %d)", from, segs[0].first-1, segs[0].first)}
	}
	if last+1 < from {
		return &CorruptionError{Segment: segs[len(segs)-1].name, Path: filepath.Join(l.dir, segs[len(segs)-1].name), Index: last + 1,
			Reason: fmt.Sprintf("log ends at %d but entries up to %d were acknowledged", last, from-1)}
	}
	var buf []byte // one buffer for every segment: fn's bodies are valid only during the call
	for i, s := range segs {
		end := last // index of the segment's last entry
		if i+1 < len(segs) {
			end = segs[i+1].first - 1
		}
		if end < from || end < s.first {
			continue
		}
		data, err := l.replaySegment(s, i == len(segs)-1, tailImage, buf)
		if err != nil {
			return err
		}
		buf = data
		r, err := scanSegment(data, s.first, func(index uint64, kind Kind, body []byte) error {
			if index < from {
				return nil
			}
			return fn(index, kind, body)
		})
		if err != nil {
			return err
		}
		if r.err != nil {
			return &CorruptionError{Segment: s.name, Path: filepath.Join(l.dir, s.name), Index: s.first + r.entries, Offset: int64(r.validEnd),
				Reason: r.err.Error() + "; only the last segment can be torn by a crash"}
		}
		if want := end - s.first + 1; r.entries != want {
			return &CorruptionError{Segment: s.name, Path: filepath.Join(l.dir, s.name), Index: s.first + r.entries, Offset: int64(r.validEnd),
				Reason: fmt.Sprintf("segment holds %d entries, want %d", r.entries, want)}
		}
	}
	return nil
}

// replaySegment is segment s's bytes for Replay: the tail's image that
// Open's repair read, if s is that tail, else the file read into buf.
func (l *Log) replaySegment(s segmentFile, last bool, tailImage *[]byte, buf []byte) ([]byte, error) {
	if last && tailImage != nil && l.tailFirst == s.first {
		return *tailImage, nil
	}
	return vfs.ReadFileInto(l.opts.FS, filepath.Join(l.dir, s.name), buf)
}

// Close waits for queued groups, then closes the files and makes the close
// marker durable (see marker.go). After a fail-stop it does neither, and
// does not fsync again (see the package comment): the next Open treats the
// stop as the crash it was.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closing = true
	l.cond.Broadcast()
	l.mu.Unlock()
	// A wait for a descriptor ends here with the shortage error, which
	// fail-stops the log like any other: Close never hangs on a flood.
	l.fds.Stop()
	<-l.writerDone
	if l.prealloc != nil {
		l.prealloc.close()
	}
	defer l.dirFile.Close()
	l.mu.Lock()
	failed, started := l.failed, l.started
	l.mu.Unlock()
	if failed != nil {
		// tidwall's Close would fsync; its file handle is left to the
		// runtime's finalizer instead.
		return nil
	}
	if err := l.tw.Close(); err != nil {
		return err
	}
	if !started && !l.openedClean {
		// Nothing was written since a crash (say recovery refused the
		// replay): leave the directory as Open found it.
		return nil
	}
	l.ioMu.Lock()
	tail := l.segs[len(l.segs)-1]
	l.ioMu.Unlock()
	fi, err := l.opts.FS.Stat(filepath.Join(l.dir, tail.name))
	if err != nil {
		return err
	}
	return writeMarker(l.opts.FS, l.dir, closeMarker{tailFirst: tail.first, tailSize: fi.Size(), lastIndex: l.LastIndex()})
}
