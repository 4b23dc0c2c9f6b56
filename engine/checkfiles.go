package engine

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// checkFiles decodes every checkpoint file whole — header, records in key
// order, trailer, counts, checksums — with the decoders an open loads them
// with, and notes the files that earlier recoveries kept and those that
// are not the engine's.
func (c *checker) checkFiles() {
	c.bad, c.versions, c.damaged = map[string]bool{}, map[store.Version][]string{}, map[store.Version]bool{}
	ents, err := c.fs.ReadDir(c.dir)
	if err != nil {
		c.problem(ProblemDamage, c.dir, OffsetUnknown, "the data dir cannot be listed: %v", err)
		return
	}
	for _, e := range ents {
		name, path := e.Name(), filepath.Join(c.dir, e.Name())
		switch {
		case name == lockFileName || name == BackupManifestName || name == RestoreEpochName || ((name == walDirName || name == vlogDirName) && e.IsDir()):
			// The value log's records are checked by the values the
			// loaded state reads back (checkload.go).
		case !strings.HasPrefix(name, ckptPrefix) || e.IsDir():
			c.problem(ProblemNote, path, OffsetUnknown, "not a file of the engine's: nothing reads it")
		case strings.HasSuffix(name, damagedSuffix):
			c.damaged[ckptOwner(name)] = true
			c.problem(ProblemNote, path, OffsetUnknown,
				"a checkpoint file an earlier open could not load and moved aside: safe to delete, and removed once a newer checkpoint supersedes it")
		case strings.HasSuffix(name, ckptTmpSuffix):
			c.problem(ProblemNote, path, OffsetUnknown, "a checkpoint write a crash interrupted (a temp file): the next open removes it")
		default:
			c.checkCkptFile(name)
		}
	}
}

// checkCkptFile checks one file named like a part, a delta or a legacy
// checkpoint.
func (c *checker) checkCkptFile(name string) {
	f := CheckpointFile{Name: name}
	var err error
	if v, ok := parseDeltaName(name); ok {
		f.Kind, f.Index = "delta", v
		err = c.checkDelta(&f)
	} else if v0, seq, ok := parsePartName(name); ok && strings.HasSuffix(name, ckptSuffix) {
		f.Kind, f.Index, f.Seq = "part", v0, seq
		err = c.checkPart(&f)
	} else if v, ok := parseLegacyName(name); ok {
		f.Kind, f.Index, f.Last = "legacy", v, true
		err = c.checkLegacy(&f)
	} else {
		c.problem(ProblemNote, filepath.Join(c.dir, name), OffsetUnknown, "named like a checkpoint file but not one: nothing reads it")
		return
	}
	f.OK = err == nil
	if err != nil {
		c.bad[name] = true
		c.problem(ProblemDamage, filepath.Join(c.dir, name), OffsetUnknown, "checkpoint %s does not decode: %v", f.Kind, err)
	}
	c.versions[f.Index] = append(c.versions[f.Index], name)
	c.rep.Checkpoints = append(c.rep.Checkpoints, f)
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

func (c *checker) size(name string) int64 {
	if fi, err := c.fs.Stat(filepath.Join(c.dir, name)); err == nil {
		return fi.Size()
	}
	return 0
}

func (c *checker) checkPart(f *CheckpointFile) error {
	f.Bytes = c.size(f.Name)
	m, err := readPartMeta(c.fs, c.dir, f.Name)
	if err != nil {
		return fmt.Errorf("header or trailer: %w", err)
	}
	f.Records, f.Last = m.count, m.last
	data, err := vfs.ReadFile(c.fs, filepath.Join(c.dir, f.Name))
	if err != nil {
		return err
	}
	return decodePart(data, m, func([]byte, []byte, store.Version, bool) {})
}

func (c *checker) checkDelta(f *CheckpointFile) error {
	f.Bytes = c.size(f.Name)
	m, err := readDeltaMeta(c.fs, c.dir, f.Name)
	if err != nil {
		return fmt.Errorf("header or trailer: %w", err)
	}
	f.Base, f.Prev, f.Records = m.base, m.prev, m.count
	data, err := vfs.ReadFile(c.fs, filepath.Join(c.dir, f.Name))
	if err != nil {
		return err
	}
	return decodeDelta(data, m, nil)
}

func (c *checker) checkLegacy(f *CheckpointFile) error {
	data, err := vfs.ReadFile(c.fs, filepath.Join(c.dir, f.Name))
	if err != nil {
		return err
	}
	f.Bytes = int64(len(data))
	return decodePart(data, partMeta{name: f.Name, v0: f.Index, legacy: true}, func([]byte, []byte, store.Version, bool) { f.Records++ })
}
