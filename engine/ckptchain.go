package engine

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// Checkpoint chains.
//
// The newest complete checkpoint is a chain: a base generation (the whole
// store, ckptfile.go) and the deltas written on it since (delta.go), each
// holding only what changed after the link before it. A growing store
// therefore stops rewriting itself at every checkpoint: a delta costs what
// changed, and the chain is rebased by merging its own files in the
// background (merge.go) once the log kept since the base reaches the
// store's size, the chain's files hold more than ckptGarbageRatio times
// the live data, or CheckpointDeltasMax deltas are on it.
//
// Fallback. The log is kept from the base's link on, and the chain the
// base replaced with it, so no single checkpoint file's damage or loss
// loses a write: a lost delta falls back to the links before it and the
// log, a lost base to the chain it replaced (which reaches the deltas
// after the base by the links they follow) (docs/design.md §2).

// ckptGarbageRatio bounds the chain's files against the live data: beyond
// it, the next checkpoint is a new base.
const ckptGarbageRatio = 2

// ckptRecordOverhead estimates a record's bytes in a checkpoint beyond its
// key and value (lengths and version), for the live-data estimate.
const ckptRecordOverhead = 8

// ckptChain is a complete checkpoint: a base and the deltas on it, oldest
// first.
type ckptChain struct {
	base   generation
	deltas []deltaMeta
	// exact says the chain's files give the store exactly as of tip(), so
	// the writes noted since say truly whether the files hold a key. A
	// base completed across several snapshots is fuzzy: the first delta on
	// it writes a tombstone for every deleted key.
	exact bool
}

// tip is the chain's newest link: where replay starts after it.
func (c *ckptChain) tip() store.Version {
	if len(c.deltas) > 0 {
		return c.deltas[len(c.deltas)-1].v
	}
	return c.base.v0
}

func (c *ckptChain) bytes() int64 {
	n := c.base.bytes()
	for _, d := range c.deltas {
		n += d.size
	}
	return n
}

// files names every file of the chain.
func (c *ckptChain) files() []string {
	var out []string
	for _, p := range c.base.parts {
		out = append(out, p.name)
	}
	for _, d := range c.deltas {
		out = append(out, d.name)
	}
	return out
}

// with returns the chain with d on it.
func (c *ckptChain) with(d deltaMeta) *ckptChain {
	return &ckptChain{base: c.base, deltas: append(append([]deltaMeta(nil), c.deltas...), d), exact: true}
}

// listDeltas returns the deltas in dir whose header and trailer read, by
// the version of the link they follow, and removes the temporary files of
// interrupted ones.
func listDeltas(fsys vfs.FS, dir string) (map[store.Version][]deltaMeta, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[store.Version][]deltaMeta{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ckptPrefix) {
			continue
		}
		if strings.HasSuffix(name, deltaSuffix+ckptTmpSuffix) {
			fsys.Remove(filepath.Join(dir, name)) // an interrupted delta
			continue
		}
		if _, ok := parseDeltaName(name); !ok {
			continue
		}
		m, err := readDeltaMeta(fsys, dir, name)
		if err != nil {
			continue // unreadable: its chain ends before it
		}
		out[m.prev] = append(out[m.prev], m)
	}
	for _, ds := range out {
		sort.Slice(ds, func(i, j int) bool { return ds[i].v > ds[j].v })
	}
	return out, nil
}

// chainOf returns g's chain as the files in dir link it: each next delta
// follows the newest link. A delta names the base it was written on, but
// it stands on any base whose chain reaches the link it follows: a base
// merged at a link (merge.go) holds exactly the state of the chain it was
// merged from there, and the chain it replaced still reaches the deltas
// after it. Links are log indexes, and a state at an index is the log's,
// so no two chains disagree about one. Of two deltas on one link (only a
// crash between writing one and recording it could leave them), the newer
// is taken.
func chainOf(g generation, deltas map[store.Version][]deltaMeta) *ckptChain {
	c := &ckptChain{base: g}
	for {
		ds := deltas[c.tip()]
		if len(ds) == 0 || ds[0].base > c.tip() {
			return c
		}
		c.deltas = append(c.deltas, ds[0])
	}
}

// nextIsDelta decides what the next checkpoint writes: a delta on the
// current chain, or a new base. Caller holds ckptMu.
//
// Deltas go on while a merge is due or running: the chain is rebased by
// merging (merge.go), never by waiting for a snapshot of the whole store,
// so the log a restart replays stays one interval or two. A new base
// from a snapshot is written only with no chain yet, a base pending, or
// the dirty set lost.
func (cp *checkpointer) nextIsDelta() bool {
	db := cp.db
	c := db.chain
	if db.opts.CheckpointDeltasMax < 0 || c == nil || db.ckptPending != nil {
		return false
	}
	db.treeMu.RLock()
	lost := db.dirty.lost
	db.treeMu.RUnlock()
	return !lost
}
