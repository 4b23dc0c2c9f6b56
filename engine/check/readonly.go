package check

import (
	"io"
	"io/fs"
	"os"

	"github.com/idemdb/idem/vfs"
)

// The file systems Dir reads a data dir through. Dir must never change
// the dir, so it never holds a handle that could: every read goes through
// readOnlyFS, which refuses each write with ErrReadOnly. The logical load
// runs the engine's own recovery, which does write (it cuts a torn tail,
// removes the close marker, moves a damaged checkpoint aside), on a
// viewFS over that: what recovery writes lands in memory, so the state it
// builds is the state a real open would build.

// writeFlags are the open flags that could change a file.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND | os.O_EXCL

func refuse(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: ErrReadOnly} }

// readOnlyFS is fsys with every write refused.
type readOnlyFS struct{ fs vfs.FS }

func (r readOnlyFS) OpenFile(name string, flag int, _ fs.FileMode) (vfs.File, error) {
	if flag&writeFlags != 0 {
		return nil, refuse("open for writing", name)
	}
	f, err := r.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{f}, nil
}

func (r readOnlyFS) OpenDir(name string) (vfs.File, error) {
	d, err := r.fs.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{d}, nil
}

func (r readOnlyFS) Remove(name string) error                  { return refuse("remove", name) }
func (r readOnlyFS) Rename(oldname, _ string) error            { return refuse("rename", oldname) }
func (r readOnlyFS) MkdirAll(dir string, _ fs.FileMode) error  { return refuse("mkdir", dir) }
func (r readOnlyFS) ReadDir(dir string) ([]fs.DirEntry, error) { return r.fs.ReadDir(dir) }
func (r readOnlyFS) Stat(name string) (fs.FileInfo, error)     { return r.fs.Stat(name) }
func (r readOnlyFS) Lock(name string) (io.Closer, error)       { return nil, refuse("lock", name) }

// readOnlyFile is a file opened for reading; its writes are refused too.
type readOnlyFile struct{ vfs.File }

func (f readOnlyFile) Write([]byte) (int, error) { return 0, refuse("write", f.name()) }
func (f readOnlyFile) Truncate(int64) error      { return refuse("truncate", f.name()) }
func (f readOnlyFile) Sync() error               { return refuse("sync", f.name()) }

func (f readOnlyFile) name() string {
	if fi, err := f.File.Stat(); err == nil {
		return fi.Name()
	}
	return "?"
}
