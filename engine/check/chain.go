package check

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/store"
)

// checkChain finds the chain an open would load — by recovery's own
// rules (engine.ListCheckpoints, ChainOf), with "loads" read as "decoded
// whole in checkFiles" — and reports what an open would step around: a
// newer link that is damaged, missing or cut off from its base (the
// fallback), a delta no chain reaches, a checkpoint the log records but
// whose files are gone, and a log that does not reach back to the chain's
// tip.
func (c *checker) checkChain() {
	// The listing tries to remove temp files; the read-only view
	// refuses, and it ignores that, as it ignores any failure to remove.
	l, err := engine.ListCheckpoints(c.fs, c.dir)
	if err != nil {
		c.problem(ProblemDamage, c.dir, OffsetUnknown, "the checkpoints cannot be listed: %v", err)
		return
	}
	logFirst := uint64(0) // an unreadable log: judge the files alone
	if c.logRead {
		logFirst = c.rep.WAL.FirstIndex
	}
	chosen, gapTip, chained := c.chooseChain(l, logFirst)
	tip := store.Version(0)
	if chosen != nil {
		tip = chosen.Tip()
		c.rep.Chain = &Chain{Base: chosen.Base.V0, Deltas: len(chosen.Deltas), Tip: tip, Files: chosen.Files()}
	}
	switch {
	case chosen == nil && logFirst > 1 && gapTip >= 0:
		c.problem(ProblemDamage, c.dir, OffsetUnknown,
			"a gap: the log starts at entry %d, but the newest usable checkpoint ends at entry %d, so entries %d..%d exist nowhere (an open refuses)",
			logFirst, gapTip, gapTip+1, logFirst-1)
	case chosen == nil && logFirst > 1:
		c.problem(ProblemDamage, c.dir, OffsetUnknown,
			"no usable checkpoint, and the log starts at entry %d: entries 1..%d exist only in a checkpoint (an open refuses)", logFirst, logFirst-1)
	case chosen != nil && c.logRead && c.rep.WAL.LastIndex < uint64(tip):
		c.problem(ProblemDamage, c.dir, OffsetUnknown,
			"the log ends at entry %d, before the checkpoint tip %d: acknowledged entries are gone (an open refuses)", c.rep.WAL.LastIndex, tip)
	}
	if chosen != nil {
		for _, b := range l.LostBases(*chosen) {
			c.problem(ProblemDamage, c.path(b), OffsetUnknown,
				"the base later links were written on is missing or incomplete: an open loads the chain it replaced, %s, losing nothing", chosen.BaseFiles())
		}
	}
	c.checkDeltaLinks(l.Deltas, chained, tip)
	c.checkGenerations(l.Generations, tip, chosen)
	c.checkFallback(l, tip, chosen != nil || logFirst <= 1)
}

// chooseChain is recovery's choice: the newest complete generation whose
// parts all decode, with its deltas up to the first that does not, unless
// the log no longer reaches back to it (gapTip then says where the newest
// such chain ended, else -1). chained names every delta on the chain of a
// complete generation.
func (c *checker) chooseChain(l *engine.CheckpointLayout, logFirst uint64) (chosen *engine.CheckpointChain, gapTip int64, chained map[string]bool) {
	gapTip, chained = -1, map[string]bool{}
	decided := false
	for _, g := range l.Generations {
		if !g.Complete {
			continue
		}
		ch := l.ChainOf(g)
		for _, d := range ch.Deltas {
			chained[d.Name] = true
		}
		if decided {
			continue
		}
		if uint64(ch.Tip())+1 < logFirst {
			gapTip, decided = int64(ch.Tip()), true
			continue
		}
		if c.anyBad(g.Parts) {
			continue
		}
		good := 0
		for _, d := range ch.Deltas {
			if c.bad[d.Name] {
				break
			}
			good++
		}
		ch = ch.Prefix(good)
		if uint64(ch.Tip())+1 < logFirst {
			gapTip, decided = int64(ch.Tip()), true
			continue
		}
		chosen, decided = &ch, true
	}
	return chosen, gapTip, chained
}

func (c *checker) anyBad(parts []engine.CheckpointPart) bool {
	for _, p := range parts {
		if c.bad[p.Name] {
			return true
		}
	}
	return false
}

// checkDeltaLinks reports the deltas no chain reaches: damage if newer
// than the tip (an open cannot use them), else leftovers of older chains.
func (c *checker) checkDeltaLinks(deltas []engine.CheckpointDelta, chained map[string]bool, tip store.Version) {
	for _, d := range deltas {
		switch {
		case chained[d.Name]:
		case d.V <= tip:
			c.problem(ProblemNote, c.path(d.Name), OffsetUnknown,
				"a delta no chain reaches, older than the chain in use (a leftover of an older chain): an open skips it, and the next checkpoint removes it")
		default:
			c.problem(ProblemDamage, c.path(d.Name), OffsetUnknown,
				"no chain reaches this delta: the link it follows, %s, %s (its base: %s), so an open cannot use it or any link after it",
				c.linkName(d.Prev, d.Base), c.linkState(d.Prev), engine.GenerationFiles(d.Base))
		}
	}
}

// checkGenerations reports the incomplete generations: damage if the log
// says it was completed, else an interrupted checkpoint. A merge is named
// by the chain's tip, so a plain record of the tip is its delta's, not
// the merge's (a merge's record is flagged).
func (c *checker) checkGenerations(gens []engine.CheckpointGeneration, tip store.Version, chosen *engine.CheckpointChain) {
	recorded := map[store.Version]bool{}
	for _, v := range c.recorded {
		v := store.Version(v)
		recorded[v] = c.merges[v] || chosen == nil || v <= chosen.Base.V0 || !chosen.HasLink(v)
	}
	for _, g := range gens {
		files := c.path(engine.GenerationFiles(g.V0))
		switch {
		case g.Complete:
		case recorded[g.V0]:
			c.problem(ProblemDamage, files, OffsetUnknown,
				"the log records this checkpoint as written, but of its parts only %s are here, whole in header and trailer", g.PartList())
		case g.V0 > tip:
			c.problem(ProblemNote, files, OffsetUnknown,
				"an incomplete checkpoint (parts %s): a crash or a stop interrupted it, and the next open resumes it", g.PartList())
		case chosen != nil && g.V0 > chosen.Base.V0 && chosen.HasLink(g.V0):
			c.problem(ProblemNote, files, OffsetUnknown,
				"an incomplete merge of the chain into a new base (parts %s): a crash or a stop interrupted it, and the next open resumes it", g.PartList())
		default:
			c.problem(ProblemNote, files, OffsetUnknown,
				"an incomplete checkpoint older than the chain in use (parts %s): the next checkpoint removes it", g.PartList())
		}
	}
}

// checkFallback reports the links newer than the tip an open would load:
// recorded in the log, or on disk, they make it fall back. usable says
// the open would still succeed (else its refusal is reported already).
func (c *checker) checkFallback(l *engine.CheckpointLayout, tip store.Version, usable bool) {
	lost := map[store.Version]bool{}
	for _, g := range l.Generations {
		if g.Complete && g.V0 > tip {
			lost[g.V0] = true
		}
	}
	for _, d := range l.Deltas {
		if d.V > tip {
			lost[d.V] = true
		}
	}
	for v, names := range c.versions {
		for _, name := range names {
			if v > tip && c.bad[name] {
				lost[v] = true
			}
		}
	}
	c.checkRecorded(l.Deltas, tip, lost)
	if len(lost) == 0 || !usable {
		return
	}
	var names []string
	for v := range lost {
		names = append(names, engine.CheckpointName(v))
	}
	sort.Strings(names)
	c.problem(ProblemDamage, "", OffsetUnknown,
		"an open falls back: the newest checkpoint links (%s) are unusable, so it loads %s and replays the log after it",
		strings.Join(names, ", "), engine.CheckpointLabel(tip))
}

// checkRecorded adds to lost the checkpoints newer than tip the log
// records writing, and reports those whose files are gone.
func (c *checker) checkRecorded(deltas []engine.CheckpointDelta, tip store.Version, lost map[store.Version]bool) {
	seen := map[uint64]bool{}
	for _, v := range c.recorded {
		if store.Version(v) <= tip || seen[v] {
			continue
		}
		seen[v] = true
		switch {
		case len(c.versions[store.Version(v)]) > 0:
			lost[store.Version(v)] = true // its files are reported on their own
		case c.damaged[store.Version(v)]:
			c.problem(ProblemNote, c.path(engine.CheckpointName(store.Version(v))), OffsetUnknown,
				"the log records this checkpoint, and an earlier open moved its files aside as damaged: it fell back to an older one, losing nothing")
		default:
			lost[store.Version(v)] = true
			c.problem(ProblemDamage, c.path(linkFile(store.Version(v), deltas)), OffsetUnknown,
				"the log records writing this checkpoint, but none of its files is here")
		}
	}
}

func (c *checker) path(name string) string { return filepath.Join(c.dir, name) }

// linkFile names the files of the missing link at v as well as the deltas
// that name it tell: a delta's if one follows it on another base, the
// base's if one names it as its base, else their common prefix.
func linkFile(v store.Version, deltas []engine.CheckpointDelta) string {
	for _, d := range deltas {
		switch {
		case d.Base == v:
			return engine.GenerationFiles(v)
		case d.Prev == v:
			return engine.DeltaName(v)
		}
	}
	return engine.CheckpointName(v)
}

// linkName names the link at v of a chain on base.
func (c *checker) linkName(v, base store.Version) string {
	if v == base {
		return engine.GenerationFiles(base) + " (the base)"
	}
	return engine.DeltaName(v)
}

// linkState says what is wrong with the link at v.
func (c *checker) linkState(v store.Version) string {
	names := c.versions[v]
	if len(names) == 0 {
		return "is missing"
	}
	for _, n := range names {
		if c.bad[n] {
			return fmt.Sprintf("does not decode (%s)", n)
		}
	}
	return "is not on a chain itself"
}
