package vfs

import (
	"os"
	"syscall"
)

// startWriteback queues the first n bytes of f for writing to disk without
// waiting for them, after waiting for the writeback queued last time
// (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE, as pebble's
// BytesPerSync does). Dirty checkpoint data so never piles up: on ext4 a WAL
// fsync must wait for the file system's journal commit, and a commit that
// has tens of megabytes of someone else's dirty data to flush first stalls
// every appender for as long. It also paces the checkpointer to the disk.
func startWriteback(f *os.File, n int64) error {
	const (
		waitBefore = 0x1
		write      = 0x2
	)
	return syscall.SyncFileRange(int(f.Fd()), 0, n, waitBefore|write)
}
