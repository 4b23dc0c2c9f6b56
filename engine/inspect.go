package engine

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Read-only views of a stopped data dir's files, for the offline checker
// (package engine/check): what the engine names its files, what a
// checkpoint file decodes to, what a log entry's body holds, and the log
// options an open runs with. Each is the engine's own rule or decoder,
// exported narrowly so that the checker judges a file by the code that
// reads it, never by a copy of it (docs/design.md §2). None writes.

// The names of a data dir's own entries besides its checkpoint files
// (backupManifestName and restoreEpochName are the others).
const (
	LockFileName    = lockFileName // made at the first open, never removed
	WALDirName      = walDirName
	ValueLogDirName = vlogDirName
)

// FileKind is what an entry of a data dir is to the engine.
type FileKind int

const (
	// FileForeign: not the engine's; nothing reads it.
	FileForeign FileKind = iota
	// FileOwn: LOCK, BACKUP, RESTORED, wal/ or vlog/.
	FileOwn
	// FilePart, FileDelta, FileLegacy: a part of a checkpoint generation,
	// a delta, a single-file checkpoint of an earlier version.
	FilePart
	FileDelta
	FileLegacy
	// FileCheckpointTemp: a checkpoint write a crash interrupted.
	FileCheckpointTemp
	// FileCheckpointDamaged: a checkpoint file an open moved aside.
	FileCheckpointDamaged
	// FileCheckpointMisnamed: named like a checkpoint file, but not one.
	FileCheckpointMisnamed
)

// FileName is what an entry's name says.
type FileName struct {
	Kind FileKind
	// Version: a part's or legacy file's generation (v0), a delta's own
	// version, a damaged file's generation (0 if its name gives none).
	Version store.Version
	Seq     int // a part's
}

// ParseFileName says what the entry name of a data dir (isDir: a
// directory) is, by the rules recovery lists the dir with.
func ParseFileName(name string, isDir bool) FileName {
	switch {
	case name == lockFileName || name == backupManifestName || name == restoreEpochName || ((name == walDirName || name == vlogDirName) && isDir):
		return FileName{Kind: FileOwn}
	case !strings.HasPrefix(name, ckptPrefix) || isDir:
		return FileName{Kind: FileForeign}
	case strings.HasSuffix(name, damagedSuffix):
		return FileName{Kind: FileCheckpointDamaged, Version: ckptOwner(name)}
	case strings.HasSuffix(name, ckptTmpSuffix):
		return FileName{Kind: FileCheckpointTemp}
	}
	if v, ok := parseDeltaName(name); ok {
		return FileName{Kind: FileDelta, Version: v}
	}
	if v0, seq, ok := parsePartName(name); ok && strings.HasSuffix(name, ckptSuffix) {
		return FileName{Kind: FilePart, Version: v0, Seq: seq}
	}
	if v, ok := parseLegacyName(name); ok {
		return FileName{Kind: FileLegacy, Version: v}
	}
	return FileName{Kind: FileCheckpointMisnamed}
}

// parseLegacyName returns the index of a single-file checkpoint of an
// earlier version, ckpt-<index>.ckpt, as listGenerations reads it.
func parseLegacyName(name string) (store.Version, bool) {
	rest, ok := strings.CutSuffix(strings.TrimPrefix(name, ckptPrefix), ckptSuffix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 10, 64)
	return store.Version(v), err == nil
}

// CheckpointFileMeta is what a checkpoint file's header and trailer say.
type CheckpointFileMeta struct {
	Base, Prev store.Version // a delta's base generation and the link it follows
	Last       bool          // a part that ends its generation (a legacy file does)
	Records    uint64
	Bytes      int64
}

// VerifyCheckpointFile decodes the checkpoint file name (FilePart,
// FileDelta or FileLegacy) in dir whole — header, records in key order,
// trailer, counts, checksums — with the decoders an open loads it with.
// The meta holds what was read before any error.
func VerifyCheckpointFile(fsys vfs.FS, dir, name string) (CheckpointFileMeta, error) {
	var f CheckpointFileMeta
	path := filepath.Join(dir, name)
	switch ParseFileName(name, false).Kind {
	case FilePart:
		f.Bytes = fileSize(fsys, path)
		m, err := readPartMeta(fsys, dir, name)
		if err != nil {
			return f, fmt.Errorf("header or trailer: %w", err)
		}
		f.Records, f.Last = m.count, m.last
		data, err := vfs.ReadFile(fsys, path)
		if err != nil {
			return f, err
		}
		return f, decodePart(data, m, func(index.KV, []byte, store.Version, bool) {})
	case FileDelta:
		f.Bytes = fileSize(fsys, path)
		m, err := readDeltaMeta(fsys, dir, name)
		if err != nil {
			return f, fmt.Errorf("header or trailer: %w", err)
		}
		f.Base, f.Prev, f.Records = m.base, m.prev, m.count
		data, err := vfs.ReadFile(fsys, path)
		if err != nil {
			return f, err
		}
		return f, decodeDelta(data, m, nil)
	case FileLegacy:
		v, _ := parseLegacyName(name)
		f.Last = true
		data, err := vfs.ReadFile(fsys, path)
		if err != nil {
			return f, err
		}
		f.Bytes = int64(len(data))
		return f, decodePart(data, partMeta{name: name, v0: v, legacy: true}, func(index.KV, []byte, store.Version, bool) { f.Records++ })
	}
	return f, fmt.Errorf("engine: %s is not named as a checkpoint file", name)
}

func fileSize(fsys vfs.FS, path string) int64 {
	if fi, err := fsys.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// VerifyBatch decodes the body of a wal.KindBatch entry as replay does:
// an error is a batch replay refuses.
func VerifyBatch(body []byte) error { return decodeBody(body, func(store.Op) {}) }

// RecordedCheckpoint returns the checkpoint a wal.KindCheckpoint entry's
// body records writing, as recovery reads it.
func RecordedCheckpoint(body []byte) (uint64, bool) {
	n, k := binary.Uvarint(body)
	return n, k > 0
}

// RecordedMerge reports whether a wal.KindCheckpoint entry's body records
// linking a merged base (checkpoint.go's logMerge), and which.
func RecordedMerge(body []byte) (uint64, bool) { return mergeRecord(body) }

// WALOptions are the log options Open runs with under o: what torn-tail
// repair may cut depends on them (GroupBytesMax).
func (o Options) WALOptions() wal.Options { return o.withDefaults().WAL }
