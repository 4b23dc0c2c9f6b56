package wal

import (
	"io/fs"

	"github.com/idemdb/idem/internal/tidwall"

	"github.com/idemdb/idem/vfs"
)

// twFS hands tidwall/wal the log's vfs.FS (tidwall's FS is patched in,
// see internal/tidwall/PATCH.md): every byte the log writes, and
// every fsync, goes through the same seam as our own reads and repairs.
type twFS struct {
	fs     vfs.FS
	fsyncs *Histogram // every fsync of a segment file (see timedFile)
}

func (t twFS) MkdirAll(path string, perm fs.FileMode) error { return t.fs.MkdirAll(path, perm) }
func (t twFS) ReadDir(name string) ([]fs.DirEntry, error)   { return t.fs.ReadDir(name) }
func (t twFS) Remove(name string) error                     { return t.fs.Remove(name) }
func (t twFS) Rename(oldpath, newpath string) error         { return t.fs.Rename(oldpath, newpath) }
func (t twFS) OpenFile(name string, flag int, perm fs.FileMode) (tidwall.File, error) {
	f, err := t.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{File: f, fsyncs: t.fsyncs}, nil
}
