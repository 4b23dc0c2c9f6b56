package vfs_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/vfs/memfs"
)

// shortFS fails OpenFile with err, fails times, then passes it through
// (fails < 0: for ever). It counts the calls.
type shortFS struct {
	vfs.FS
	err   error
	mu    sync.Mutex
	fails int
	calls int
}

func (s *shortFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	s.mu.Lock()
	s.calls++
	fail := s.fails != 0
	if s.fails > 0 {
		s.fails--
	}
	s.mu.Unlock()
	if fail {
		return nil, &fs.PathError{Op: "open", Path: name, Err: s.err}
	}
	return s.FS.OpenFile(name, flag, perm)
}

func (s *shortFS) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// logRecords keeps what was logged.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) levels() []slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Level
	for _, r := range l.recs {
		out = append(out, r.Level)
	}
	return out
}

func newShort(err error, fails int) (*shortFS, *vfs.WaitFS, *logRecords) {
	inner := memfs.New()
	if err := inner.MkdirAll("/d", 0o750); err != nil {
		panic(err)
	}
	s := &shortFS{FS: inner, err: err, fails: fails}
	logs := &logRecords{}
	return s, vfs.NewWaitFS(s, slog.New(logs)), logs
}

const create = os.O_CREATE | os.O_RDWR

// A shortage of descriptors is waited out with doubling pauses, counted
// once, and logged once when it starts (Warn) and once when it ends (Info).
func TestWaitFS_WaitsOutAShortage(t *testing.T) {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE} {
		t.Run(e.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, w, logs := newShort(e, 5)
				w.Begin()
				start := time.Now()
				f, err := w.OpenFile("/d/f", create, 0o640)
				if err != nil {
					t.Fatalf("open after 5 shortages: %v, want it to wait them out", err)
				}
				f.Close()
				// 1+2+4+8+16 ms of backoff.
				if got, want := time.Since(start), 31*time.Millisecond; got != want {
					t.Errorf("waited %v, want %v (doubling from 1 ms)", got, want)
				}
				if s.callCount() != 6 || w.Waits() != 1 || w.Waiting() != 0 {
					t.Errorf("calls %d waits %d waiting %d, want 6, 1, 0", s.callCount(), w.Waits(), w.Waiting())
				}
				if got := logs.levels(); len(got) != 2 || got[0] != slog.LevelWarn || got[1] != slog.LevelInfo {
					t.Errorf("logged %v, want one Warn then one Info", got)
				}
			})
		})
	}
}

// The pauses stop doubling at their cap: a long flood costs about one
// retry a second, and its end is seen within a second.
func TestWaitFS_BackoffIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, w, _ := newShort(syscall.EMFILE, -1)
		w.Begin()
		done := make(chan error)
		go func() {
			_, err := w.OpenFile("/d/f", create, 0o640)
			done <- err
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		// 1+2+...+512 ms ≈ 1 s in 10 pauses, then one a second.
		if n := s.callCount(); n < 1+10+55 || n > 1+10+60 {
			t.Errorf("%d calls in a minute, want about 70 (backoff capped at 1 s)", n)
		}
		w.Stop()
		if err := <-done; !errors.Is(err, syscall.EMFILE) {
			t.Errorf("stopped wait: %v, want EMFILE", err)
		}
	})
}

// Any other error goes up at once, as without the wrapper.
func TestWaitFS_OtherErrorsAreNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, w, logs := newShort(syscall.EIO, 1)
		w.Begin()
		start := time.Now()
		if _, err := w.OpenFile("/d/f", create, 0o640); !errors.Is(err, syscall.EIO) {
			t.Fatalf("open: %v, want EIO", err)
		}
		if time.Since(start) != 0 || s.callCount() != 1 || w.Waits() != 0 || len(logs.levels()) != 0 {
			t.Errorf("EIO was retried or logged: %d calls, %d waits, %v logged", s.callCount(), w.Waits(), logs.levels())
		}
	})
}

// Stop ends a wait under way with the shortage error, and after it (as
// before Begin) a shortage goes up at once: a Close never hangs on one.
func TestWaitFS_StopEndsAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, w, _ := newShort(syscall.EMFILE, -1)
		if _, err := w.OpenFile("/d/f", create, 0o640); !errors.Is(err, syscall.EMFILE) || s.callCount() != 1 {
			t.Fatalf("before Begin: %v after %d calls, want EMFILE at once", err, s.callCount())
		}
		w.Begin()
		done := make(chan error)
		go func() {
			_, err := w.OpenFile("/d/f", create, 0o640)
			done <- err
		}()
		synctest.Wait()
		if w.Waiting() != 1 {
			t.Fatalf("waiting %d, want 1", w.Waiting())
		}
		w.Stop()
		if err := <-done; !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("stopped wait: %v, want EMFILE", err)
		}
		before := s.callCount()
		if _, err := w.OpenFile("/d/f", create, 0o640); !errors.Is(err, syscall.EMFILE) || s.callCount() != before+1 {
			t.Fatalf("after Stop: %v, want EMFILE at once", err)
		}
		w.Stop() // twice is fine
	})
}
