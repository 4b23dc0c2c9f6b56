package check

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/idemdb/idem/vfs"
)

// viewFS is a copy-on-write view of lower: reads fall through to it, and
// files written, created, renamed or removed live in memory. Only what
// recovery writes is copied up — the last segment, the close marker, the
// bytes a repair keeps — so the view costs what an open costs plus about
// one segment.
type viewFS struct {
	lower vfs.FS
	mu    sync.Mutex
	files map[string]*viewData // written or copied up
	gone  map[string]bool      // removed in the view
	dirs  map[string]bool      // created in the view
}

type viewData struct {
	name string // base name
	data []byte
}

func newViewFS(lower vfs.FS) *viewFS {
	return &viewFS{lower: lower, files: map[string]*viewData{}, gone: map[string]bool{}, dirs: map[string]bool{}}
}

// inLower reports whether name exists below and is not removed in the view.
func (v *viewFS) inLower(name string) bool {
	if v.gone[name] {
		return false
	}
	_, err := v.lower.Stat(name)
	return err == nil
}

func (v *viewFS) isDir(name string) bool {
	if v.dirs[name] {
		return true
	}
	fi, err := v.lower.Stat(name)
	return err == nil && fi.IsDir() && !v.gone[name]
}

func (v *viewFS) OpenFile(name string, flag int, _ fs.FileMode) (vfs.File, error) {
	name = filepath.Clean(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	exclusive := flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0
	d, ok := v.files[name]
	switch {
	case ok && exclusive:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok:
	case !v.inLower(name):
		if flag&os.O_CREATE == 0 || !v.isDir(filepath.Dir(name)) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		d = &viewData{name: filepath.Base(name)}
		v.files[name] = d
		delete(v.gone, name)
	case flag&writeFlags == 0:
		return v.lower.OpenFile(name, os.O_RDONLY, 0)
	case exclusive:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	default:
		d = &viewData{name: filepath.Base(name)}
		if flag&os.O_TRUNC == 0 {
			data, err := vfs.ReadFile(v.lower, name)
			if err != nil {
				return nil, err
			}
			d.data = data
		}
		v.files[name] = d
	}
	if flag&os.O_TRUNC != 0 {
		d.data = d.data[:0]
	}
	return &viewFile{v: v, d: d, append: flag&os.O_APPEND != 0}, nil
}

// OpenDir returns a handle whose Sync does nothing: nothing in the view
// is ever made durable.
func (v *viewFS) OpenDir(name string) (vfs.File, error) {
	name = filepath.Clean(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.isDir(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return viewDir{name: filepath.Base(name)}, nil
}

func (v *viewFS) Remove(name string) error {
	name = filepath.Clean(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	_, inView := v.files[name]
	below := v.inLower(name)
	if !inView && !below && !v.dirs[name] {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(v.files, name)
	delete(v.dirs, name)
	if below {
		v.gone[name] = true
	}
	return nil
}

func (v *viewFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.files[oldname]
	below := v.inLower(oldname)
	if !ok {
		if !below {
			return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
		}
		data, err := vfs.ReadFile(v.lower, oldname)
		if err != nil {
			return err
		}
		d = &viewData{data: data}
	}
	d.name = filepath.Base(newname)
	v.files[newname] = d
	delete(v.gone, newname)
	delete(v.files, oldname)
	if below {
		v.gone[oldname] = true
	}
	return nil
}

func (v *viewFS) MkdirAll(dir string, _ fs.FileMode) error {
	dir = filepath.Clean(dir)
	v.mu.Lock()
	defer v.mu.Unlock()
	for d := dir; !v.isDir(d); d = filepath.Dir(d) {
		v.dirs[d] = true
		if filepath.Dir(d) == d {
			break
		}
	}
	return nil
}

// ReadDir merges the entries below with the view's, sorted by name.
func (v *viewFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	dir = filepath.Clean(dir)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.isDir(dir) {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	byName := map[string]fs.DirEntry{}
	if !v.dirs[dir] {
		ents, err := v.lower.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !v.gone[filepath.Join(dir, e.Name())] {
				byName[e.Name()] = e
			}
		}
	}
	for p, d := range v.files {
		if filepath.Dir(p) == dir {
			byName[d.name] = fs.FileInfoToDirEntry(viewInfo{name: d.name, size: int64(len(d.data))})
		}
	}
	for p := range v.dirs {
		if filepath.Dir(p) == dir && p != dir {
			byName[filepath.Base(p)] = fs.FileInfoToDirEntry(viewInfo{name: filepath.Base(p), dir: true})
		}
	}
	out := make([]fs.DirEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (v *viewFS) Stat(name string) (fs.FileInfo, error) {
	name = filepath.Clean(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch d, ok := v.files[name]; {
	case ok:
		return viewInfo{name: d.name, size: int64(len(d.data))}, nil
	case v.dirs[name]:
		return viewInfo{name: filepath.Base(name), dir: true}, nil
	case v.gone[name]:
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return v.lower.Stat(name)
}

// Lock takes nothing: Dir holds the data dir's real lock for as long as
// the view lives.
func (v *viewFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// viewFile is an open file of the view.
type viewFile struct {
	v      *viewFS
	d      *viewData
	pos    int64
	append bool
}

func (f *viewFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *viewFile) ReadAt(p []byte, off int64) (int, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if off >= int64(len(f.d.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *viewFile) Write(p []byte) (int, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if f.append {
		f.pos = int64(len(f.d.data))
	}
	if end := f.pos + int64(len(p)); end > int64(len(f.d.data)) {
		f.d.data = append(f.d.data, make([]byte, end-int64(len(f.d.data)))...)
	}
	copy(f.d.data[f.pos:], p)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *viewFile) Seek(offset int64, whence int) (int64, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.d.data))
	}
	if offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.d.name, Err: fs.ErrInvalid}
	}
	f.pos = offset
	return offset, nil
}

func (f *viewFile) Truncate(size int64) error {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if size < int64(len(f.d.data)) {
		f.d.data = f.d.data[:size]
	} else {
		f.d.data = append(f.d.data, make([]byte, size-int64(len(f.d.data)))...)
	}
	return nil
}

func (f *viewFile) Stat() (fs.FileInfo, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	return viewInfo{name: f.d.name, size: int64(len(f.d.data))}, nil
}

func (f *viewFile) Sync() error  { return nil }
func (f *viewFile) Close() error { return nil }

// viewDir is a directory handle of the view: only Sync and Stat work.
type viewDir struct{ name string }

func (d viewDir) Read([]byte) (int, error)          { return 0, d.notFile() }
func (d viewDir) ReadAt([]byte, int64) (int, error) { return 0, d.notFile() }
func (d viewDir) Write([]byte) (int, error)         { return 0, d.notFile() }
func (d viewDir) Seek(int64, int) (int64, error)    { return 0, d.notFile() }
func (d viewDir) Truncate(int64) error              { return d.notFile() }
func (d viewDir) Sync() error                       { return nil }
func (d viewDir) Close() error                      { return nil }
func (d viewDir) Stat() (fs.FileInfo, error)        { return viewInfo{name: d.name, dir: true}, nil }
func (d viewDir) notFile() error                    { return &fs.PathError{Op: "read", Path: d.name, Err: fs.ErrInvalid} }

type viewInfo struct {
	name string
	size int64
	dir  bool
}

func (i viewInfo) Name() string       { return i.name }
func (i viewInfo) Size() int64        { return i.size }
func (i viewInfo) ModTime() time.Time { return time.Time{} }
func (i viewInfo) IsDir() bool        { return i.dir }
func (i viewInfo) Sys() any           { return nil }
func (i viewInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o750
	}
	return 0o640
}
