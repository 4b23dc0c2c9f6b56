package memfs

import (
	"io"
	"sync"
)

// Disk is a file system that outlives crashes: after each, it holds what
// the crash left. Crash tests open a store on Disk.FS(), crash it, and open
// it again on the new Disk.FS().
type Disk struct {
	mu sync.Mutex
	fs *FS
}

// NewDisk returns an empty disk.
func NewDisk() *Disk { return &Disk{fs: New()} }

// FS is the file system as it is now (a new one after each crash).
func (d *Disk) FS() *FS {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fs
}

// Crash simulates a power loss under the process that stop closes (nil if
// none): the file system stops answering, stop is closed so that its
// goroutines end — nothing more reaches the disk, and its error is ignored —
// and the disk becomes what the loss left, tear deciding the fate of bytes
// appended since their file's last fsync (nil: none survive). It returns
// how many such bytes each file had.
func (d *Disk) Crash(stop io.Closer, tear Tear) (unsynced map[string]int) {
	old := d.FS()
	old.Crash()
	if stop != nil {
		stop.Close()
	}
	unsynced = old.Unsynced()
	d.mu.Lock()
	d.fs = old.Recover(tear)
	d.mu.Unlock()
	return unsynced
}
