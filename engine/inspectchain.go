package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// The checkpoint chains of a data dir as recovery lists and links them
// (ckptchain.go), exported read-only for the offline checker
// (engine/check), which judges a dir by recovery's own choice of chain.

// CheckpointLayout is a data dir's checkpoint files as recovery lists
// them, from each file's header and trailer: a file whose header or
// trailer does not read is left out, as recovery leaves it out.
type CheckpointLayout struct {
	Generations []CheckpointGeneration // newest first
	Deltas      []CheckpointDelta      // oldest first
	gens        []generation
	deltas      map[store.Version][]deltaMeta
}

// CheckpointGeneration is one generation: a base checkpoint's parts.
type CheckpointGeneration struct {
	V0       store.Version
	Parts    []CheckpointPart // by seq
	Complete bool             // the parts cover the whole key space
	g        generation
}

// CheckpointPart is one part of a generation.
type CheckpointPart struct {
	Name string
	Seq  int
}

// CheckpointDelta is one delta: the link at V, following the link Prev
// of a chain on the base generation Base.
type CheckpointDelta struct {
	Name          string
	V, Base, Prev store.Version
}

// CheckpointChain is a base generation and the deltas linked on it.
type CheckpointChain struct {
	Base   CheckpointGeneration
	Deltas []CheckpointDelta // oldest first
	c      *ckptChain
}

// ListCheckpoints lists the checkpoint files in dir. As recovery's
// listing does, it tries to remove the temp files of interrupted
// checkpoints, and ignores failing to: on a read-only fsys it changes
// nothing.
func ListCheckpoints(fsys vfs.FS, dir string) (*CheckpointLayout, error) {
	gens, err := listGenerations(fsys, dir)
	if err != nil {
		return nil, err
	}
	deltas, err := listDeltas(fsys, dir)
	if err != nil {
		return nil, err
	}
	l := &CheckpointLayout{gens: gens, deltas: deltas}
	for _, g := range gens {
		l.Generations = append(l.Generations, generationOf(g))
	}
	for _, ds := range deltas {
		for _, d := range ds {
			l.Deltas = append(l.Deltas, deltaOf(d))
		}
	}
	sort.Slice(l.Deltas, func(i, j int) bool { return l.Deltas[i].V < l.Deltas[j].V })
	return l, nil
}

func generationOf(g generation) CheckpointGeneration {
	out := CheckpointGeneration{V0: g.v0, Complete: g.complete(), g: g}
	for _, p := range g.parts {
		out.Parts = append(out.Parts, CheckpointPart{Name: p.name, Seq: p.seq})
	}
	return out
}

func deltaOf(d deltaMeta) CheckpointDelta {
	return CheckpointDelta{Name: d.name, V: d.v, Base: d.base, Prev: d.prev}
}

func chainFrom(c *ckptChain) CheckpointChain {
	out := CheckpointChain{Base: generationOf(c.base), c: c}
	for _, d := range c.deltas {
		out.Deltas = append(out.Deltas, deltaOf(d))
	}
	return out
}

// ChainOf returns g's chain as the files link it (chainOf's rule: each
// next delta follows the newest link).
func (l *CheckpointLayout) ChainOf(g CheckpointGeneration) CheckpointChain {
	return chainFrom(chainOf(g.g, l.deltas))
}

// LostBases names the bases c's deltas were written on that are newer
// than its own and not complete on disk (merged bases c stands in for).
func (l *CheckpointLayout) LostBases(c CheckpointChain) []string { return lostBases(l.gens, c.c) }

// Prefix is the chain with only its first n deltas: recovery's chain ends
// before the first delta that does not load.
func (c CheckpointChain) Prefix(n int) CheckpointChain {
	return chainFrom(&ckptChain{base: c.c.base, deltas: c.c.deltas[:n], exact: c.c.exact})
}

// Tip is the chain's newest link: replay starts after it.
func (c CheckpointChain) Tip() store.Version { return c.c.tip() }

// Files names every file of the chain.
func (c CheckpointChain) Files() []string { return c.c.files() }

// HasLink reports whether v is one of the chain's links.
func (c CheckpointChain) HasLink(v store.Version) bool { return c.c.hasLink(v) }

// BaseFiles names the base's files for an operator.
func (c CheckpointChain) BaseFiles() string { return filesOf(c.c.base) }

// CheckpointName is the prefix a link's files share, ckpt-<v>.
func CheckpointName(v store.Version) string { return genName(v) }

// GenerationFiles names a generation's part files by the pattern they share.
func GenerationFiles(v0 store.Version) string { return genFiles(v0) }

// DeltaName is the file name of the delta at v.
func DeltaName(v store.Version) string { return deltaName(v) }

// CheckpointLabel names what recovery starts from: checkpoint v, or the
// whole log (0).
func CheckpointLabel(v store.Version) string { return checkpointLabel(uint64(v)) }

// genFiles names a generation's files by the prefix they share.
func genFiles(v0 store.Version) string { return genName(v0) + "-*" + ckptSuffix }

// partList lists a generation's part numbers for an operator.
func partList(g generation) string {
	var seqs []string
	for _, p := range g.parts {
		seqs = append(seqs, fmt.Sprint(p.seq))
	}
	if len(seqs) == 0 {
		return "none"
	}
	return strings.Join(seqs, ", ")
}

// PartList lists the generation's part numbers for an operator.
func (g CheckpointGeneration) PartList() string { return partList(g.g) }
