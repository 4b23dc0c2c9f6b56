package wal

import (
	"fmt"

	"github.com/idemdb/idem/fault"
)

// The writer: one goroutine (or, on an idle log, the appender itself) writes
// each group with one WriteBatch and one fsync, and a publisher goroutine
// runs OnDurable and releases the group's appenders in log order.

// run is the writer goroutine: it owns the tidwall log's write side. A
// durable group goes to the publisher goroutine (publish), so the next
// group's write and fsync overlap the previous group's OnDurable work; the
// publisher keeps log order, and nobody is released before their group
// was both durable and published.
func (l *Log) run() {
	defer close(l.writerDone)
	durable := make(chan *group, publishQueueMax)
	published := make(chan struct{})
	go l.publish(durable, published)
	defer func() {
		close(durable)
		<-published
	}()
	for {
		l.mu.Lock()
		for l.selfWriting || (len(l.queue) == 0 && !l.closing) {
			l.cond.Wait()
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		l.linger()
		g := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		failed := l.failed
		l.writerBusy = true
		l.mu.Unlock()

		switch {
		case failed != nil:
			// Never handed to the file system: definitely not written.
			g.err = fmt.Errorf("%w: %w", ErrFailStopped, failed)
		default:
			if err := l.writeGroup(g); err != nil {
				l.mu.Lock()
				l.failed = err
				l.mu.Unlock()
				g.err = fmt.Errorf("%w: %w", ErrAmbiguous, err)
				l.opts.Logger.Error("wal: fail-stop", "err", err, "first_index", g.entries[0].Index)
			}
		}
		// A lone appender (a one-entry group, nothing queued behind it, the
		// publisher idle) is published here, saving a goroutine handoff on
		// its latency path. Under load the publisher does it, overlapping
		// the next group's write and fsync — publishing inline then would
		// stretch every group cycle.
		l.mu.Lock()
		idle := len(l.queue) == 0
		l.mu.Unlock()
		if idle && len(g.entries) == 1 && l.publishing.Load() == 0 {
			l.publishGroup(g)
		} else {
			l.publishing.Add(1)
			durable <- g
		}
		l.mu.Lock()
		l.writerBusy = false
		l.mu.Unlock()
	}
}

// writeSelf writes and publishes a group its own appender holds (see
// EnqueueAll), then lets the writer go on with whatever queued meanwhile.
func (l *Log) writeSelf(g *group) {
	defer func() {
		// A panic mid-write (a failpoint armed with `panic`, a bug) must
		// not strand the writer behind selfWriting, or every deferred
		// Close on the way up would hang: fail-stop the log as an I/O error
		// would, release the group, and let the panic go on.
		if r := recover(); r != nil {
			l.mu.Lock()
			if l.failed == nil {
				l.failed = fmt.Errorf("wal: panic while writing: %v", r)
			}
			l.selfWriting = false
			l.cond.Broadcast()
			l.mu.Unlock()
			g.err = fmt.Errorf("%w: panic while writing", ErrAmbiguous)
			for range g.entries {
				<-l.slots
			}
			close(g.done)
			panic(r)
		}
	}()
	l.mu.Lock()
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		g.err = fmt.Errorf("%w: %w", ErrFailStopped, failed)
	} else if err := l.writeGroup(g); err != nil {
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
		g.err = fmt.Errorf("%w: %w", ErrAmbiguous, err)
		l.opts.Logger.Error("wal: fail-stop", "err", err, "first_index", g.entries[0].Index)
	}
	l.publishGroup(g)
	l.mu.Lock()
	l.selfWriting = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

// publishQueueMax bounds groups written but not yet published.
const publishQueueMax = 4

// publish runs OnDurable for each durable group in log order, then
// releases the group's appenders and their queue slots.
func (l *Log) publish(durable <-chan *group, done chan<- struct{}) {
	defer close(done)
	for g := range durable {
		l.publishGroup(g)
		l.publishing.Add(-1)
	}
}

func (l *Log) publishGroup(g *group) {
	if g.err == nil && l.opts.OnDurable != nil {
		l.opts.OnDurable(g.entries)
	}
	for range g.entries {
		<-l.slots
	}
	close(g.done)
}

// groupPart is the run of a group's entries that tidwall writes into one
// segment; its first entry is the head that declares the run's bytes.
type groupPart struct {
	first int // index into the group's entries
	bytes int // on-disk bytes of the run, length prefixes included
}

// planParts splits g into the runs tidwall will write to each segment,
// mirroring tidwall's cycling rule, and records the segments it will
// create. It returns the tail segment's size after the group and whether
// a segment was created. Caller holds ioMu.
func (l *Log) planParts(g *group) (tail int, cycled bool) {
	tail = l.tailBytes
	if tail > l.opts.SegmentBytes {
		// tidwall starts a new segment before writing into an overfull one.
		l.segs = append(l.segs, segmentFile{name: segmentName(g.entries[0].Index), first: g.entries[0].Index})
		tail, cycled = 0, true
	}
	l.parts = append(l.parts[:0], groupPart{first: 0})
	for i, e := range g.entries {
		p := &l.parts[len(l.parts)-1]
		n := onDiskSize(frameSize(len(e.Body), i == p.first))
		p.bytes += n
		tail += n
		if tail >= l.opts.SegmentBytes {
			// tidwall cycles as soon as a segment reaches its size (and
			// fsyncs the segment it leaves).
			l.segs = append(l.segs, segmentFile{name: segmentName(e.Index + 1), first: e.Index + 1})
			tail, cycled = 0, true
			if i+1 < len(g.entries) {
				l.parts = append(l.parts, groupPart{first: i + 1})
			}
		}
	}
	return tail, cycled
}

// leavePlainTail starts a new segment before g when the tail is an
// ordinary file (a new log's first, or one cut by repair) and a spare is
// ready, so that a log is back on preallocated segments long before the
// tail would fill. Caller holds ioMu.
func (l *Log) leavePlainTail(g *group) (bool, error) {
	p := l.prealloc
	if p == nil || p.tailFilled || l.tailBytes < p.trigger || !p.ready() {
		return false, nil
	}
	if err := l.tw.Cycle(); err != nil {
		return false, err
	}
	first := g.entries[0].Index
	l.segs = append(l.segs, segmentFile{name: segmentName(first), first: first})
	l.tailBytes = 0
	return true, nil
}

// writeGroup writes one group with one WriteBatch and one fsync.
func (l *Log) writeGroup(g *group) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	if err := fault.Inject(fault.WALWriteBefore); err != nil {
		return err
	}
	left, err := l.leavePlainTail(g)
	if err != nil {
		return err
	}
	tail, cycled := l.planParts(g)
	cycled = cycled || left
	l.twBatch.Clear()
	written, next := 0, 0
	for i, e := range g.entries {
		part := uint32(0)
		if next < len(l.parts) && l.parts[next].first == i {
			part = uint32(l.parts[next].bytes)
			next++
		}
		l.frameBuf = appendFrame(l.frameBuf[:0], e.Index, e.Kind, e.Body, part)
		l.twBatch.Write(e.Index, l.frameBuf)
		written += onDiskSize(len(l.frameBuf))
	}
	if err := l.tw.WriteBatch(&l.twBatch); err != nil {
		return err
	}
	if err := fault.Inject(fault.WALWriteAfter); err != nil {
		return err
	}
	if err := fault.Inject(fault.WALSyncBefore); err != nil {
		return err
	}
	if err := l.tw.Sync(); err != nil { // timed by timedFile
		return err
	}
	if err := fault.Inject(fault.WALSyncAfter); err != nil {
		return err
	}
	if cycled {
		// A new segment file's directory entry is not durable until the
		// directory is fsynced.
		if err := fault.Inject(fault.WALDirSyncBefore); err != nil {
			return err
		}
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	l.tailBytes = tail
	l.written = g.entries[len(g.entries)-1].Index
	if l.prealloc != nil && tail >= l.prealloc.trigger {
		l.prealloc.ensure()
	}
	l.groups.Add(1)
	l.groupEntries.Observe(int64(len(g.entries)))
	l.entries.Add(uint64(len(g.entries)))
	l.bytes.Add(uint64(written))
	return nil
}
