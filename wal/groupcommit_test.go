package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// Group commit (writer.go, Log.EnqueueAll): appends that queue while an
// fsync is under way share the next one, and the handoff between whoever
// writes a group (an appender on an idle log, or the writer goroutine) and
// the appends arriving as it finishes neither loses an append nor releases
// one before an fsync covered it.
//
// The tests hold fsyncs in the file-system seam (syncGate) to put appends
// exactly where they want them, so what they assert does not depend on
// scheduling: nothing here waits for time to pass.

// syncGate is a vfs.FS over a memfs that can hold every fsync of a segment
// file until the test releases it, and that tracks what fsyncs made
// durable: the highest index whose bytes a successful segment fsync covered.
type syncGate struct {
	vfs.FS
	mu      sync.Mutex
	holding bool          // hold each segment fsync until released
	held    chan heldSync // a held fsync announces itself here
	opened  chan struct{} // closed at the test's end: nothing is held any more
	durable atomic.Uint64 // highest index made durable by a segment fsync
	syncs   atomic.Uint64 // successful fsyncs of segments holding entries
}

// heldSync is a segment fsync waiting in the gate.
type heldSync struct {
	last    uint64        // the last index written to the segment (what the fsync will cover)
	release chan struct{} // close to let the fsync go on
}

func newSyncGate(inner vfs.FS) *syncGate {
	return &syncGate{FS: inner, held: make(chan heldSync), opened: make(chan struct{})}
}

// hold makes every later segment fsync wait for the test (on) or pass (off).
func (g *syncGate) hold(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holding = on
}

// next returns the fsync that is held now, failing the test if none comes.
func (g *syncGate) next(t *testing.T) heldSync {
	t.Helper()
	select {
	case h := <-g.held:
		return h
	case <-time.After(testsupport.Patience):
		t.Fatal("no segment fsync reached the gate")
		return heldSync{}
	}
}

// checkAcked fails the test if index was acknowledged before an fsync made
// it durable. It may be called from any goroutine.
func (g *syncGate) checkAcked(t *testing.T, index uint64) {
	if d := g.durable.Load(); index > d {
		t.Errorf("entry %d was acknowledged while fsyncs had made only entries up to %d durable", index, d)
	}
}

func (g *syncGate) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(name)
	first, perr := strconv.ParseUint(base, 10, 64)
	if len(base) != segmentNameLen || perr != nil {
		return f, nil // the close marker, a damage file: not gated
	}
	return &gatedFile{File: f, g: g, name: name, first: first}, nil
}

// gatedFile is a segment file opened through a syncGate.
type gatedFile struct {
	vfs.File
	g     *syncGate
	name  string
	first uint64 // index of the segment's first entry
}

func (f *gatedFile) Sync() error {
	// Nothing writes to the log while tidwall fsyncs (the writer holds
	// ioMu), so what the file holds now is what this fsync makes durable.
	last := f.lastWritten()
	f.g.mu.Lock()
	holding := f.g.holding
	f.g.mu.Unlock()
	if holding {
		h := heldSync{last: last, release: make(chan struct{})}
		select {
		case f.g.held <- h:
			select {
			case <-h.release:
			case <-f.g.opened:
			}
		case <-f.g.opened:
		}
	}
	err := f.File.Sync()
	if err == nil && last > 0 {
		f.g.syncs.Add(1)
		for {
			d := f.g.durable.Load()
			if last <= d || f.g.durable.CompareAndSwap(d, last) {
				break
			}
		}
	}
	return err
}

// lastWritten is the index of the last whole entry in the file (0 if it
// cannot be read, as after a crash).
func (f *gatedFile) lastWritten() uint64 {
	data, err := vfs.ReadFile(f.g.FS, f.name)
	if err != nil {
		return 0
	}
	r, err := scanSegment(data, f.first, nil)
	if err != nil || r.entries == 0 {
		return 0
	}
	return f.first + r.entries - 1
}

// gatedLog is a log on a memfs disk behind a syncGate.
type gatedLog struct {
	*Log
	disk *memDisk
	gate *syncGate
}

func openGated(t *testing.T, opts Options) *gatedLog {
	t.Helper()
	d := newMemDisk()
	g := newSyncGate(d.fs)
	opts.FS = g
	l, _, err := Open(memDir, quiet(opts))
	if err != nil {
		t.Fatal(err)
	}
	// One cleanup, gate first: a test that stops early must not leave the
	// writer held in the gate while Close waits for it.
	t.Cleanup(func() {
		close(g.opened)
		l.Close()
	})
	return &gatedLog{Log: l, disk: d, gate: g}
}

// crash cuts the power (the fsync held now, if any, then fails) and
// returns the crashed file system: its Recover(tear) is what a restart
// finds.
func (gl *gatedLog) crash() *memfs.FS {
	crashed := gl.disk.fs
	crashed.Crash()
	return crashed
}

// pending is one append whose Wait runs on its own goroutine.
type pending struct {
	index uint64
	done  chan error
}

// enqueue appends b from the test's goroutine (Reserve and Enqueue never
// block here) and waits for it on another.
func (gl *gatedLog) enqueue(t *testing.T, b []byte) *pending {
	t.Helper()
	ctx := context.Background()
	if err := gl.Reserve(ctx); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	idx, c, err := gl.Enqueue(KindBatch, b, nil)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	p := &pending{index: idx, done: make(chan error, 1)}
	go func() {
		err := c.Wait(ctx)
		if err == nil {
			gl.gate.checkAcked(t, idx)
		}
		p.done <- err
	}()
	return p
}

// notYet fails the test if p was answered.
func (p *pending) notYet(t *testing.T, while string) {
	t.Helper()
	select {
	case err := <-p.done:
		t.Fatalf("entry %d was answered (%v) %s", p.index, err, while)
	default:
	}
}

// result waits for p's answer.
func (p *pending) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // later calls see it too
		return err
	case <-time.After(testsupport.Patience):
		t.Fatalf("entry %d was never answered", p.index)
		return nil
	}
}

func (p *pending) acked(t *testing.T) {
	t.Helper()
	if err := p.result(t); err != nil {
		t.Fatalf("entry %d: %v", p.index, err)
	}
}

// handoffState is what the log's handoff flags say now.
func (l *Log) handoffState() (queuedGroups int, writerBusy, selfWriting bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue), l.writerBusy, l.selfWriting
}

// TestGroupCommit_AppendsQueuedBehindAnFsyncShareTheNext: 64 appenders
// enqueue 10 appends each while the first append's fsync is held; once it
// is released, those 640 appends take one fsync per GroupEntriesMax of
// them, not one each — and every one is durable when it is acknowledged
// and after a crash.
func TestGroupCommit_AppendsQueuedBehindAnFsyncShareTheNext(t *testing.T) {
	const (
		appenders = 64
		each      = 10
		appends   = appenders * each
	)
	// 0 is the default, 1024: one group takes them all. 64 divides them
	// into exactly 10 full groups (an off-by-one in the bound shows).
	for _, groupMax := range []int{0, 64} {
		t.Run(fmt.Sprintf("GroupEntriesMax=%d", groupMax), func(t *testing.T) {
			gl := openGated(t, Options{GroupEntriesMax: groupMax})
			perGroup := gl.opts.GroupEntriesMax
			before, syncsBefore := gl.Stats(), gl.gate.syncs.Load()
			gl.gate.hold(true)
			// The log is idle: the first appender writes its own group and
			// its fsync is held.
			first := gl.enqueue(t, []byte("first"))
			h := gl.gate.next(t)
			if h.last != first.index {
				t.Fatalf("the held fsync covers up to %d, want %d", h.last, first.index)
			}
			var (
				mu       sync.Mutex
				bodies   = map[uint64]string{first.index: "first"}
				enqueued sync.WaitGroup
				done     sync.WaitGroup
			)
			enqueued.Add(appenders)
			done.Add(appenders)
			for a := range appenders {
				go func() {
					defer done.Done()
					ctx := context.Background()
					var commits []Commit
					var idxs []uint64
					for i := range each {
						b := fmt.Sprintf("appender-%02d-%d", a, i)
						if err := gl.Reserve(ctx); err != nil {
							t.Errorf("reserve: %v", err)
							break
						}
						idx, c, err := gl.Enqueue(KindBatch, []byte(b), nil)
						if err != nil {
							t.Errorf("enqueue: %v", err)
							break
						}
						mu.Lock()
						bodies[idx] = b
						mu.Unlock()
						commits, idxs = append(commits, c), append(idxs, idx)
					}
					enqueued.Done()
					for i, c := range commits {
						if err := c.Wait(ctx); err != nil {
							t.Errorf("append %d: %v", idxs[i], err)
							continue
						}
						gl.gate.checkAcked(t, idxs[i])
					}
				}()
			}
			enqueued.Wait()
			first.notYet(t, "while its fsync was held")
			gl.gate.hold(false)
			close(h.release)
			first.acked(t)
			done.Wait()
			if t.Failed() {
				return
			}

			after := gl.Stats()
			groups := after.Groups - before.Groups
			fsyncs := after.Fsyncs - before.Fsyncs
			want := uint64(1 + (appends+perGroup-1)/perGroup) // the first, then full groups
			if groups != want || fsyncs != want || gl.gate.syncs.Load()-syncsBefore != want {
				t.Fatalf("%d appends queued behind one fsync took %d groups, %d fsyncs (the file system saw %d); want %d of each",
					appends, groups, fsyncs, gl.gate.syncs.Load()-syncsBefore, want)
			}
			if fsyncs >= appends/2 {
				t.Fatalf("%d fsyncs for %d appends: group commit shares nothing", fsyncs, appends+1)
			}
			if n := after.Entries - before.Entries; n != appends+1 {
				t.Fatalf("%d entries made durable, want %d", n, appends+1)
			}

			// Every acknowledged append survives a crash that keeps only
			// what was fsynced.
			recovered := gl.crash().Recover(memfs.DropUnsynced)
			got := replayFS(t, recovered)
			if len(got) != len(bodies) {
				t.Fatalf("replayed %d entries after the crash, want the %d acknowledged", len(got), len(bodies))
			}
			for idx, b := range bodies {
				if got[idx-1] != b {
					t.Fatalf("entry %d = %q after the crash, want %q", idx, got[idx-1], b)
				}
			}
		})
	}
}

// durableWatch is an OnDurable that checks it sees every entry once, in
// index order, never from two goroutines at once, and that can hold the
// goroutine calling it until the test releases it.
type durableWatch struct {
	t       *testing.T
	mu      sync.Mutex
	next    uint64 // the index the next call must start at
	inside  int
	holding bool
	held    chan heldDurable
	opened  chan struct{}
}

type heldDurable struct {
	first   uint64
	n       int
	release chan struct{}
}

// newDurableWatch returns a watch for a new log; once the log is open,
// t.Cleanup(w.open) must follow, so that a test that stops early does not
// leave the log's goroutines held in OnDurable while Close waits for them.
func newDurableWatch(t *testing.T) *durableWatch {
	return &durableWatch{t: t, next: 1, held: make(chan heldDurable), opened: make(chan struct{})}
}

func (w *durableWatch) open() { close(w.opened) }

func (w *durableWatch) onDurable(entries []Entry) {
	w.mu.Lock()
	w.inside++
	if w.inside > 1 {
		w.t.Errorf("OnDurable for entries from %d ran while another call was running", entries[0].Index)
	}
	for _, e := range entries {
		if e.Index != w.next {
			w.t.Errorf("OnDurable saw entry %d, want %d", e.Index, w.next)
		}
		w.next = e.Index + 1
	}
	holding := w.holding
	w.mu.Unlock()
	if holding {
		h := heldDurable{first: entries[0].Index, n: len(entries), release: make(chan struct{})}
		select {
		case w.held <- h:
			select {
			case <-h.release:
			case <-w.opened:
			}
		case <-w.opened:
		}
	}
	w.mu.Lock()
	w.inside--
	w.mu.Unlock()
}

// calls is how many OnDurable calls are running now.
func (w *durableWatch) calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inside
}

func (w *durableWatch) hold(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding = on
}

func (w *durableWatch) nextHeld(t *testing.T) heldDurable {
	t.Helper()
	select {
	case h := <-w.held:
		return h
	case <-time.After(testsupport.Patience):
		t.Fatal("OnDurable was never called")
		return heldDurable{}
	}
}

// TestGroupCommit_AppendsArrivingAsAGroupFinishesAreNeitherLostNorEarly
// walks the handoffs between whoever writes a group and the appends that
// arrive as it finishes — log.go's idle test in EnqueueAll and writer.go's
// choice between publishing a lone group inline and handing it to the
// publisher — holding fsyncs in the gate and OnDurable calls in a watch:
//
//  1. appends behind a self-writing appender's held fsync;
//  2. appends behind the writer goroutine's held fsync;
//  3. a lone group finished while the publisher is still busy (held in
//     OnDurable): it must go to the publisher, after the group before it;
//  4. an append while the publisher, not the writer, is busy;
//  5. an append while the writer publishes a lone group inline (held in
//     OnDurable, before it clears writerBusy).
//
// Each waits in the queue, none is answered before an fsync covered it
// and its OnDurable ran, the writer picks each up, and OnDurable sees
// every entry once, in order, one call at a time. Then the power fails
// during an fsync with another append queued: neither is acknowledged,
// and a restart finds every acknowledged entry, whatever the crash kept of
// the rest.
func TestGroupCommit_AppendsArrivingAsAGroupFinishesAreNeitherLostNorEarly(t *testing.T) {
	watch := newDurableWatch(t)
	gl := openGated(t, Options{OnDurable: watch.onDurable})
	t.Cleanup(watch.open)
	gl.gate.hold(true)
	next := func() []byte { return body(gl.NextIndex()) }
	wantFsync := func(last uint64, who string) heldSync {
		t.Helper()
		h := gl.gate.next(t)
		if h.last != last {
			t.Fatalf("%s: the held fsync covers up to %d, want %d", who, h.last, last)
		}
		return h
	}
	wantDurable := func(first uint64, n int, who string) heldDurable {
		t.Helper()
		hd := watch.nextHeld(t)
		if hd.first != first || hd.n != n {
			t.Fatalf("%s: OnDurable held at entries %d+%d, want %d+%d", who, hd.first, hd.n, first, n)
		}
		return hd
	}
	wantState := func(queued int, busy, self bool, when string) {
		t.Helper()
		if q, b, s := gl.handoffState(); q != queued || b != busy || s != self {
			t.Fatalf("%s: %d queued groups, writerBusy %v, selfWriting %v; want %d, %v, %v", when, q, b, s, queued, busy, self)
		}
	}
	notYet := func(while string, ps ...*pending) {
		t.Helper()
		for _, p := range ps {
			p.notYet(t, while)
		}
	}

	// 1. An idle log: the appender writes entry 1 itself. Entries 2 and 3
	// arrive during its fsync and queue as one group for the writer.
	p1 := gl.enqueue(t, next())
	h := wantFsync(1, "the self-written entry 1")
	p2, p3 := gl.enqueue(t, next()), gl.enqueue(t, next())
	wantState(1, false, true, "during a self-written fsync")
	notYet("while the fsync of entry 1 was held", p1, p2, p3)
	close(h.release)
	p1.acked(t)

	// 2. The writer goroutine takes {2, 3}; entry 4 arrives during its
	// fsync and queues behind it.
	h = wantFsync(3, "the writer's group 2-3")
	p4 := gl.enqueue(t, next())
	wantState(1, true, false, "during the writer's fsync")
	notYet("while the fsync of entries 2-3 was held", p2, p3, p4)

	// 3. {2, 3} goes to the publisher, held in OnDurable; the writer
	// writes {4} alone and finishes it with nothing queued behind: with
	// the publisher busy it must hand {4} on, not publish it inline.
	watch.hold(true)
	close(h.release)
	hd := wantDurable(2, 2, "the publisher")
	h = wantFsync(4, "the writer's lone entry 4")
	close(h.release)
	// The writer hands {4} to the publisher (a second group in its hands)
	// or, wrongly, publishes it inline while the publisher is in OnDurable
	// (which the watch reports).
	testsupport.Poll(t, "the writer to hand entry 4 to the publisher", testsupport.Patience, func() bool {
		return gl.publishing.Load() == 2 || watch.calls() > 1
	})
	if watch.calls() > 1 {
		t.Fatal("the writer published entry 4 inline while the publisher was still in OnDurable of entries 2-3")
	}
	notYet("while OnDurable of entries 2-3 was held", p2, p3, p4)
	close(hd.release)
	p2.acked(t)
	p3.acked(t)
	hd = wantDurable(4, 1, "the publisher, after entries 2-3")

	// 4. The publisher is busy with {4} and the writer idle: entry 5 still
	// goes to the writer, not to its own appender.
	testsupport.Poll(t, "the writer to hand entry 4 on", testsupport.Patience, func() bool {
		q, busy, _ := gl.handoffState()
		return q == 0 && !busy
	})
	p5 := gl.enqueue(t, next())
	if _, _, self := gl.handoffState(); self {
		t.Fatal("entry 5, appended while the publisher was busy, is being written by its own appender")
	}
	h = wantFsync(5, "the writer's entry 5")
	notYet("while OnDurable of entry 4 was held", p4, p5)
	close(hd.release)
	p4.acked(t)

	// 5. With the publisher idle the writer publishes the lone {5} inline,
	// held in OnDurable while it still counts as busy: entry 6 waits in
	// the queue, and the writer goes on to it.
	testsupport.Poll(t, "the publisher to finish entry 4", testsupport.Patience, func() bool { return gl.publishing.Load() == 0 })
	close(h.release)
	hd = wantDurable(5, 1, "the writer, inline")
	p6 := gl.enqueue(t, next())
	wantState(1, true, false, "while the writer publishes inline")
	notYet("while OnDurable of entry 5 was held", p5, p6)
	watch.hold(false)
	close(hd.release)
	p5.acked(t)
	h = wantFsync(6, "the writer's entry 6, after its inline publication")
	p6.notYet(t, "while its fsync was held")
	close(h.release)
	p6.acked(t)

	// 6. The power fails during the fsync of entry 7, with entry 8 queued.
	p7 := gl.enqueue(t, next())
	h = wantFsync(7, "entry 7")
	p8 := gl.enqueue(t, next())
	crashed := gl.crash()
	gl.gate.hold(false)
	close(h.release)
	if err := p7.result(t); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("entry 7, whose fsync failed in the crash: %v, want ErrAmbiguous", err)
	}
	if err := p8.result(t); !errors.Is(err, ErrFailStopped) {
		t.Fatalf("entry 8, queued behind the failed fsync: %v, want ErrFailStopped", err)
	}
	watch.mu.Lock()
	seen := watch.next - 1
	watch.mu.Unlock()
	if seen != 6 {
		t.Fatalf("OnDurable saw entries up to %d, want exactly the six made durable", seen)
	}

	for _, tear := range []struct {
		name string
		tear memfs.Tear
	}{{"dropping what was not fsynced", memfs.DropUnsynced}, {"keeping all that was written", memfs.KeepAll}} {
		got := replayFS(t, crashed.Recover(tear.tear))
		if len(got) < 6 || len(got) > 7 {
			t.Fatalf("after a crash %s: %d entries, want the 6 acknowledged (and perhaps entry 7)", tear.name, len(got))
		}
		for i, b := range got {
			if want := string(body(uint64(i + 1))); b != want {
				t.Fatalf("after a crash %s: entry %d = %q, want %q", tear.name, i+1, b, want)
			}
		}
	}
}

// TestGroupCommit_UnderConcurrentAppendsAnAcknowledgedAppendWasFsynced:
// 16 appenders append one entry at a time while the test lets fsyncs
// through one by one, so that groups form and close in whatever order the
// scheduler picks; then the power fails during an fsync. Every
// acknowledged append was covered by a completed fsync when it was
// acknowledged, and a restart finds it.
func TestGroupCommit_UnderConcurrentAppendsAnAcknowledgedAppendWasFsynced(t *testing.T) {
	const (
		appenders = 16
		fsyncs    = 40 // let through before the crash
	)
	gl := openGated(t, Options{})
	gl.gate.hold(true)
	var (
		mu     sync.Mutex
		bodies = map[uint64]string{}
		acked  []uint64
		wg     sync.WaitGroup
	)
	wg.Add(appenders)
	for a := range appenders {
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; ; i++ {
				if err := gl.Reserve(ctx); err != nil {
					return // fail-stopped by the crash
				}
				b := fmt.Sprintf("appender-%02d-%d", a, i)
				idx, c, err := gl.Enqueue(KindBatch, []byte(b), nil)
				if err != nil {
					return
				}
				mu.Lock()
				bodies[idx] = b
				mu.Unlock()
				if err := c.Wait(ctx); err != nil {
					if !errors.Is(err, ErrAmbiguous) && !errors.Is(err, ErrFailStopped) {
						t.Errorf("append %d: %v", idx, err)
					}
					return
				}
				gl.gate.checkAcked(t, idx)
				mu.Lock()
				acked = append(acked, idx)
				mu.Unlock()
			}
		}()
	}
	last := uint64(0)
	for range fsyncs {
		h := gl.gate.next(t)
		if h.last <= last {
			t.Errorf("an fsync covers up to %d after one that covered up to %d", h.last, last)
		}
		last = h.last
		close(h.release)
	}
	h := gl.gate.next(t)
	crashed := gl.crash()
	gl.gate.hold(false)
	close(h.release)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) < fsyncs {
		t.Fatalf("%d appends acknowledged after %d fsyncs, want at least one each", len(acked), fsyncs)
	}
	got := replayFS(t, crashed.Recover(memfs.DropUnsynced))
	for _, idx := range acked {
		if idx > uint64(len(got)) {
			t.Fatalf("acknowledged entry %d is gone after the crash (%d entries recovered)", idx, len(got))
		}
		if got[idx-1] != bodies[idx] {
			t.Fatalf("entry %d = %q after the crash, want %q", idx, got[idx-1], bodies[idx])
		}
	}
	t.Logf("%d appends acknowledged in %d fsyncs; %d recovered", len(acked), fsyncs, len(got))
}

// replayFS opens the log on fsys and returns every entry's body, entry i at
// [i-1].
func replayFS(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	l, _, err := Open(memDir, quiet(Options{FS: fsys}))
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	defer l.Close()
	var out []string
	if err := l.Replay(1, func(index uint64, _ Kind, b []byte) error {
		if want := uint64(len(out) + 1); index != want {
			return fmt.Errorf("replayed index %d, want %d", index, want)
		}
		out = append(out, string(b))
		return nil
	}); err != nil {
		t.Fatalf("replay after the crash: %v", err)
	}
	return out
}
