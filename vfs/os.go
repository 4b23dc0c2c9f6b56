package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }

// Lock uses flock(2): the kernel drops it when the process dies, so a
// crashed owner never leaves a stale lock behind.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, err
	}
	return f, nil
}

// osFile is an *os.File; Fd stays reachable for writeback.
type osFile struct{ *os.File }

func (f osFile) StartWriteback(n int64) error { return startWriteback(f.File, n) }
