package wal

import (
	"errors"
	"os"
)

// ErrCrashed is the fail-stop cause recorded by Crash.
var ErrCrashed = errors.New("wal: simulated crash")

// Tear decides what survives of the tail segment after a simulated power
// loss: the file at path has size bytes, of which the first durable are
// known to be on stable storage. It may truncate anywhere at or past durable,
// or overwrite the unsynced region with zeros or garbage.
type Tear func(path string, durable, size int64) error

// DropUnsynced is the Tear that keeps exactly what was fsynced.
func DropUnsynced(path string, durable, _ int64) error { return os.Truncate(path, durable) }

// KeepUnsynced is the Tear of a write cut n bytes past what was fsynced
// (all of the unsynced tail if it is shorter).
func KeepUnsynced(n int64) Tear {
	return func(path string, durable, size int64) error {
		return os.Truncate(path, min(durable+n, size))
	}
}

// CutPoints are the cuts a torn-write test tries across n unsynced bytes:
// every stride bytes from 0, and n itself.
func CutPoints(n, stride int64) []int64 {
	var cuts []int64
	for keep := int64(0); keep < n; keep += max(stride, 1) {
		cuts = append(cuts, keep)
	}
	return append(cuts, n)
}

// Crash simulates a power loss for crash tests: the log stops as if the
// process died (queued groups are never written, the group being written
// finishes or fails as it would have), nothing is fsynced or closed, and
// then tear rewrites the tail as the disk might have kept it. The Log is
// unusable afterwards; Open the directory again to recover.
func (l *Log) Crash(tear Tear) error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closing = true
	if l.failed == nil {
		l.failed = ErrCrashed
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	<-l.writerDone
	path, durable := l.DurableTail()
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if tear == nil {
		tear = DropUnsynced
	}
	return tear(path, durable, fi.Size())
}
