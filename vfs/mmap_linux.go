package vfs

import (
	"os"
	"syscall"
)

// mapReadOnly maps name privately and read-only, its pages populated at
// once (MAP_POPULATE): the caller reads all of it, and one call that maps
// the page cache's pages costs less than a fault per page. An empty file
// maps to nil (mmap refuses a zero length).
func (osFS) mapReadOnly(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil, err
	}
	if int64(int(fi.Size())) != fi.Size() {
		return nil, nil // beyond the address space: read it, and fail there
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: name, Err: err}
	}
	return b, nil
}
