package engine

import (
	"fmt"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// The value-log collector.
//
// A record stops being live when the tree stops pointing at it: its key
// deleted (the receipt cleaner's fenced deletes) or rewritten. The DB
// keeps the live bytes of each segment (vlogLive), so the collector knows
// each segment's live fraction without reading it. After a checkpoint it
// takes the segments whose fraction fell below ValueLogGCLiveRatio — at
// most vlogGCSegmentsMax of them, the emptiest first — copies their live
// records to the active segment, makes the copies durable, and points the
// tree at them. The collector only moves bytes: a key's value and version
// never change, so it needs no fence and conflicts with no writer (an item
// written meanwhile keeps its new value, and the copy is garbage).
//
// A segment nothing in the tree points at is retired, and removed only
// once two more checkpoint links exist: the checkpoint files — the newest
// chain and the one kept as its fallback (ckptchain.go) — and the log after
// them must not lead to it. A moved key is noted dirty, so the next link
// records its new pointer; the link after that makes it the fallback. Since
// a lost delta falls back to its base and the log (which does not record
// moves), the segment also waits until the base and the fallback chain
// reach past the link that recorded the moves (chainsPast). No
// pass runs while a base checkpoint is pending: its parts come from
// several snapshots, and one taken before a move would keep a pointer the
// log cannot correct.

// collector runs the value log's collection and removes the segments it
// retired once the checkpoint links no longer lead to them.
type collector struct {
	db      *DB
	retired []retiredSeg    // segments nothing in the tree points at; under ckptMu
	held    map[uint32]bool // segments left alone this life: damaged records, a resumed base's; under ckptMu
	adopted bool            // adoptSpills ran (vlog_adopt.go); under ckptMu
}

func newCollector(db *DB) *collector {
	return &collector{db: db, held: map[uint32]bool{}}
}

// vlogGCSegmentsMax bounds the segments one pass collects: a pass reads
// and rewrites at most this many segments' live bytes.
const vlogGCSegmentsMax = 2

// retiredSeg is a segment waiting for the links that stop leading to it.
type retiredSeg struct {
	id    uint32
	at    uint64        // ckptLinks when it was retired
	after store.Version // the chain's tip when it was retired
}

// vlogRemoveAfterLinks is how many links must follow a retirement.
const vlogRemoveAfterLinks = 2

// vlogMove is one live record the collector copied.
type vlogMove struct {
	key      []byte
	version  uint64
	old, new vlogPtr
}

// retireUnreferenced retires, at open, the segments the loaded store does
// not point at (a crashed collector's victims, a failed checkpoint's).
//
// With a base to resume it retires none and holds them all for this life:
// the resumed base's durable parts point into segments the tree, loaded
// from the chain before it and the log, does not, and once linked the
// base, and merges of it, would lead there (a lost first delta on it fell
// back to a part whose segment was gone:
// TestValueLog_AResumedBaseKeepsTheSegmentsItsEarlierPartsPointAt). The
// next open loads that base and counts its pointers.
func (gc *collector) retireUnreferenced() {
	db := gc.db
	if db.ckptPending != nil {
		for _, id := range db.vlog.ids() {
			gc.held[id] = true
		}
		return
	}
	for _, id := range db.vlog.ids() {
		if db.vlogLive[id] <= 0 {
			gc.retired = append(gc.retired, retiredSeg{id: id, at: db.ckptLinks, after: store.Version(db.lastCkptIndex.Load())})
		}
	}
}

// removeRetired removes the retired segments enough links have left
// behind. Caller holds ckptMu.
func (gc *collector) removeRetired() error {
	db := gc.db
	kept := gc.retired[:0]
	var first error
	for _, r := range gc.retired {
		if db.ckptLinks < r.at+vlogRemoveAfterLinks || !gc.chainsPast(r.after) {
			kept = append(kept, r)
			continue
		}
		if err := db.vlog.remove(r.id); err != nil {
			if first == nil {
				first = fmt.Errorf("engine: remove value-log segment %s: %w", vlogSegName(r.id), err)
			}
			kept = append(kept, r)
			continue
		}
		db.treeMu.Lock()
		delete(db.vlogLive, r.id)
		db.treeMu.Unlock()
		db.vlogStats.collected.Add(1)
	}
	gc.retired = kept
	return first
}

// chainsPast reports whether every way an open may take to the present
// passes the link after v, which records the moves made at v: the base
// (a lost delta falls back to it and the log, which does not record
// moves) and the fallback chain (a lost base falls back to it). Caller
// holds ckptMu.
func (gc *collector) chainsPast(v store.Version) bool {
	db := gc.db
	if db.chain == nil || db.chain.base.v0 <= v {
		return false
	}
	return db.fallback == nil || db.fallback.tip() > v
}

// collectValueLog runs one collector pass (see above). Caller holds
// ckptMu.
func (gc *collector) collectValueLog() error {
	db := gc.db
	if db.ckptPending != nil {
		return nil
	}
	for _, id := range gc.gcVictims() {
		if err := gc.collectSegment(id); err != nil {
			return err
		}
	}
	return nil
}

// gcVictims picks the segments to collect, emptiest first.
func (gc *collector) gcVictims() []uint32 {
	db := gc.db
	retired := map[uint32]bool{}
	for _, r := range gc.retired {
		retired[r.id] = true
	}
	type cand struct {
		id    uint32
		ratio float64
	}
	var cands []cand
	db.treeMu.RLock()
	for _, id := range db.vlog.ids() {
		if retired[id] || gc.held[id] || (db.vlog.active != nil && id == db.vlog.active.id) {
			continue
		}
		size := db.vlog.size(id)
		if size == 0 {
			continue
		}
		if r := float64(db.vlogLive[id]) / float64(size); r < db.opts.ValueLogGCLiveRatio {
			cands = append(cands, cand{id, r})
		}
	}
	db.treeMu.RUnlock()
	for i := 1; i < len(cands); i++ { // a handful: insertion sort
		for j := i; j > 0 && cands[j].ratio < cands[j-1].ratio; j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	out := make([]uint32, 0, vlogGCSegmentsMax)
	for _, c := range cands[:min(len(cands), vlogGCSegmentsMax)] {
		out = append(out, c.id)
	}
	return out
}

// collectSegment moves segment id's live records and retires it.
func (gc *collector) collectSegment(id uint32) error {
	db := gc.db
	var moves []vlogMove
	var aerr error
	if _, err := db.vlog.records(id, func(ptr vlogPtr, key, value []byte) bool {
		db.treeMu.RLock()
		it, ok := db.tree.Get(index.Probe(key))
		db.treeMu.RUnlock()
		if !ok || !it.Indirect() || !isPtr(it.Value(), ptr) {
			return true // dead
		}
		np, err := db.vlog.append(key, value)
		if err != nil {
			aerr = err
			return false
		}
		moves = append(moves, vlogMove{key: append([]byte(nil), key...), version: it.Version(), old: ptr, new: np})
		return true
	}); err != nil {
		aerr = err
	}
	if aerr == nil {
		aerr = db.vlog.sync()
	}
	if aerr == nil {
		aerr = fault.Inject(fault.VlogGCBefore)
	}
	if aerr != nil {
		db.vlog.discardUnsynced()
		return fmt.Errorf("engine: collect value-log segment %s: %w", vlogSegName(id), aerr)
	}
	gc.installMoves(moves)
	db.treeMu.RLock()
	left := db.vlogLive[id]
	db.treeMu.RUnlock()
	if left > 0 {
		// Records the tree points at that did not read back: damage,
		// which a read reports and idemctl check names. The segment stays.
		// Later passes leave it alone: nothing more would move.
		db.opts.Logger.Error("engine: value-log segment still in use after collection (unreadable records?); it stays until the store is reopened",
			"segment", vlogSegName(id), "live_bytes", left)
		gc.held[id] = true
		return nil
	}
	gc.retired = append(gc.retired, retiredSeg{id: id, at: db.ckptLinks, after: store.Version(db.lastCkptIndex.Load())})
	return nil
}

// installMoves points the tree at the copies, in bounded batches, and
// notes each moved key dirty so that the next checkpoint link records it.
func (gc *collector) installMoves(moves []vlogMove) {
	db := gc.db
	for len(moves) > 0 {
		n := min(len(moves), vlogSwapBatch)
		db.treeMu.Lock()
		for _, m := range moves[:n] {
			it, ok := db.tree.Get(index.Probe(m.key))
			if !ok || !it.Indirect() || it.Version() != m.version || !isPtr(it.Value(), m.old) {
				continue
			}
			db.tree.Put(m.new.item(m.key, m.version))
			db.vlogLive[m.old.seg] -= int64(m.old.n)
			db.vlogLive[m.new.seg] += int64(m.new.n)
			db.vlogStats.relocated.Add(uint64(m.new.n))
			db.dirty.note(m.key, true)
		}
		db.treeMu.Unlock()
		moves = moves[n:]
	}
}
