// Package errorfs wraps a vfs.FS and fails chosen calls, in the style of
// pebble's vfs/errorfs: EIO on the third fsync of a segment, ENOSPC on every
// write once armed, a failed rename. Tests use it to prove that an I/O error
// at any step fail-stops the log or leaves the store as it was, and that a
// swallowed error would be caught.
//
// It is test support: nothing in a production build imports it.
package errorfs

import (
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/idemdb/idem/vfs"
)

// Op is a kind of file-system call.
type Op int

const (
	OpOpen     Op = iota // OpenFile without O_CREATE/O_TRUNC, OpenDir
	OpCreate             // OpenFile with O_CREATE or O_TRUNC
	OpRead               // Read, ReadAt, ReadDir, Stat
	OpWrite              // File.Write
	OpSync               // File.Sync of a file
	OpSyncDir            // File.Sync of a directory handle
	OpTruncate           // File.Truncate
	OpRename             // FS.Rename (path is the old name)
	OpRemove             // FS.Remove
	OpMkdir              // FS.MkdirAll
	opCount
)

var opNames = [...]string{"open", "create", "read", "write", "sync", "syncdir", "truncate", "rename", "remove", "mkdir"}

func (o Op) String() string {
	if o >= 0 && o < opCount {
		return opNames[o]
	}
	return "op?"
}

// Errors worth injecting.
var (
	EIO    error = syscall.EIO
	ENOSPC error = syscall.ENOSPC
	// EMFILE and ENFILE: out of file descriptors (process, system): no
	// I/O error, a flood (vfs.WaitFS waits them out).
	EMFILE error = syscall.EMFILE
	ENFILE error = syscall.ENFILE
)

// Rule fails calls of one kind whose path contains PathContains: the Nth
// matching call (1-based) and, if Sticky, every one after it; or, if Times
// is above 1, that many from the Nth on (a shortage that ends).
type Rule struct {
	Op           Op
	PathContains string
	Nth          int
	Sticky       bool
	Times        int
	Err          error
}

// FS is an error-injecting vfs.FS.
type FS struct {
	inner vfs.FS
	mu    sync.Mutex
	rules []*armed
	// open holds the open files: a rename renames them too, so that a
	// rule on a path still matches a handle opened under its old name (a
	// spare segment the WAL keeps open and renames).
	open map[*file]bool
}

type armed struct {
	Rule
	seen int
}

// Wrap returns an FS that passes every call to inner until a rule fires.
func Wrap(inner vfs.FS, rules ...Rule) *FS {
	f := &FS{inner: inner}
	for _, r := range rules {
		f.Add(r)
	}
	return f
}

// Add arms one more rule.
func (f *FS) Add(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Nth < 1 {
		r.Nth = 1
	}
	f.rules = append(f.rules, &armed{Rule: r})
}

// Clear disarms every rule (the disk was replaced, space was freed).
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

func (f *FS) maybe(op Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maybeLocked(op, path)
}

func (f *FS) maybeLocked(op Op, path string) error {
	for _, r := range f.rules {
		if r.Op != op || !strings.Contains(path, r.PathContains) {
			continue
		}
		r.seen++
		if r.seen == r.Nth || r.Sticky && r.seen > r.Nth || r.seen > r.Nth && r.seen < r.Nth+r.Times {
			return &fs.PathError{Op: "errorfs " + op.String(), Path: path, Err: r.Err}
		}
	}
	return nil
}

func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	op := OpOpen
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		op = OpCreate
	}
	if err := f.maybe(op, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f.track(&file{File: inner, fs: f, name: name}), nil
}

func (f *FS) OpenDir(name string) (vfs.File, error) {
	if err := f.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return f.track(&file{File: inner, fs: f, name: name, dir: true}), nil
}

func (f *FS) track(h *file) *file {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil {
		f.open = map[*file]bool{}
	}
	f.open[h] = true
	return h
}

func (f *FS) Remove(name string) error {
	if err := f.maybe(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *FS) Rename(oldname, newname string) error {
	if err := f.maybe(OpRename, oldname); err != nil {
		return err
	}
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for h := range f.open {
		if h.name == oldname {
			h.name = newname
		}
	}
	return nil
}

func (f *FS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.maybe(OpMkdir, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *FS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.maybe(OpRead, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.maybe(OpRead, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

func (f *FS) Lock(name string) (io.Closer, error) { return f.inner.Lock(name) }

type file struct {
	vfs.File
	fs   *FS
	name string // under fs.mu
	dir  bool
}

func (f *file) maybe(op Op) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fs.maybeLocked(op, f.name)
}

func (f *file) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.maybe(OpRead); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.maybe(OpRead); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// Write fails before writing anything: a write error after a partial write
// is what a full disk does, and memfs's capacity models that.
func (f *file) Write(p []byte) (int, error) {
	if err := f.maybe(OpWrite); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

// Sync fails without syncing: after a failed fsync nothing written since
// the last good one may be assumed durable.
func (f *file) Sync() error {
	op := OpSync
	if f.dir {
		op = OpSyncDir
	}
	if err := f.maybe(op); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.maybe(OpTruncate); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// StartWriteback passes through when the inner file supports it.
func (f *file) StartWriteback(n int64) error {
	if wb, ok := f.File.(vfs.Writebacker); ok {
		return wb.StartWriteback(n)
	}
	return nil
}
