package engine

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemdb/idem/store"
)

// checkChain finds the chain an open would load — by loadCheckpoint's own
// rules, with "loads" read as "decoded whole in checkFiles" — and reports
// what an open would step around: a newer link that is damaged, missing
// or cut off from its base (the fallback), a delta no chain reaches, a
// checkpoint the log records but whose files are gone, and a log that does
// not reach back to the chain's tip.
func (c *checker) checkChain() {
	// Both listings try to remove temp files; the read-only view refuses,
	// and they ignore that, as they ignore any failure to remove.
	gens, err := listGenerations(c.fs, c.dir)
	if err != nil {
		c.problem(ProblemDamage, c.dir, OffsetUnknown, "the checkpoints cannot be listed: %v", err)
		return
	}
	deltas, err := listDeltas(c.fs, c.dir)
	if err != nil {
		c.problem(ProblemDamage, c.dir, OffsetUnknown, "the checkpoints cannot be listed: %v", err)
		return
	}
	logFirst := uint64(0) // an unreadable log: judge the files alone
	if c.logRead {
		logFirst = c.rep.WAL.FirstIndex
	}
	chosen, gapTip, chained := c.chooseChain(gens, deltas, logFirst)
	tip := store.Version(0)
	if chosen != nil {
		tip = chosen.tip()
		c.rep.Chain = &ChainCheck{Base: chosen.base.v0, Deltas: len(chosen.deltas), Tip: tip, Files: chosen.files()}
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
		for _, b := range lostBases(gens, chosen) {
			c.problem(ProblemDamage, c.path(b), OffsetUnknown,
				"the base later links were written on is missing or incomplete: an open loads the chain it replaced, %s, losing nothing", filesOf(chosen.base))
		}
	}
	c.checkDeltaLinks(deltas, chained, tip)
	c.checkGenerations(gens, tip, chosen)
	c.checkFallback(gens, deltas, tip, chosen != nil || logFirst <= 1)
}

// chooseChain is loadCheckpoint's choice: the newest complete generation
// whose parts all decode, with its deltas up to the first that does not,
// unless the log no longer reaches back to it (gapTip then says where the
// newest such chain ended, else -1). chained names every delta on the
// chain of a complete generation.
func (c *checker) chooseChain(gens []generation, deltas map[store.Version][]deltaMeta, logFirst uint64) (chosen *ckptChain, gapTip int64, chained map[string]bool) {
	gapTip, chained = -1, map[string]bool{}
	decided := false
	for _, g := range gens {
		if !g.complete() {
			continue
		}
		ch := chainOf(g, deltas)
		for _, d := range ch.deltas {
			chained[d.name] = true
		}
		if decided {
			continue
		}
		if uint64(ch.tip())+1 < logFirst {
			gapTip, decided = int64(ch.tip()), true
			continue
		}
		if c.anyBad(g.parts) {
			continue
		}
		good := 0
		for _, d := range ch.deltas {
			if c.bad[d.name] {
				break
			}
			good++
		}
		ch.deltas = ch.deltas[:good]
		if uint64(ch.tip())+1 < logFirst {
			gapTip, decided = int64(ch.tip()), true
			continue
		}
		chosen, decided = ch, true
	}
	return chosen, gapTip, chained
}

func (c *checker) anyBad(parts []partMeta) bool {
	for _, p := range parts {
		if c.bad[p.name] {
			return true
		}
	}
	return false
}

// checkDeltaLinks reports the deltas no chain reaches: damage if newer
// than the tip (an open cannot use them), else leftovers of older chains.
func (c *checker) checkDeltaLinks(deltas map[store.Version][]deltaMeta, chained map[string]bool, tip store.Version) {
	for _, d := range sortedDeltas(deltas) {
		switch {
		case chained[d.name]:
		case d.v <= tip:
			c.problem(ProblemNote, c.path(d.name), OffsetUnknown,
				"a delta no chain reaches, older than the chain in use (a leftover of an older chain): an open skips it, and the next checkpoint removes it")
		default:
			c.problem(ProblemDamage, c.path(d.name), OffsetUnknown,
				"no chain reaches this delta: the link it follows, %s, %s (its base: %s), so an open cannot use it or any link after it",
				c.linkName(d.prev, d.base), c.linkState(d.prev), genFiles(d.base))
		}
	}
}

// checkGenerations reports the incomplete generations: damage if the log
// says it was completed, else an interrupted checkpoint.
func (c *checker) checkGenerations(gens []generation, tip store.Version, chosen *ckptChain) {
	recorded := map[store.Version]bool{}
	for _, v := range c.recorded {
		recorded[store.Version(v)] = true
	}
	for _, g := range gens {
		switch {
		case g.complete():
		case recorded[g.v0]:
			c.problem(ProblemDamage, c.path(genFiles(g.v0)), OffsetUnknown,
				"the log records this checkpoint as written, but of its parts only %s are here, whole in header and trailer", partList(g))
		case g.v0 > tip:
			c.problem(ProblemNote, c.path(genFiles(g.v0)), OffsetUnknown,
				"an incomplete checkpoint (parts %s): a crash or a stop interrupted it, and the next open resumes it", partList(g))
		case chosen != nil && g.v0 > chosen.base.v0 && chosen.hasLink(g.v0):
			c.problem(ProblemNote, c.path(genFiles(g.v0)), OffsetUnknown,
				"an incomplete merge of the chain into a new base (parts %s): a crash or a stop interrupted it, and the next open resumes it", partList(g))
		default:
			c.problem(ProblemNote, c.path(genFiles(g.v0)), OffsetUnknown,
				"an incomplete checkpoint older than the chain in use (parts %s): the next checkpoint removes it", partList(g))
		}
	}
}

// checkFallback reports the links newer than the tip an open would load:
// recorded in the log, or on disk, they make it fall back. usable says
// the open would still succeed (else its refusal is reported already).
func (c *checker) checkFallback(gens []generation, deltas map[store.Version][]deltaMeta, tip store.Version, usable bool) {
	lost := map[store.Version]bool{}
	for _, g := range gens {
		if g.complete() && g.v0 > tip {
			lost[g.v0] = true
		}
	}
	for _, d := range sortedDeltas(deltas) {
		if d.v > tip {
			lost[d.v] = true
		}
	}
	for v, names := range c.versions {
		for _, name := range names {
			if v > tip && c.bad[name] {
				lost[v] = true
			}
		}
	}
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
			c.problem(ProblemNote, c.path(genName(store.Version(v))), OffsetUnknown,
				"the log records this checkpoint, and an earlier open moved its files aside as damaged: it fell back to an older one, losing nothing")
		default:
			lost[store.Version(v)] = true
			c.problem(ProblemDamage, c.path(linkFile(store.Version(v), deltas)), OffsetUnknown,
				"the log records writing this checkpoint, but none of its files is here")
		}
	}
	if len(lost) == 0 || !usable {
		return
	}
	var names []string
	for v := range lost {
		names = append(names, genName(v))
	}
	sort.Strings(names)
	c.problem(ProblemDamage, "", OffsetUnknown,
		"an open falls back: the newest checkpoint links (%s) are unusable, so it loads %s and replays the log after it",
		strings.Join(names, ", "), checkpointLabel(uint64(tip)))
}

func (c *checker) path(name string) string { return filepath.Join(c.dir, name) }

// genFiles names a generation's files by the prefix they share.
func genFiles(v0 store.Version) string { return genName(v0) + "-*" + ckptSuffix }

// linkFile names the files of the missing link at v as well as the deltas
// that name it tell: a delta's if one follows it on another base, the
// base's if one names it as its base, else their common prefix.
func linkFile(v store.Version, deltas map[store.Version][]deltaMeta) string {
	for _, d := range sortedDeltas(deltas) {
		switch {
		case d.base == v:
			return genFiles(v)
		case d.prev == v:
			return deltaName(v)
		}
	}
	return genName(v)
}

// linkName names the link at v of a chain on base.
func (c *checker) linkName(v, base store.Version) string {
	if v == base {
		return genFiles(base) + " (the base)"
	}
	return deltaName(v)
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

// sortedDeltas lists the deltas by version, for a stable report.
func sortedDeltas(deltas map[store.Version][]deltaMeta) []deltaMeta {
	var out []deltaMeta
	for _, ds := range deltas {
		out = append(out, ds...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].v < out[j].v })
	return out
}
