// Package memfs is an in-memory vfs.FS that can crash: it keeps, apart from
// what a running process sees, what a power loss would leave behind — the
// data each file's last Sync made durable, and the directory entries each
// directory's last Sync made durable. This is the idea of pebble's
// vfs.NewCrashableMem and CrashClone.
//
//	m := memfs.New()
//	db, _ := engine.Open("/db", engine.Options{FS: m})
//	...                       // acknowledged writes
//	m.Crash()                 // power loss: every later call fails
//	db.Close()                // releases goroutines; changes nothing
//	db, _ = engine.Open("/db", engine.Options{FS: m.Recover(memfs.DropUnsynced)})
//
// A crash can also be armed to happen at the N-th mutating call (CrashAt),
// which lets a test crash at a random point of the file-system call
// sequence. A capacity (SetCapacity) makes writes fail with ENOSPC once the
// files' total size would exceed it, as a full tmpfs does.
//
// It is test support: nothing in a production build imports it.
package memfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemdb/idem/vfs"
)

// ErrCrashed is returned by every call after a crash: the process is gone.
var ErrCrashed = errors.New("memfs: crashed")

// FS is a crashable in-memory file system. It is safe for concurrent use.
type FS struct {
	mu       sync.Mutex
	root     *node
	locks    map[string]bool
	crashed  *image // set by a crash; from then on every call fails
	crashAt  int64  // mutating call that crashes (0 = none armed)
	calls    int64  // mutating calls so far
	capacity int64  // total file bytes allowed (0 = unbounded)
	used     int64
}

type node struct {
	dir  bool
	mode fs.FileMode
	// A file's current bytes and the bytes its last Sync made durable.
	// [dirtyFrom, dirtyTo) holds every byte changed since that Sync (empty
	// when dirtyFrom >= dirtyTo), so a Sync copies only what changed — a
	// preallocated WAL segment is megabytes of which a sync changes a few
	// KB. A crash can keep part of the changed bytes — a torn append, or a
	// torn overwrite — unless the file was cut below its durable size
	// since (cut): a truncation is all or nothing here.
	data, synced       []byte
	dirtyFrom, dirtyTo int
	cut                bool
	// A directory's current entries and those its last Sync made durable.
	children, durable map[string]*node
}

func newDir() *node {
	return &node{dir: true, mode: fs.ModeDir | 0o750, children: map[string]*node{}, durable: map[string]*node{}}
}

// New returns an empty file system whose root "/" exists durably.
func New() *FS { return &FS{root: newDir(), locks: map[string]bool{}} }

// SetCapacity bounds the total size of all files; a write that would pass it
// writes what fits and fails with ENOSPC. Zero removes the bound (space freed).
func (m *FS) SetCapacity(bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = bytes
}

// Used is the total size of all files still linked in a directory, or held
// open.
func (m *FS) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// CrashAt arms a crash at the n-th mutating call from now (n ≥ 1; the
// mutating calls are create, write, sync, truncate, rename, remove and
// mkdir): that call fails with ErrCrashed without taking effect, and so
// does every later call.
func (m *FS) CrashAt(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashAt = m.calls + n
}

// Crash simulates a power loss now (a no-op if already crashed).
func (m *FS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashLocked()
}

// Crashed reports whether the file system has crashed.
func (m *FS) Crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed != nil
}

func (m *FS) crashLocked() {
	if m.crashed == nil {
		m.crashed = capture(m.root)
	}
}

// mutate counts one mutating call and reports the crash if it is the armed
// one or one came before. Caller holds mu.
func (m *FS) mutate() error {
	if m.crashed != nil {
		return ErrCrashed
	}
	m.calls++
	if m.crashAt > 0 && m.calls >= m.crashAt {
		m.crashLocked()
		return ErrCrashed
	}
	return nil
}

func (m *FS) alive() error {
	if m.crashed != nil {
		return ErrCrashed
	}
	return nil
}

// walk resolves name's parent directory and base name.
func (m *FS) walk(name string) (parent *node, base string, err error) {
	clean := path.Clean(filepath.ToSlash(name))
	if !strings.HasPrefix(clean, "/") {
		return nil, "", fmt.Errorf("memfs: %s: paths must be absolute", name)
	}
	if clean == "/" {
		return nil, "/", nil
	}
	dir, base := path.Split(clean)
	n := m.root
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if part == "" {
			continue
		}
		c, ok := n.children[part]
		if !ok {
			return nil, "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !c.dir {
			return nil, "", &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return n, base, nil
}

// live resolves name on a file system that has not crashed. Caller holds mu.
func (m *FS) live(name string) (*node, error) {
	if err := m.alive(); err != nil {
		return nil, err
	}
	return m.lookup(name)
}

func (m *FS) lookup(name string) (*node, error) {
	parent, base, err := m.walk(name)
	if err != nil {
		return nil, err
	}
	if parent == nil {
		return m.root, nil
	}
	n, ok := parent.children[base]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// OpenFile implements vfs.FS.
func (m *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	writes := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0
	if writes {
		if err := m.mutate(); err != nil {
			return nil, err
		}
	} else if err := m.alive(); err != nil {
		return nil, err
	}
	parent, base, err := m.walk(name)
	if err != nil {
		return nil, err
	}
	if parent == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := parent.children[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &node{mode: perm}
		parent.children[base] = n
	}
	if flag&os.O_TRUNC != 0 {
		m.truncate(n, 0)
	}
	f := &file{m: m, n: n, name: name, read: flag&os.O_WRONLY == 0, write: flag&(os.O_WRONLY|os.O_RDWR) != 0,
		append: flag&os.O_APPEND != 0}
	return f, nil
}

// OpenDir implements vfs.FS.
func (m *FS) OpenDir(name string) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.live(name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return &file{m: m, n: n, name: name}, nil
}

// Remove implements vfs.FS.
func (m *FS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate(); err != nil {
		return err
	}
	parent, base, err := m.walk(name)
	if err != nil {
		return err
	}
	if parent == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	}
	n, ok := parent.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(parent.children, base)
	// Space is given back at once, as if no one held the file open; the
	// engine never reads a file it removed.
	m.used -= int64(len(n.data))
	return nil
}

// Rename implements vfs.FS: an atomic replace of newname.
func (m *FS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate(); err != nil {
		return err
	}
	op, ob, err := m.walk(oldname)
	if err != nil {
		return err
	}
	np, nb, err := m.walk(newname)
	if err != nil {
		return err
	}
	if op == nil || np == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: syscall.EBUSY}
	}
	n, ok := op.children[ob]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if old, ok := np.children[nb]; ok && old != n {
		if old.dir {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
		}
		m.used -= int64(len(old.data))
	}
	delete(op.children, ob)
	np.children[nb] = n
	return nil
}

// MkdirAll implements vfs.FS.
func (m *FS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate(); err != nil {
		return err
	}
	clean := path.Clean(filepath.ToSlash(dir))
	if !strings.HasPrefix(clean, "/") {
		return fmt.Errorf("memfs: %s: paths must be absolute", dir)
	}
	n := m.root
	for _, part := range strings.Split(strings.Trim(clean, "/"), "/") {
		if part == "" {
			continue
		}
		c, ok := n.children[part]
		if !ok {
			c = newDir()
			n.children[part] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

// ReadDir implements vfs.FS.
func (m *FS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.live(dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for name, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(info(name, c)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements vfs.FS.
func (m *FS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.live(name)
	if err != nil {
		return nil, err
	}
	return info(path.Base(name), n), nil
}

// Lock implements vfs.FS. The lock lives in this FS value only: the file
// system Recover returns starts with none held, as a rebooted machine does.
func (m *FS) Lock(name string) (io.Closer, error) {
	f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	f.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[name] {
		return nil, vfs.ErrLocked
	}
	m.locks[name] = true
	return unlocker{m, name}, nil
}

type unlocker struct {
	m    *FS
	name string
}

func (u unlocker) Close() error {
	u.m.mu.Lock()
	defer u.m.mu.Unlock()
	delete(u.m.locks, u.name)
	return nil
}

// truncate sets n's size, accounting space. Caller holds mu.
func (m *FS) truncate(n *node, size int) {
	if size < len(n.synced) {
		n.cut = true
	}
	m.used += int64(size - len(n.data))
	if size <= len(n.data) {
		n.data = n.data[:size]
		n.dirtyFrom, n.dirtyTo = min(n.dirtyFrom, size), min(n.dirtyTo, size)
		return
	}
	n.dirtyFrom, n.dirtyTo = min(n.dirtyFrom, len(n.data)), size
	n.data = append(n.data, make([]byte, size-len(n.data))...)
}

// writeAt writes p at off, as much as the capacity allows. Caller holds mu.
func (m *FS) writeAt(n *node, p []byte, off int) (int, error) {
	var err error
	if grow := int64(off + len(p) - len(n.data)); grow > 0 && m.capacity > 0 && m.used+grow > m.capacity {
		fit := max(int64(len(n.data)-off)+m.capacity-m.used, 0)
		p, err = p[:min(fit, int64(len(p)))], syscall.ENOSPC
	}
	if len(p) == 0 {
		return 0, err
	}
	if end := off + len(p); end > len(n.data) {
		m.truncate(n, end)
	}
	copy(n.data[off:], p)
	n.dirtyFrom, n.dirtyTo = min(n.dirtyFrom, off), max(n.dirtyTo, off+len(p))
	return len(p), err
}

// sync makes n's data durable, copying only what changed.
func (n *node) sync() {
	if n.dir {
		n.durable = make(map[string]*node, len(n.children))
		for k, v := range n.children {
			n.durable[k] = v
		}
		return
	}
	// What lies past the old durable size is copied with the growth; only
	// the changes before it need copying over.
	old := min(len(n.synced), len(n.data))
	n.synced = append(n.synced[:old], n.data[old:]...)
	if lo, hi := n.dirtyFrom, min(n.dirtyTo, old); lo < hi {
		copy(n.synced[lo:hi], n.data[lo:hi])
	}
	n.dirtyFrom, n.dirtyTo = len(n.data), 0
	n.cut = false
}

type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func info(name string, n *node) fileInfo {
	return fileInfo{name: name, size: int64(len(n.data)), mode: n.mode}
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }
