package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/vfs"
)

// Merges: a new base made from the chain's own files (docs/engine.md,
// "Merges").
//
// Once a chain is due for a new base (mergeDue), the base and its deltas
// up to the tip tk are merged, newest record winning, tombstones
// dropped, into a new generation at tk: the chain's exact state at tk,
// written as ordinary parts. The inputs are files that do not change, so
// the merge needs no snapshot and no log: it runs a part at a time (under
// ckptMu, one part per hold, so deltas go on between parts), and a merge
// a crash cut short is resumed by the next process after its last durable
// part. Deltas written meanwhile follow tk, and tk is exactly the merged
// base's state, so they stand on the new base as they stood on the old
// chain (chainOf links them by the link they follow).
//
// Once the new base is durable the old chain stays as the fallback, the
// log is truncated before tk + 1, and the chain before the old one is
// removed: no single file's loss leaves a write without a copy — the new
// base's loss falls back to the old chain (which the deltas after tk
// extend), a delta's to the base and the log from tk + 1.

// merger merges the chain into a new base in the background (run), a part
// at a time under the DB's ckptMu.
type merger struct {
	db       *DB
	merging  *pendingMerge // the merge in progress (nil: none); under ckptMu
	requests chan struct{} // never closed
	done     chan struct{} // closed when run returns
	// The deltas the open loaded, by name, for a merge it starts; under
	// ckptMu.
	deltaRuns map[string]loadRun
}

func newMerger(db *DB) *merger {
	return &merger{db: db, requests: make(chan struct{}, 1), done: make(chan struct{})}
}

// pendingMerge is a merge being written: its inputs and its parts so far.
type pendingMerge struct {
	input *ckptChain    // base and deltas up to v0
	v0    store.Version // input.tip(): the new base's version
	parts []partMeta
	run   *loadRun // the input deltas merged, newest winning (loaded at the first step)
	began time.Time
}

// mergeDue says whether the chain should be merged into a new base: the
// log kept since the base reached the store's size (so the rewrite costs
// at most as much again as the log it lets go), or the chain's files hold
// more than ckptGarbageRatio times the live data, or CheckpointDeltasMax
// deltas are on the base, or the value-log segments waiting for a new
// base to be removed (vlog_gc.go) outweigh the chain. Caller holds ckptMu.
func (mg *merger) mergeDue() bool {
	db := mg.db
	c := db.chain
	if c == nil || len(c.deltas) == 0 || db.ckptPending != nil || mg.merging != nil {
		return false
	}
	db.treeMu.RLock()
	live := db.liveBytes
	db.treeMu.RUnlock()
	sinceBase := db.loggedBytes.Load() - db.baseLogBytes.Load()
	return len(c.deltas) >= db.opts.CheckpointDeltasMax || c.bytes() > ckptGarbageRatio*max(live, 1) ||
		sinceBase >= max(db.opts.CheckpointLogBytes, live) || mg.retiredWaiting() >= c.bytes()
}

// retiredWaiting is the bytes of the retired value-log segments that wait
// for the base or the fallback to pass them. Caller holds ckptMu.
func (mg *merger) retiredWaiting() int64 {
	db := mg.db
	var n int64
	for _, r := range db.gc.retired {
		if !db.gc.chainsPast(r.after) {
			n += db.vlog.size(r.id)
		}
	}
	return n
}

// maybeStartMerge starts a merge if one is due and asks the merger to
// write it. Caller holds ckptMu.
func (mg *merger) maybeStartMerge() {
	db := mg.db
	if mg.mergeDue() {
		c := db.chain
		mg.merging = &pendingMerge{input: c, v0: c.tip(), began: time.Now()}
	}
	if mg.merging != nil && db.opts.CheckpointLogBytes > 0 {
		select {
		case mg.requests <- struct{}{}:
		default:
		}
	}
}

// run writes the merge in progress a part at a time, in the
// background, until it is linked.
func (mg *merger) run() {
	db := mg.db
	defer close(mg.done)
	for {
		select {
		case <-db.ckpts.stop:
			return
		case <-mg.requests:
		}
		for {
			select {
			case <-db.ckpts.stop:
				return
			default:
			}
			done, err := mg.mergeStep()
			if errors.Is(err, store.ErrClosed) {
				return
			}
			if err != nil {
				db.opts.Logger.Error("engine: merge failed; the next checkpoint link retries it", "err", err)
				break
			}
			if done {
				break
			}
		}
	}
}

// mergeAll writes the merge in progress, if any, to its end (tests).
func (mg *merger) mergeAll() error {
	for {
		done, err := mg.mergeStep()
		if err != nil || done {
			return err
		}
	}
}

// mergeStep writes the next part of the merge in progress, or links it
// once its last part is durable. done: no merge is left.
func (mg *merger) mergeStep() (done bool, err error) {
	db := mg.db
	if db.closed.Load() {
		return true, store.ErrClosed
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	m := mg.merging
	if m == nil {
		return true, nil
	}
	if m.run == nil {
		run, err := mg.mergedDeltas(m.input.deltas)
		if err != nil {
			mg.merging = nil // an input is damaged: the next open falls back, or a snapshot base replaces the chain
			return true, fmt.Errorf("engine: merge into %s: %w", genName(m.v0), err)
		}
		m.run = run
	}
	if n := len(m.parts); n > 0 && m.parts[n-1].last {
		return true, mg.linkMerge(m)
	}
	if err := mg.writeMergePart(m); err != nil {
		return true, err
	}
	return false, nil
}

// mergedDeltas loads the deltas ds and merges them into one run, oldest
// first, a newer record winning its key, tombstones kept (they hide the
// base's records). The deltas the open loaded are taken as they are: a
// process that lives a few seconds must not spend them reading the chain
// again (their records alias the files' images, which the tree's items
// keep alive anyway).
func (mg *merger) mergedDeltas(ds []deltaMeta) (*loadRun, error) {
	db := mg.db
	runs := make([]loadRun, len(ds))
	for i, d := range ds {
		if r, ok := mg.deltaRuns[d.name]; ok {
			runs[i] = r
			continue
		}
		r, err := db.loadDelta(d)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	mg.deltaRuns = nil
	for len(runs) > 1 { // pairwise rounds: log2(deltas) passes over the records
		next := runs[:0:0]
		for i := 0; i < len(runs); i += 2 {
			if i+1 == len(runs) {
				next = append(next, runs[i])
				continue
			}
			next = append(next, mergeTwo(runs[i], runs[i+1]))
		}
		runs = next
	}
	if len(runs) == 0 {
		return &loadRun{}, nil
	}
	return &runs[0], nil
}

// mergeTwo merges two runs in key order, newer's record winning a key.
func mergeTwo(older, newer loadRun) loadRun {
	out := loadRun{kv: make([]index.KV, 0, len(older.kv)+len(newer.kv))}
	i, j := 0, 0
	for i < len(older.kv) || j < len(newer.kv) {
		c := 1
		switch {
		case i == len(older.kv):
		case j == len(newer.kv):
			c = -1
		default:
			c = older.kv[i].CompareKey(newer.kv[j])
		}
		if c < 0 {
			out.add(older.kv[i], older.tombstone(i))
			i++
			continue
		}
		out.add(newer.kv[j], newer.tombstone(j))
		if c == 0 {
			i++
		}
		j++
	}
	return out
}

// mergeCursor walks the merge's input from a key: the base's records,
// part by part, and the merged deltas.
type mergeCursor struct {
	db    *DB
	base  []partMeta
	part  int        // the base part being read
	items []index.KV // its records
	at    int        // the next of them
	run   *loadRun
	ri    int // the next delta record
}

func (mg *merger) newMergeCursor(m *pendingMerge, start []byte) (*mergeCursor, error) {
	db := mg.db
	cur := &mergeCursor{db: db, base: m.input.base.parts, run: m.run}
	cur.part = len(cur.base)
	for i, p := range cur.base {
		if p.last || bytes.Compare(start, p.end) < 0 {
			cur.part = i
			break
		}
	}
	if err := cur.loadPart(); err != nil {
		return nil, err
	}
	cur.at, _ = slices.BinarySearchFunc(cur.items, index.Probe(start), index.KV.CompareKey)
	cur.ri, _ = slices.BinarySearchFunc(m.run.kv, index.Probe(start), index.KV.CompareKey)
	return cur, nil
}

// loadPart reads the base part cur.part (none past the last).
func (cur *mergeCursor) loadPart() error {
	cur.items, cur.at = cur.items[:0], 0
	if cur.part >= len(cur.base) {
		return nil
	}
	p := cur.base[cur.part]
	data, err := vfs.ReadFile(cur.db.fs, filepath.Join(cur.db.dir, p.name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s vanished", errCheckpointDamaged, p.name)
	}
	if err != nil {
		return err
	}
	err = decodePart(data, p, func(k index.KV, v []byte, ver store.Version, indirect bool) {
		cur.items = append(cur.items, loadedKV(k, v, ver, indirect))
	})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errCheckpointDamaged, p.name, err)
	}
	return nil
}

// next returns the next record of the merged input (ok false at its end).
func (cur *mergeCursor) next() (index.KV, bool, error) {
	for {
		for cur.at == len(cur.items) && cur.part < len(cur.base) {
			cur.part++
			if err := cur.loadPart(); err != nil {
				return index.KV{}, false, err
			}
		}
		haveBase, haveRun := cur.at < len(cur.items), cur.ri < len(cur.run.kv)
		if !haveBase && !haveRun {
			return index.KV{}, false, nil
		}
		c := 1
		switch {
		case !haveBase:
		case !haveRun:
			c = -1
		default:
			c = cur.items[cur.at].CompareKey(cur.run.kv[cur.ri])
		}
		if c < 0 {
			cur.at++
			return cur.items[cur.at-1], true, nil
		}
		if c == 0 {
			cur.at++ // the delta's record replaces the base's
		}
		i := cur.ri
		cur.ri++
		if !cur.run.tombstone(i) {
			return cur.run.kv[i], true, nil
		}
	}
}

// writeMergePart writes the merge's next part: the merged input's
// records from where the last part ended, up to CheckpointPartBytes.
func (mg *merger) writeMergePart(m *pendingMerge) error {
	db := mg.db
	seq := len(m.parts)
	var start []byte
	if seq > 0 {
		start = m.parts[seq-1].end
	}
	cur, err := mg.newMergeCursor(m, start)
	if err != nil {
		return err
	}
	var end []byte
	var count uint64
	last := true
	size, err := db.ckpts.writeCkptFile(partName(m.v0, seq), func(wr io.Writer) error {
		w := newPartWriter(wr, m.v0, seq, m.v0, start)
		for {
			kv, ok, err := cur.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if w.bytes >= db.opts.CheckpointPartBytes {
				end, last = kv.AppendKey(nil), false
				break
			}
			w.add(kv, kv.Value(), kv.Version(), kv.Indirect())
		}
		count = w.count
		return w.finish(end, last)
	})
	if err != nil {
		return err
	}
	m.parts = append(m.parts, partMeta{name: partName(m.v0, seq), v0: m.v0, seq: seq, version: m.v0,
		start: start, end: end, last: last, count: count, size: size})
	return nil
}

// linkMerge makes the merged base, durable on disk, the chain's base: the
// deltas after it stay on it, the old chain becomes the fallback, the log
// is truncated before v0 + 1 and the chain before the old one removed.
// A chain that moved on to another base meanwhile (a snapshot base)
// abandons the merge.
func (mg *merger) linkMerge(m *pendingMerge) error {
	db := mg.db
	mg.merging = nil
	c := db.chain
	if c == nil || c.base.v0 != m.input.base.v0 || !c.hasLink(m.v0) {
		return nil // its parts go with the next link's clean-up
	}
	if err := fault.Inject(fault.CkptMergeLinkBefore); err != nil {
		return err
	}
	next := &ckptChain{base: generation{v0: m.v0, parts: m.parts}, exact: c.exact}
	for _, d := range c.deltas {
		if d.v > m.v0 {
			next.deltas = append(next.deltas, d)
		}
	}
	db.chain, db.fallback = next, c
	db.ckptSize.Store(next.bytes())
	db.ckpt.merges.Add(1)
	db.ckptLinks++
	if err := db.ckpts.logMerge(uint64(m.v0)); err != nil {
		return fmt.Errorf("engine: record merging into %s in the log: %w", genName(m.v0), err)
	}
	db.opts.Logger.Info("engine: deltas merged into a new base", "index", uint64(m.v0), "bytes", next.base.bytes(),
		"parts", len(m.parts), "deltas_merged", len(m.input.deltas), "duration", time.Since(m.began))
	if err := fault.Inject(fault.CkptMergeTruncateBefore); err != nil {
		return err
	}
	if err := db.log.TruncateFront(uint64(m.v0) + 1); err != nil {
		return fmt.Errorf("engine: truncate log after merging into %s: %w", genName(m.v0), err)
	}
	// The log kept from here on counts towards the next merge, as the
	// log on disk, whatever lives it spans.
	db.baseLogBytes.Store(db.loggedBytes.Load() - walDiskBytes(db.fs, filepath.Join(db.dir, walDirName)))
	if err := db.ckpts.removeCheckpointFilesBut(mg.keptFiles(), m.v0); err != nil {
		return err
	}
	return db.gc.removeRetired()
}

// hasLink reports whether v is one of the chain's links.
func (c *ckptChain) hasLink(v store.Version) bool {
	if c.base.v0 == v {
		return true
	}
	for _, d := range c.deltas {
		if d.v == v {
			return true
		}
	}
	return false
}

// keptFiles names the checkpoint files to keep: the chain's, the
// fallback's and the merge in progress's. Caller holds ckptMu.
func (mg *merger) keptFiles() map[string]bool {
	db := mg.db
	keep := map[string]bool{}
	for _, c := range []*ckptChain{db.chain, db.fallback} {
		if c != nil {
			for _, name := range c.files() {
				keep[name] = true
			}
		}
	}
	if m := mg.merging; m != nil {
		for _, p := range m.parts {
			keep[p.name] = true
		}
	}
	return keep
}
