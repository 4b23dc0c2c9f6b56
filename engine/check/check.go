package check

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Options configure Dir.
type Options struct {
	// WAL are the log options the store runs with. Only GroupBytesMax
	// matters: it bounds the torn tail that repair on open may cut. Zero
	// means the default, as in engine.Options.
	WAL wal.Options
}

// Dir verifies the stopped data dir dir on fsys (nil: vfs.Default)
// without changing it. It fails with engine.ErrLocked if a process holds
// the dir and ErrNotDataDir if dir is not one; every problem in the dir
// itself is in the report (Damaged says whether any is damage). It reads
// every file of the dir and, for the logical load, holds the whole store
// in memory, as an open does.
func Dir(fsys vfs.FS, dir string, opts Options) (rep *Report, err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	// Absolute, as the log's own paths are (tidwall makes them so): the
	// view matches files by path.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := unlock(); cerr != nil && err == nil {
			rep, err = nil, fmt.Errorf("check: %s: release the lock: %w", dir, cerr)
		}
	}()
	// Empty lists, not nil ones: a JSON report says "none" as [].
	c := &checker{fs: readOnlyFS{fsys}, dir: dir, opts: opts, merges: map[store.Version]bool{},
		rep: &Report{Dir: dir, Checkpoints: []CheckpointFile{}, Problems: []Problem{}, WAL: Log{Segments: []Segment{}}}}
	c.checkLog()
	c.checkFiles()
	c.checkChain()
	c.load()
	return c.rep, nil
}

// lockDir takes the dir's LOCK, as engine.Open does, and returns its
// release. A dir without one is no data dir: locking it would create the
// file.
func lockDir(fsys vfs.FS, dir string) (func() error, error) {
	switch fi, err := fsys.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist", ErrNotDataDir, dir)
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotDataDir, dir)
	}
	for _, want := range []struct {
		name string
		dir  bool
	}{{engine.LockFileName, false}, {engine.WALDirName, true}} {
		fi, err := fsys.Stat(filepath.Join(dir, want.name))
		if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir() != want.dir) {
			return nil, fmt.Errorf("%w: %s has no %s (every data dir has its LOCK file and wal/ directory from its first open)",
				ErrNotDataDir, dir, want.name)
		}
		if err != nil {
			return nil, err
		}
	}
	lock, err := fsys.Lock(filepath.Join(dir, engine.LockFileName))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s (a running process holds it: stop it, or check a copy)", engine.ErrLocked, dir)
	}
	if err != nil {
		return nil, err
	}
	return lock.Close, nil
}

// checker carries one Dir's state from step to step.
type checker struct {
	fs   vfs.FS // read-only
	dir  string
	opts Options
	rep  *Report

	logRead  bool                   // the log could be listed and read
	recorded []uint64               // checkpoints the log records writing, in log order
	merges   map[store.Version]bool // those of them recorded as merged bases
	// bad names the checkpoint files that do not decode whole; versions
	// lists every checkpoint file by the link it belongs to.
	bad      map[string]bool
	versions map[store.Version][]string
	damaged  map[store.Version]bool // links with files moved aside as .damaged
}

// problem adds a finding; path is made relative to the data dir.
func (c *checker) problem(kind ProblemKind, path string, offset int64, format string, args ...any) {
	if rel, err := filepath.Rel(c.dir, path); err == nil && filepath.IsAbs(path) {
		path = rel
	}
	if path == "." {
		path = ""
	}
	c.rep.Problems = append(c.rep.Problems, Problem{File: filepath.ToSlash(path), Offset: offset, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}
