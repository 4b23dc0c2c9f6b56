package vfs

// mapper is implemented by file systems whose files can be mapped into
// memory: the page cache's pages then serve as the file's image, where a
// read would copy them into fresh memory (on this project's VM, fresh
// memory is the dearest part of an open: docs/engine.md, "What an open's
// time is made of").
type mapper interface {
	mapReadOnly(name string) ([]byte, error)
}

// MapFile maps the whole of name read-only into memory where fsys can (a
// mapper; a WaitFS passes its own FS's) and says whether it did; false
// with a nil error means the caller reads the file instead (another file
// system, an empty file). The mapping is never unmapped: what it holds
// stays valid for the process's life, as the engine's contract for the
// bytes it hands out asks, and a file deleted meanwhile keeps its disk
// space until then. A file truncated under a mapping faults the process
// (SIGBUS) when a page past its new end is read: only files that never
// change may be mapped.
func MapFile(fsys FS, name string) ([]byte, bool, error) {
	if w, ok := fsys.(*WaitFS); ok {
		fsys = w.FS
	}
	m, ok := fsys.(mapper)
	if !ok {
		return nil, false, nil
	}
	b, err := m.mapReadOnly(name)
	if err != nil || b == nil {
		return nil, false, err
	}
	return b, true, nil
}
