package vfs

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Running out of file descriptors (EMFILE: the process's limit; ENFILE: the
// system's) says nothing about the disk: it is a flood of connections, or
// of anything else that holds descriptors, and it ends when they close. An
// open that fails so is therefore retried, not reported: reported, it
// would fail-stop a store whose disk is fine (a torn segment roll cannot be
// resumed half-way, so the log stops at any error it sees). Every other
// error still goes up at once.
//
// A wait must not outlive its store: Close has to return, whatever the
// descriptors do. So a WaitFS waits only between Begin and Stop. Before
// Begin (while a store opens) a shortage fails at once: a process that
// starts with too few descriptors should hear so, not hang. After Stop (a
// store closing) it fails at once too, and every wait under way ends with
// the shortage error, which the caller treats as it always did. No fixed
// bound is needed besides: a flood may last minutes, and while the store
// is open, waiting it out is the one answer that loses nothing.

const (
	// fdWaitBackoffMin is the first pause after a shortage: a descriptor
	// freed by a closing connection is usually there at once.
	fdWaitBackoffMin = time.Millisecond
	// fdWaitBackoffMax caps the doubling: how late, at most, a wait
	// notices that the flood ended (a few retries a second cost nothing).
	fdWaitBackoffMax = time.Second
)

// isDescriptorShortage reports whether err is EMFILE or ENFILE.
func isDescriptorShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

const (
	waitIdle    int32 = iota // before Begin: a shortage goes up at once
	waitOn                   // between Begin and Stop: shortages are waited out
	waitStopped              // after Stop
)

// WaitFS is an FS whose opens wait out a shortage of descriptors (see
// above): OpenFile, OpenDir, ReadDir and Lock, the calls that take one.
type WaitFS struct {
	FS
	log   *slog.Logger
	state atomic.Int32
	stop  chan struct{} // closed by Stop

	waits atomic.Uint64 // calls that met a shortage

	mu      sync.Mutex
	waiting int       // calls waiting now
	since   time.Time // when the current episode began
	retries uint64    // retries in the current episode
}

// NewWaitFS wraps inner; its waits start with Begin.
func NewWaitFS(inner FS, log *slog.Logger) *WaitFS {
	if log == nil {
		log = slog.Default()
	}
	return &WaitFS{FS: inner, log: log, stop: make(chan struct{})}
}

// Begin makes shortages be waited out, until Stop.
func (w *WaitFS) Begin() { w.state.CompareAndSwap(waitIdle, waitOn) }

// Stop ends every wait, now and later: a shortage then goes up at once.
// It may be called more than once.
func (w *WaitFS) Stop() {
	if w.state.Swap(waitStopped) != waitStopped {
		close(w.stop)
	}
}

// Waits counts the calls that met a shortage (each counts once, however
// many times it was retried).
func (w *WaitFS) Waits() uint64 { return w.waits.Load() }

// Waiting is how many calls are waiting now.
func (w *WaitFS) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

func (w *WaitFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return waitOut(w, "open", name, func() (File, error) { return w.FS.OpenFile(name, flag, perm) })
}

func (w *WaitFS) OpenDir(name string) (File, error) {
	return waitOut(w, "opendir", name, func() (File, error) { return w.FS.OpenDir(name) })
}

func (w *WaitFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	return waitOut(w, "readdir", dir, func() ([]fs.DirEntry, error) { return w.FS.ReadDir(dir) })
}

func (w *WaitFS) Lock(name string) (io.Closer, error) {
	return waitOut(w, "lock", name, func() (io.Closer, error) { return w.FS.Lock(name) })
}

// waitOut runs call, and again with backoff for as long as it fails with a
// shortage and w waits.
func waitOut[T any](w *WaitFS, op, name string, call func() (T, error)) (T, error) {
	v, err := call()
	if err == nil || !isDescriptorShortage(err) || w.state.Load() != waitOn {
		return v, err
	}
	w.waits.Add(1)
	w.begin(op, name, err)
	defer func() { w.end(err) }()
	for pause := fdWaitBackoffMin; ; pause = min(2*pause, fdWaitBackoffMax) {
		t := time.NewTimer(pause)
		select {
		case <-w.stop:
			t.Stop()
			return v, err
		case <-t.C:
		}
		w.mu.Lock()
		w.retries++
		w.mu.Unlock()
		if v, err = call(); err == nil || !isDescriptorShortage(err) {
			return v, err
		}
	}
}

// begin logs the start of an episode (the first call waiting), once.
func (w *WaitFS) begin(op, name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting++
	if w.waiting > 1 {
		return
	}
	w.since, w.retries = time.Now(), 0
	w.log.Warn("vfs: out of file descriptors: waiting for one (logged once until they are back)",
		"op", op, "path", name, "err", err)
}

// end logs the end of an episode (the last call waiting returned), once.
func (w *WaitFS) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting--
	if w.waiting > 0 {
		return
	}
	if err == nil {
		w.log.Info("vfs: file descriptors available again", "retries", w.retries, "waited", time.Since(w.since))
		return
	}
	w.log.Warn("vfs: stopped waiting for file descriptors", "retries", w.retries, "waited", time.Since(w.since), "err", err)
}
