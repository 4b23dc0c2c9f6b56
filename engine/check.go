package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Check: an offline verification of a stopped data dir, as `bbolt check`
// or `etcdutl snapshot status` are for theirs (cmd/idemctl check).
//
// It never changes the dir: every read goes through a read-only view
// (checkfs.go), and the one thing it takes is the dir's LOCK — the engine
// makes that file at its first open and never removes it, so locking it
// creates nothing, and a running server's dir is refused. Each part is
// checked on its own and every problem found is reported, not only the
// first: the log's segments, frame by frame, with the torn-tail rules of
// repair on open (checklog.go); every checkpoint file, whole
// (checkfiles.go); the chain those files make and whether the log reaches
// back to its tip (checkchain.go); then the state an open would build,
// built by the engine's own recovery on a copy-on-write view of the dir,
// counted by namespace (checkload.go). Recovery tolerates a damaged newest
// link by falling back; Check reports that fallback as damage, because the
// file checks see what recovery only steps around.

// ErrNotDataDir is returned by Check for a directory that is not an
// engine data dir (missing, not a directory, or without the LOCK file and
// wal/ directory every data dir has).
var ErrNotDataDir = errors.New("engine: not a data directory")

// CheckOptions configure Check.
type CheckOptions struct {
	// WAL are the log options the store runs with. Only GroupBytesMax
	// matters: it bounds the torn tail that repair on open may cut. Zero
	// means the default, as in Options.
	WAL wal.Options
}

// ProblemKind grades a problem.
type ProblemKind string

const (
	// ProblemDamage: bytes that were acknowledged, or files the store
	// needs, are changed or missing. Recovery refuses, or falls back.
	ProblemDamage ProblemKind = "damage"
	// ProblemTornTail: the last segment ends in a write that a crash cut
	// short — never acknowledged; the next open cuts it, losing nothing.
	ProblemTornTail ProblemKind = "torn-tail"
	// ProblemNote: worth knowing, not wrong (files kept by earlier
	// recoveries, an interrupted checkpoint, files that are not the engine's).
	ProblemNote ProblemKind = "note"
)

// OffsetUnknown is a Problem's Offset when no byte offset is known.
const OffsetUnknown = -1

// Problem is one finding of Check.
type Problem struct {
	File   string      `json:"file"`   // relative to the data dir ("" for the dir as a whole)
	Offset int64       `json:"offset"` // byte offset in File, OffsetUnknown if not known
	Kind   ProblemKind `json:"kind"`
	Detail string      `json:"detail"`
}

// CheckReport is what Check found.
type CheckReport struct {
	Dir         string           `json:"dir"`
	WAL         LogCheck         `json:"wal"`
	Checkpoints []CheckpointFile `json:"checkpoints"`
	// Chain is the checkpoint chain an open would load, as the files say;
	// nil if none (an open replays the whole log, or refuses).
	Chain *ChainCheck `json:"chain"`
	// Loaded says the logical load ran: an open accepts the dir, and the
	// counts below are the state it builds.
	Loaded     bool             `json:"loaded"`
	Recovery   RecoveryCheck    `json:"recovery"`
	Namespaces []NamespaceCount `json:"namespaces"`
	Keys       int64            `json:"keys"`
	Bytes      int64            `json:"bytes"` // keys and values
	// StrayKeys lie outside every registered namespace: nothing the engine
	// writes does, so each is damage.
	StrayKeys  int64 `json:"stray_keys"`
	StrayBytes int64 `json:"stray_bytes"`
	// ValueLog is what the loaded state keeps in the value log.
	ValueLog ValueLogCheck `json:"value_log"`
	Problems []Problem     `json:"problems"`
}

// LogCheck sums up the log.
type LogCheck struct {
	Segments   []SegmentCheck  `json:"segments"`
	Frames     uint64          `json:"frames"` // valid frames read
	Batches    uint64          `json:"batches"`
	Records    uint64          `json:"checkpoint_records"` // wal.KindCheckpoint frames
	Bytes      int64           `json:"bytes"`
	FirstIndex uint64          `json:"first_index"`
	LastIndex  uint64          `json:"last_index"`
	Marker     wal.MarkerState `json:"marker"`
}

// SegmentCheck is one segment file.
type SegmentCheck struct {
	Name   string `json:"name"`
	First  uint64 `json:"first_index"`
	Frames uint64 `json:"frames"`
	Bytes  int64  `json:"bytes"`
}

// CheckpointFile is one checkpoint file and whether it decodes whole.
type CheckpointFile struct {
	Name    string        `json:"name"`
	Kind    string        `json:"kind"`  // "part", "delta" or "legacy"
	Index   store.Version `json:"index"` // a part's generation (v0), a delta's own version
	Seq     int           `json:"seq,omitempty"`
	Base    store.Version `json:"base,omitempty"` // a delta's base generation
	Prev    store.Version `json:"prev,omitempty"` // the link a delta follows
	Last    bool          `json:"last,omitempty"` // a part that ends its generation
	Records uint64        `json:"records"`
	Bytes   int64         `json:"bytes"`
	OK      bool          `json:"ok"`
}

// ChainCheck is a checkpoint chain: a base generation and its deltas.
type ChainCheck struct {
	Base   store.Version `json:"base"`
	Deltas int           `json:"deltas"`
	Tip    store.Version `json:"tip"` // replay starts after it
	Files  []string      `json:"files"`
}

// NamespaceCount is what one namespace holds.
type NamespaceCount struct {
	Namespace store.Namespace `json:"namespace"`
	Keys      int64           `json:"keys"`
	Bytes     int64           `json:"bytes"` // keys and values
}

// Damaged reports whether any problem is damage.
func (r *CheckReport) Damaged() bool { return r.Count(ProblemDamage) > 0 }

// Count returns how many problems are of kind k.
func (r *CheckReport) Count(k ProblemKind) int {
	n := 0
	for _, p := range r.Problems {
		if p.Kind == k {
			n++
		}
	}
	return n
}

// Check verifies the stopped data dir dir on fsys (nil: vfs.Default)
// without changing it. It fails with ErrLocked if a process holds the dir
// and ErrNotDataDir if dir is not one; every problem in the dir itself is
// in the report (Damaged says whether any is damage). It reads every file
// of the dir and, for the logical load, holds the whole store in memory,
// as an open does.
func Check(fsys vfs.FS, dir string, opts CheckOptions) (rep *CheckReport, err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	// Absolute, as the log's own paths are (tidwall makes them so): the
	// view matches files by path.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	unlock, err := lockForCheck(fsys, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := unlock(); cerr != nil && err == nil {
			rep, err = nil, fmt.Errorf("engine: check %s: release the lock: %w", dir, cerr)
		}
	}()
	// Empty lists, not nil ones: a JSON report says "none" as [].
	c := &checker{fs: readOnlyFS{fsys}, dir: dir, opts: opts,
		rep: &CheckReport{Dir: dir, Checkpoints: []CheckpointFile{}, Problems: []Problem{}, WAL: LogCheck{Segments: []SegmentCheck{}}}}
	c.checkLog()
	c.checkFiles()
	c.checkChain()
	c.load()
	return c.rep, nil
}

// lockForCheck takes the dir's LOCK, as Open does, and returns its release.
// A dir without one is no data dir: locking it would create the file.
func lockForCheck(fsys vfs.FS, dir string) (func() error, error) {
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
	}{{lockFileName, false}, {walDirName, true}} {
		fi, err := fsys.Stat(filepath.Join(dir, want.name))
		if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir() != want.dir) {
			return nil, fmt.Errorf("%w: %s has no %s (every data dir has its LOCK file and wal/ directory from its first open)",
				ErrNotDataDir, dir, want.name)
		}
		if err != nil {
			return nil, err
		}
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockFileName))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s (a running process holds it: stop it, or check a copy)", ErrLocked, dir)
	}
	if err != nil {
		return nil, err
	}
	return lock.Close, nil
}

// checker carries one Check's state from step to step.
type checker struct {
	fs   vfs.FS // read-only
	dir  string
	opts CheckOptions
	rep  *CheckReport

	logRead  bool     // the log could be listed and read
	recorded []uint64 // checkpoints the log records writing, in log order
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
