package check

import (
	"path/filepath"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
)

// checkFiles decodes every checkpoint file whole — header, records in key
// order, trailer, counts, checksums — with the decoders an open loads them
// with (engine.VerifyCheckpointFile), and notes the files that earlier
// recoveries kept and those that are not the engine's.
func (c *checker) checkFiles() {
	c.bad, c.versions, c.damaged = map[string]bool{}, map[store.Version][]string{}, map[store.Version]bool{}
	ents, err := c.fs.ReadDir(c.dir)
	if err != nil {
		c.problem(ProblemDamage, c.dir, OffsetUnknown, "the data dir cannot be listed: %v", err)
		return
	}
	for _, e := range ents {
		name, path := e.Name(), filepath.Join(c.dir, e.Name())
		switch fn := engine.ParseFileName(name, e.IsDir()); fn.Kind {
		case engine.FileOwn:
			// The value log's records are checked by the values the
			// loaded state reads back (load.go).
		case engine.FileForeign:
			c.problem(ProblemNote, path, OffsetUnknown, "not a file of the engine's: nothing reads it")
		case engine.FileCheckpointDamaged:
			c.damaged[fn.Version] = true
			c.problem(ProblemNote, path, OffsetUnknown,
				"a checkpoint file an earlier open could not load and moved aside: safe to delete, and removed once a newer checkpoint supersedes it")
		case engine.FileCheckpointTemp:
			c.problem(ProblemNote, path, OffsetUnknown, "a checkpoint write a crash interrupted (a temp file): the next open removes it")
		case engine.FileCheckpointMisnamed:
			c.problem(ProblemNote, path, OffsetUnknown, "named like a checkpoint file but not one: nothing reads it")
		default:
			c.checkCkptFile(name, fn)
		}
	}
}

// kindNames are the report's names of the checkpoint file kinds.
var kindNames = map[engine.FileKind]string{engine.FilePart: "part", engine.FileDelta: "delta", engine.FileLegacy: "legacy"}

// checkCkptFile checks one file named like a part, a delta or a legacy
// checkpoint.
func (c *checker) checkCkptFile(name string, fn engine.FileName) {
	m, err := engine.VerifyCheckpointFile(c.fs, c.dir, name)
	f := CheckpointFile{Name: name, Kind: kindNames[fn.Kind], Index: fn.Version, Seq: fn.Seq,
		Base: m.Base, Prev: m.Prev, Last: m.Last, Records: m.Records, Bytes: m.Bytes, OK: err == nil}
	if err != nil {
		c.bad[name] = true
		c.problem(ProblemDamage, filepath.Join(c.dir, name), OffsetUnknown, "checkpoint %s does not decode: %v", f.Kind, err)
	}
	c.versions[f.Index] = append(c.versions[f.Index], name)
	c.rep.Checkpoints = append(c.rep.Checkpoints, f)
}
