package memfs

import (
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// file is an open handle. Like a POSIX descriptor it refers to the node,
// not the name: it keeps working after a rename or removal.
type file struct {
	m                   *FS
	n                   *node
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
}

func (f *file) check(write bool) error {
	if f.closed {
		return os.ErrClosed
	}
	if f.n.dir {
		return syscall.EISDIR
	}
	if write && !f.write || !write && !f.read {
		return syscall.EBADF
	}
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.readAt(p, 0, true)
	if err == io.EOF && n > 0 {
		err = nil // Read reports EOF only when nothing is left
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	return f.readAt(p, off, false)
}

// readAt reads at off, or at and past the file position if atPos.
func (f *file) readAt(p []byte, off int64, atPos bool) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.alive(); err != nil {
		return 0, err
	}
	if err := f.check(false); err != nil {
		return 0, err
	}
	if atPos {
		off = f.pos
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if atPos {
		f.pos += int64(n)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.mutate(); err != nil {
		return 0, err
	}
	if err := f.check(true); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = int64(len(f.n.data))
	}
	n, err := f.m.writeAt(f.n, p, int(f.pos))
	f.pos += int64(n)
	if err != nil {
		return n, &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	return n, nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.alive(); err != nil {
		return 0, err
	}
	if f.closed {
		return 0, os.ErrClosed
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.n.data))
	default:
		return 0, syscall.EINVAL
	}
	if offset < 0 {
		return 0, syscall.EINVAL
	}
	f.pos = offset
	return offset, nil
}

// Sync makes the file's data — or, for a directory, its entries — durable.
func (f *file) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.mutate(); err != nil {
		return err
	}
	if f.closed {
		return os.ErrClosed
	}
	f.n.sync()
	return nil
}

func (f *file) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.mutate(); err != nil {
		return err
	}
	if err := f.check(true); err != nil {
		return err
	}
	if grow := size - int64(len(f.n.data)); grow > 0 && f.m.capacity > 0 && f.m.used+grow > f.m.capacity {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.ENOSPC}
	}
	f.m.truncate(f.n, int(size))
	return nil
}

func (f *file) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.m.alive(); err != nil {
		return nil, err
	}
	return info(path.Base(f.name), f.n), nil
}

// Close never fails after a crash: a dead process's descriptors are gone
// without anyone asking.
func (f *file) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}
