// Package wal is Idem's write-ahead log: CRC-framed entries stored in
// github.com/tidwall/wal segments, written by one goroutine that gathers
// concurrent appends into one WriteBatch and one fsync (group commit).
//
// Life of an append:
//
//	Reserve(ctx)        take one of QueueEntriesMax slots (may block)
//	Enqueue(...)        assign the next index, join the open group (never blocks)
//	Commit.Wait(ctx)    the writer wrote and fsynced the group, ran OnDurable
//	                    (on an idle log the appender does this itself)
//
// Enqueue never blocks so that a caller may hold its own lock across it and
// so keep its sequence order equal to log order, which is what the engine
// relies on for versions.
//
// After any write or fsync error the log fail-stops: the failing group's
// appenders get ErrAmbiguous, everyone after gets ErrFailStopped, and only
// Close and a new Open (which repairs the tail) make progress again. We never
// retry an fsync: after a failed fsync the kernel may have dropped the dirty
// pages, so a second fsync that succeeds proves nothing. Running out of file
// descriptors (EMFILE, ENFILE) is no such error: an open that meets it waits
// until it gets one or the log closes (vfs.WaitFS), and a segment roll on a
// spare opens nothing (prealloc.go).
package wal
