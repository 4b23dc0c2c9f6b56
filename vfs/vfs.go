// Package vfs is the file-system seam under the WAL and the checkpoints.
//
// Everything the engine makes durable goes through an FS, so that tests can
// put a file system underneath that keeps only what was fsynced (vfs/memfs,
// the idea of pebble's vfs.NewCrashableMem) or fails the N-th call
// (vfs/errorfs, after pebble's errorfs). Production uses Default, the
// operating system's.
//
// The contract is POSIX's, stated where crash safety depends on it:
//   - File.Sync makes the file's data durable, not its directory entry.
//   - A creation, rename or removal is durable only once the directory that
//     holds it is synced (OpenDir + Sync, or SyncDir).
//   - A crash keeps, of each file, what its last Sync made durable; bytes
//     written after it may survive in part, as a prefix of what was written
//     or as zero-filled blocks, never as other bytes.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idemdb/idem/internal/hugepage"
)

// File is an open file or, from OpenDir, a directory to Sync.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Seeker
	io.Closer
	// Sync makes the file's written data durable (fsync).
	Sync() error
	// Truncate changes the file's size; durable after Sync.
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
}

// FS is a file system. Names are slash-separated paths as filepath builds
// them; implementations need not support relative paths beyond what os does.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// OpenDir opens a directory so that Sync makes its entries durable.
	OpenDir(name string) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm fs.FileMode) error
	// ReadDir lists dir sorted by name.
	ReadDir(dir string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// Lock takes an exclusive lock on name (created if missing) that lasts
	// until the returned Closer is closed or the process ends. It fails with
	// ErrLocked if someone else holds it.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is returned by Lock when the lock is held elsewhere.
var ErrLocked = errors.New("vfs: locked by another process")

// Default is the operating system's file system.
var Default FS = osFS{}

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) { return ReadFileInto(fsys, name, nil) }

// ReadFileInto is ReadFile reading into buf's storage when it is large
// enough: a caller reading file after file (log replay) allocates — and
// the runtime zeroes — one buffer, not one per file. The result aliases
// buf then.
func ReadFileInto(fsys FS, name string, buf []byte) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	data := buf[:0]
	if int64(cap(buf)) < size+1 {
		// +1: io.ReadAll-style EOF probe without a regrow. A large file
		// (a log segment, 8 MiB) is read into huge pages: its first touch
		// was a fault per 4 KiB, a fifth of a replay's faults.
		data = hugepage.Make[byte](int(size) + 1)
	}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// SyncDir fsyncs a directory so that the creations, renames and removals in
// it are durable.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAllSynced creates dir and any missing parents, and syncs the parent
// of every directory it created, so that the new directories survive a
// crash (a directory's own entry lives in its parent).
func MkdirAllSynced(fsys FS, dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		if err := SyncDir(fsys, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileSynced writes name atomically and durably: data goes to
// name+".tmp", which is fsynced, renamed over name, and the directory
// fsynced. On error the temporary file is removed.
func WriteFileSynced(fsys FS, name string, data []byte, perm fs.FileMode) (err error) {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fsys.Rename(tmp, name); err != nil {
		return err
	}
	return SyncDir(fsys, filepath.Dir(name))
}

// Writebacker is implemented by files that can start the writeback of
// their dirty pages without waiting for it (sync_file_range on Linux).
type Writebacker interface {
	// StartWriteback queues the first n bytes for writing after waiting
	// for what the previous call queued.
	StartWriteback(n int64) error
}
