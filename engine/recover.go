package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/internal/hugepage"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
	"github.com/idemdb/idem/wal"
)

// Recovery on open: repair the WAL's tail, load the newest checkpoint that
// is usable, replay the log after it.
//
// No single checkpoint can make the store unopenable. A checkpoint at N
// lets the log be truncated only up to the previous checkpoint P (see
// Checkpoint), so when N is damaged or missing, P and the log from P on
// still hold everything: recovery falls back to P, warns naming both files,
// and moves N aside as <name>.damaged. A checkpoint is usable only if it
// decodes and the log still holds every entry after it; if none is, and
// the log does not start at entry 1, the open is refused naming every
// checkpoint file it tried. The log records each checkpoint it made
// (wal.KindCheckpoint), which is how a missing newest one is noticed.

// recoverer runs the recovery of one Open on the DB it fills; it lives
// only as long as the open.
type recoverer struct {
	db *DB
	// resumeGC ends the collector's pause early (opengc.go); nil: not
	// paused.
	resumeGC func()
	// over, if set, holds the chain's records, sorted, for the replay to
	// apply the log over before they become the tree (replayoverlay.go).
	over *replayOverlay
	// logBytesFrom is the log's wal.Log.BytesFrom, which sizes the room a
	// merged chain keeps for the keys the replay adds (replayRoom).
	logBytesFrom func(index uint64) int64
}

// damagedSuffix marks a checkpoint that failed to load and was moved aside.
const damagedSuffix = ".damaged"

// recover opens the WAL, loads a checkpoint and replays the log after it.
func (rc *recoverer) recover() error {
	db := rc.db
	walOpts := db.opts.WAL
	walOpts.OnDurable = db.onDurable
	phases := openPhases{last: time.Now()}
	log, _, err := wal.Open(filepath.Join(db.dir, walDirName), walOpts)
	if err != nil {
		return walErr(err)
	}
	phases.mark(&phases.LogOpen)
	rc.logBytesFrom = log.BytesFrom
	ckpt, fellBack, err := rc.loadCheckpoint(log.FirstIndex(), func() []uint64 { return recordedCheckpoints(log) })
	if err != nil {
		log.Close()
		return err
	}
	phases.mark(&phases.ChainLoad)
	// A fuzzy checkpoint's parts may be newer than ckpt (ckptfile.go); the
	// replay from ckpt+1 re-applies their writes in log order, so the tree
	// counts as applied up to ckpt while it runs.
	fromParts := db.applied
	db.applied = store.Version(ckpt)
	r := replayer{db: db, next: ckpt + 1, resumeGC: rc.resumeGC, over: rc.over}
	if err = r.replay(log); err != nil {
		log.Close()
		return walErr(err)
	}
	phases.mark(&phases.Replay)
	replayed, entries, newest := r.bytes, r.entries, r.newest
	rc.warnLostMerges(r.merged, ckpt)
	if newest > ckpt && !fellBack {
		// A checkpoint the log says was completed is gone or lost a part
		// (a damaged one was reported as it was skipped).
		db.opts.Logger.Warn("engine: the newest checkpoint is missing or damaged; recovered everything from an older one and the log after it",
			"missing", genName(store.Version(newest)), "used", checkpointLabel(ckpt))
	}
	db.applied = max(db.applied, fromParts, store.Version(log.NextIndex()-1))
	db.durable = store.Version(log.NextIndex() - 1)
	db.log = log
	db.lastCkptIndex.Store(ckpt)
	db.liveNow.Store(db.liveBytes)
	db.deltaNext.Store(db.ckpts.nextIsDelta())
	// The replayed tail counts towards the next checkpoint, so that a
	// crash loop cannot keep the log growing: recovery time stays bounded
	// by one checkpoint interval however often the process dies.
	db.loggedBytes.Store(replayed)
	// The log kept before the tip counts towards the next merge: the log
	// on disk stays bounded by the merge's rule across restarts too.
	db.baseLogBytes.Store(replayed - walDiskBytes(db.fs, filepath.Join(db.dir, walDirName)))
	db.recovery = RecoveryStats{FromCheckpoint: store.Version(ckpt), ReplayedEntries: entries, ReplayedBytes: replayed,
		ChainBytes: db.ckptSize.Load(), MappedBytes: db.mapped.Load(), Phases: phases.OpenPhases}
	rc.reportDamageFiles()
	return nil
}

// checkpointLabel names what recovery started from: checkpoint index v, or
// the whole log (0).
func checkpointLabel(v uint64) string {
	if v == 0 {
		return "(none: the whole log)"
	}
	return genName(store.Version(v))
}

// filesOf names a generation's files for an operator.
func filesOf(g generation) string {
	if len(g.parts) == 1 {
		return g.parts[0].name
	}
	return fmt.Sprintf("%s-*%s (%d parts)", genName(g.v0), ckptSuffix, len(g.parts))
}

// loadCheckpoint fills the tree from the newest usable checkpoint chain
// (ckptchain.go) and returns its tip (0: none, replay the whole log) and
// whether it skipped damaged newer links, and finds an incomplete newer
// base to resume. The log holds entries from logFirst on; recorded lists
// the checkpoints the log says were written (read only to explain a
// refusal).
func (rc *recoverer) loadCheckpoint(logFirst uint64, recorded func() []uint64) (tip uint64, fellBack bool, err error) {
	db := rc.db
	gens, err := listGenerations(db.fs, db.dir)
	if err != nil {
		return 0, false, err
	}
	deltas, err := listDeltas(db.fs, db.dir)
	if err != nil {
		return 0, false, err
	}
	chosen, tried, damaged, err := rc.loadNewestChain(gens, deltas, logFirst)
	if err != nil {
		return 0, false, err
	}
	if chosen == nil && logFirst > 1 {
		return 0, false, rc.noUsableCheckpoint(gens, deltas, tried, logFirst, recorded())
	}
	if chosen != nil {
		tip = uint64(chosen.tip())
		db.chain = chosen
		db.ckptSize.Store(chosen.bytes())
	} else {
		db.tree, db.liveBytes, db.vlogLive = index.NewKeySpace(), 0, map[uint32]int64{}
		rc.over = &replayOverlay{}
	}
	if len(tried) > 0 {
		db.opts.Logger.Warn("engine: the newest checkpoint is damaged; recovered everything from an older one and the log after it",
			"damaged", tried, "used", checkpointLabel(tip))
		rc.moveAside(damaged)
	}
	lost := rc.settleChain(gens, deltas, chosen, store.Version(tip))
	return tip, len(tried) > 0 || lost, nil
}

// loadNewestChain loads the newest complete generation the log can
// complete, with as many of its deltas as load, into the tree. It skips
// a damaged generation (tried and damaged say which, for the warning and
// to move aside); nil when none loads.
func (rc *recoverer) loadNewestChain(gens []generation, deltas map[store.Version][]deltaMeta, logFirst uint64) (chosen *ckptChain, tried, damaged []string, err error) {
	db := rc.db
	for _, g := range gens {
		if !g.complete() {
			continue // being written, or lost a part: replay covers it
		}
		c := chainOf(g, deltas)
		if uint64(c.tip())+1 < logFirst {
			// Older than the log: replay cannot complete it, nor anything older.
			break
		}
		// The deltas first: how many records they hold decides how the
		// base is laid out (loadlayout.go).
		runs, good, derr := rc.loadDeltas(c.deltas)
		load, err := rc.loadGeneration(g, runs[:good], rc.replayRoom(c.tip()))
		if err != nil {
			if !errors.Is(err, errCheckpointDamaged) {
				return nil, nil, nil, err
			}
			db.opts.Logger.Warn("engine: checkpoint does not load", "files", filesOf(g), "err", err)
			tried = append(tried, filesOf(g)+" ("+err.Error()+")")
			for _, p := range g.parts {
				damaged = append(damaged, p.name)
			}
			continue
		}
		load.deltas = runs[:good]
		db.merges.deltaRuns = map[string]loadRun{}
		for i, run := range load.deltas {
			db.merges.deltaRuns[c.deltas[i].name] = run
		}
		if derr != nil {
			if !errors.Is(derr, errCheckpointDamaged) {
				return nil, nil, nil, derr
			}
			d := c.deltas[good]
			db.opts.Logger.Warn("engine: delta checkpoint does not load", "file", d.name, "err", derr)
			tried = append(tried, d.name+" ("+derr.Error()+")")
			damaged = append(damaged, d.name)
		}
		c.deltas = c.deltas[:good]
		if uint64(c.tip())+1 < logFirst {
			// A damaged delta that later links built on, and the log no
			// longer reaches back to the link before it.
			break
		}
		c.exact = true
		var items []index.KV
		items, db.tree, db.liveBytes, db.vlogLive = load.buildSorted()
		if db.tree == nil {
			// Empty until the replay makes it of items and the log.
			db.tree, rc.over = index.NewKeySpace(), &replayOverlay{base: items}
		}
		return c, tried, damaged, nil
	}
	return nil, tried, damaged, nil
}

// settleChain finishes an open's choice of chain: it notes the fallback
// chain whose files are kept, says whether a newer merged base is gone
// (and warns), and resumes an interrupted base or merge.
func (rc *recoverer) settleChain(gens []generation, deltas map[store.Version][]deltaMeta, chosen *ckptChain, tip store.Version) (lostBase bool) {
	db := rc.db
	if chosen != nil {
		db.fallback = fallbackOf(gens, deltas, chosen)
		if lost := lostBases(gens, chosen); len(lost) > 0 {
			db.opts.Logger.Warn("engine: a newer base is missing or damaged; recovered everything from the chain it replaced",
				"missing", lost, "used", filesOf(chosen.base))
			lostBase = true
		}
	}
	switch {
	case len(gens) == 0 || gens[0].complete():
	case gens[0].v0 > tip:
		rc.resume(gens[0])
	case chosen != nil:
		rc.resumeMerge(gens[0], chosen)
	}
	return lostBase
}

// lostBases names the bases the deltas of chosen were written on that are
// newer than its own base and not complete on disk: merged bases lost or
// damaged, which chosen, the chain they replaced, stands in for.
func lostBases(gens []generation, chosen *ckptChain) []string {
	complete := map[store.Version]bool{}
	for _, g := range gens {
		complete[g.v0] = g.complete()
	}
	var out []string
	seen := map[store.Version]bool{}
	for _, d := range chosen.deltas {
		if d.base > chosen.base.v0 && !complete[d.base] && !seen[d.base] {
			seen[d.base] = true
			out = append(out, genFiles(d.base))
		}
	}
	return out
}

// fallbackOf is the chain an open keeps the files of beside chosen: the
// newest complete generation older than chosen's base, with its deltas
// (what a lost file of chosen falls back to).
func fallbackOf(gens []generation, deltas map[store.Version][]deltaMeta, chosen *ckptChain) *ckptChain {
	for _, g := range gens {
		if g.complete() && g.v0 < chosen.base.v0 {
			return chainOf(g, deltas)
		}
	}
	return nil
}

// resumeMerge makes g, an incomplete generation at a delta link of
// chosen, the merge in progress (merge.go): its inputs are chosen's
// links up to g's version, which the merge's output depends on alone.
func (rc *recoverer) resumeMerge(g generation, chosen *ckptChain) {
	db := rc.db
	if g.v0 <= chosen.base.v0 || !chosen.hasLink(g.v0) {
		return // not a merge of this chain: the next link removes it
	}
	input := &ckptChain{base: chosen.base, exact: chosen.exact}
	for _, d := range chosen.deltas {
		if d.v <= g.v0 {
			input.deltas = append(input.deltas, d)
		}
	}
	n := g.resumable()
	var stale []string
	for _, p := range g.parts[n:] {
		stale = append(stale, p.name)
	}
	if err := removeFiles(db.fs, db.dir, stale); err != nil {
		db.opts.Logger.Warn("engine: could not remove parts of an interrupted merge", "err", err)
		return
	}
	db.merges.merging = &pendingMerge{input: input, v0: g.v0, parts: g.parts[:n:n], began: time.Now()}
	db.opts.Logger.Info("engine: resuming an interrupted merge", "checkpoint", genName(g.v0), "parts_done", n)
}

// loadDeltas reads and decodes the deltas ds, as many at once as there
// are processors (each is independent of the others), and returns them
// with the number before the first that does not load, and that one's
// error.
func (rc *recoverer) loadDeltas(ds []deltaMeta) ([]loadRun, int, error) {
	runs := make([]loadRun, len(ds))
	items := deltaItems(ds)
	good, err := eachAtOnce(len(ds), func(i int) (err error) {
		runs[i], err = rc.db.loadDeltaInto(ds[i], items[i], rc.db.opts.MapCheckpoints)
		return err
	})
	return runs, good, err
}

// deltaItems gives each delta of ds an empty stretch of one array, sized
// from the listed counts, for its items: a delta's items alone are a few
// MB, too few for whole huge pages, and were a first-touch fault every
// 256 items, a third of an open's faults at 2 M receipts; together they
// take huge pages (docs/engine.md, "Restart of a growing store"). The
// counts are the files' word, checked by their CRCs only as they decode: the array
// is bounded by loadPreallocMax, and a delta past that bound gets nil
// (loadDeltaInto then allocates its own, as before).
func deltaItems(ds []deltaMeta) [][]index.KV {
	out := make([][]index.KV, len(ds))
	total := uint64(0)
	for _, d := range ds {
		if d.count <= loadPreallocMax { // one past the bound gets none below: reserve none for it
			total += d.count
		}
	}
	n := int(min(total, loadPreallocMax))
	arr := hugepage.Make[index.KV](n)[:n]
	at := uint64(0)
	for i, d := range ds {
		if d.count > loadPreallocMax || at+d.count > uint64(len(arr)) {
			continue
		}
		out[i] = arr[at : at : at+d.count]
		at += d.count
	}
	return out
}

// eachAtOnce calls fn(0) … fn(n-1), as many at once as there are
// processors, and returns how many calls before the first that failed
// succeeded, and that one's error (n and nil if none failed).
func eachAtOnce(n int, fn func(i int) error) (int, error) {
	errs := make([]error, n)
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

// resume makes g, an incomplete checkpoint, the one the next Checkpoint
// continues: after its leading contiguous parts. Parts beyond them could
// never join a complete generation and are removed.
func (rc *recoverer) resume(g generation) {
	db := rc.db
	n := g.resumable()
	if n == 0 {
		return // nothing to build on; the next checkpoint starts afresh
	}
	var stale []string
	for _, p := range g.parts[n:] {
		stale = append(stale, p.name)
	}
	if len(stale) > 0 {
		if err := removeFiles(db.fs, db.dir, stale); err != nil {
			db.opts.Logger.Warn("engine: could not remove parts of an interrupted checkpoint", "err", err)
			return
		}
	}
	db.ckptPending = &pendingGen{v0: g.v0, parts: g.parts[:n:n]}
	db.opts.Logger.Info("engine: resuming an interrupted checkpoint", "checkpoint", genName(g.v0), "parts_done", n)
}

func (rc *recoverer) noUsableCheckpoint(gens []generation, deltas map[store.Version][]deltaMeta, tried []string, logFirst uint64, recorded []uint64) error {
	db := rc.db
	var what []string
	if len(tried) > 0 {
		what = append(what, "damaged: "+strings.Join(tried, "; "))
	}
	complete := map[store.Version]bool{}
	var incomplete []string
	for _, g := range gens {
		complete[g.v0] = g.complete()
		if !g.complete() {
			incomplete = append(incomplete, fmt.Sprintf("%s (parts %s)", genFiles(g.v0), partList(g)))
		}
	}
	if len(incomplete) > 0 {
		what = append(what, "incomplete: "+strings.Join(incomplete, ", "))
	}
	for _, ds := range deltas {
		for _, d := range ds {
			complete[d.v] = true
		}
	}
	var missing []string
	for _, v := range recorded {
		if !complete[store.Version(v)] {
			missing = append(missing, genName(store.Version(v)))
		}
	}
	if len(missing) > 0 {
		what = append(what, "missing or incomplete, though the log records writing them: "+strings.Join(missing, ", "))
	}
	if len(what) == 0 {
		what = append(what, "no checkpoint file is present")
	}
	return &store.CorruptionError{File: db.dir, Reason: fmt.Sprintf(
		"no usable checkpoint (%s): the log starts at entry %d, so the entries before it exist only in a checkpoint. "+
			"Nothing was changed. Restore the data directory from a backup, or put back the files of a checkpoint "+
			"ckpt-<index>-*.ckpt, with every ckpt-*.delta on it, whose newest link is ≥ %d", strings.Join(what, "; "), logFirst, logFirst-1)}
}

// recordedCheckpoints lists the checkpoints the log records writing
// (wal.KindCheckpoint entries), oldest first.
func recordedCheckpoints(log *wal.Log) []uint64 {
	var out []uint64
	_ = log.Replay(log.FirstIndex(), func(_ uint64, kind wal.Kind, body []byte) error {
		if n, k := binary.Uvarint(body); kind == wal.KindCheckpoint && k > 0 {
			out = append(out, n)
		}
		return nil
	})
	return out
}

// loadGeneration decodes every part of g and starts the chain's load
// (loadchain.go) with its records: the parts cover the key space in
// order, each in key order, so they arrive sorted. The chain's build
// (chainLoad.build) makes the tree. deltas are the chain's, read first:
// when they are too many to apply one by one, the base is laid out for
// the merge (loadlayout.go).
func (rc *recoverer) loadGeneration(g generation, deltas []loadRun, room int) (*chainLoad, error) {
	db := rc.db
	var total uint64
	legacy := false
	for _, p := range g.parts {
		total += p.count
		legacy = legacy || p.legacy
	}
	applied := g.v0
	for _, p := range g.parts {
		applied = max(applied, p.version)
	}
	if legacy || total > loadPreallocMax {
		items := make([]index.KV, 0, min(total, loadPreallocMax))
		for _, p := range g.parts {
			err := db.decodePartFile(p, func(kv index.KV) { items = append(items, kv) })
			if err != nil {
				return nil, err
			}
		}
		db.applied = applied
		return &chainLoad{base: items, room: min(room, len(items))}, nil
	}
	// The parts are independent files with exact counts: each decodes into
	// its own stretch of the base, as many at once as there are processors.
	load := &chainLoad{room: min(room, int(total))}
	var stretch func(i int) ([]index.KV, *itemTally)
	if d := deltaRecords(deltas); d > int(total)/loadInsertRatio {
		load.layout = layoutBase(g.parts, deltas, load.room)
		stretch = load.layout.part
	} else {
		// Kept as the tree's items: advised where it lies, no slack.
		load.base = make([]index.KV, total)
		hugepage.AdviseSlice(load.base)
		starts := make([]int, len(g.parts))
		for i, at := 1, 0; i < len(g.parts); i++ {
			at += int(g.parts[i-1].count)
			starts[i] = at
		}
		// Parts that carry their tally give it (tallyblock.go); else
		// baseStats sums the base as it checks its order.
		if allTallied(g.parts) {
			load.baseTallies = make([]itemTally, len(g.parts))
		}
		stretch = func(i int) ([]index.KV, *itemTally) {
			dst := load.base[starts[i] : starts[i]+int(g.parts[i].count)]
			if load.baseTallies == nil {
				return dst, nil
			}
			return dst, &load.baseTallies[i]
		}
	}
	_, err := eachAtOnce(len(g.parts), func(i int) error {
		dst, tally := stretch(i)
		return db.loadPartInto(g.parts[i], dst, tally)
	})
	if err != nil {
		return nil, err
	}
	db.applied = applied
	return load, nil
}

// allTallied reports whether every one of parts carries its tally block.
func allTallied(parts []partMeta) bool {
	for _, p := range parts {
		if !p.tallied {
			return false
		}
	}
	return true
}

// deltaRecords is how many records runs hold.
func deltaRecords(runs []loadRun) int {
	n := 0
	for _, r := range runs {
		n += len(r.kv)
	}
	return n
}

// decodePartFile reads the part p and passes each record to fn, as an
// item aliasing the file's image: one allocation holds the whole part.
func (db *DB) decodePartFile(p partMeta, fn func(index.KV)) error {
	data, err := db.readPartImage(p)
	if err != nil {
		return err
	}
	err = decodePart(data, p, func(k index.KV, v []byte, ver store.Version, indirect bool) { fn(loadedKV(k, v, ver, indirect)) })
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errCheckpointDamaged, p.name, err)
	}
	return nil
}

// loadPreallocMax bounds the slice of a generation's records reserved
// from the parts' counts before any is read (counts are the parts' word).
const loadPreallocMax = 1 << 26

// loadedKV is a checkpoint record as a tree item. k's stored key, v and
// the record's version (the uvarint after v: a part's, a delta's and a
// legacy file's records all end so) are adjacent in the file's image: one
// item aliases all three, its key packed if the record's is, and ver is
// only checked against what the item reads.
func loadedKV(k index.KV, v []byte, ver store.Version, indirect bool) index.KV {
	sk := k.StoredKey()
	kv := index.PackedKV(sk, len(sk), len(v))
	if indirect {
		kv = index.IndirectKV(sk, len(sk), len(v))
	}
	if k.KeyPacked() {
		kv = kv.WithPackedKey()
	}
	if kv.Version() != uint64(ver) {
		panic("engine: invariant broken: a checkpoint record's version does not follow its value")
	}
	return kv
}

// moveAside renames damaged checkpoint files to <name>.damaged: out of
// every later choice, kept for an operator until newer checkpoints
// supersede them. A failure only costs a warning: the next open skips them
// again.
func (rc *recoverer) moveAside(names []string) {
	db := rc.db
	for _, name := range names {
		p := filepath.Join(db.dir, name)
		if err := db.fs.Rename(p, p+damagedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.opts.Logger.Warn("engine: could not move a damaged checkpoint aside", "file", p, "err", err)
		}
	}
	if err := vfs.SyncDir(db.fs, db.dir); err != nil {
		db.opts.Logger.Warn("engine: could not sync the data directory", "err", err)
	}
}

// reportDamageFiles says at start-up which damaged checkpoints are kept.
func (rc *recoverer) reportDamageFiles() {
	db := rc.db
	ents, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ckptPrefix) && strings.HasSuffix(e.Name(), damagedSuffix) {
			names = append(names, e.Name())
		}
	}
	if len(names) > 0 {
		db.opts.Logger.Warn("engine: damaged checkpoints kept for inspection (safe to delete)", "dir", db.dir, "files", names)
	}
}

// walErr names the log's directory in a corruption the log found, unless
// a *store.CorruptionError names a file already.
func walErr(err error) error {
	var named *store.CorruptionError
	if errors.Is(err, wal.ErrCorruption) && !errors.As(err, &named) {
		return &store.CorruptionError{File: walDirName, Err: err}
	}
	return err
}

// walDiskBytes is the size of the log's files, about the log bytes kept.
func walDiskBytes(fsys vfs.FS, dir string) int64 {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// warnLostMerges names the merged bases the replayed log records linking
// that the open did not load: gone or damaged, their chain's fallback
// stood in for them, losing nothing (the deltas written on one name it,
// lostBases; this covers a merged base no delta was written on yet).
func (rc *recoverer) warnLostMerges(merged []store.Version, used uint64) {
	db := rc.db
	var lost []string
	for _, v := range merged {
		if db.chain == nil || v > db.chain.base.v0 {
			lost = append(lost, genFiles(v))
		}
	}
	if len(lost) > 0 {
		db.opts.Logger.Warn("engine: a newer base is missing or damaged; recovered everything from the chain it replaced and the log",
			"missing", lost, "used", checkpointLabel(used))
	}
}

// readImage reads a checkpoint file of about size bytes whose records
// the tree will alias, into memory advised to take huge pages, or, if
// mapIt, maps it (Options.MapCheckpoints).
func (db *DB) readImage(name string, size int64, mapIt bool) ([]byte, error) {
	path := filepath.Join(db.dir, name)
	if mapIt {
		b, ok, err := vfs.MapFile(db.fs, path)
		if err != nil {
			return nil, err
		}
		if ok {
			db.mapped.Add(int64(len(b)))
			return b, nil
		}
	}
	// Not aligned to a huge page (an earlier hugeBuf was): the records
	// alias the image for the store's life, so its slack, up to 2 MiB a
	// file, counted as RAM per retained receipt (60 -> 69 B at 300 k with
	// the value log) for a few thousand first-touch faults an open.
	buf := make([]byte, 0, max(size, 0)+1)
	hugepage.Advise(buf[:cap(buf)])
	return vfs.ReadFileInto(db.fs, path, buf)
}
