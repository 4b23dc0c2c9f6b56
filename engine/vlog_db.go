package engine

import (
	"fmt"
	"sync/atomic"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// The DB's side of the value log (vlog.go): which values leave RAM, the
// pointers that replace them, and what the tree still points at.

// vlogSpill is a value a checkpoint wrote to the value log: once the log
// is durable, the tree's item for its key — if still at its version —
// becomes the pointer. It holds the snapshot's item, whose bytes give the
// key and the version: 32 bytes in a list as long as the checkpoint's cold
// values.
type vlogSpill struct {
	item index.KV
	ptr  vlogPtr
}

// spillList collects one checkpoint file's spills in chunks of
// vlogSwapBatch, the unit installSpills swaps in. One growing slice was
// copied over and over as it grew: for a delta of 310 000 cold values
// (BenchmarkDiskKeyed at 60 000 requests) its growth was a quarter of
// checkpointDelta's CPU, most of it the copies' memmove, and it allocated
// 143 MB for 15 MB of spills.
type spillList struct {
	full [][]vlogSpill
	cur  []vlogSpill
}

func (l *spillList) add(s vlogSpill) {
	if len(l.cur) == cap(l.cur) && cap(l.cur) >= vlogSwapBatch {
		l.full = append(l.full, l.cur)
		l.cur = make([]vlogSpill, 0, vlogSwapBatch)
	}
	l.cur = append(l.cur, s)
}

func (l *spillList) empty() bool { return len(l.full) == 0 && len(l.cur) == 0 }

// install makes every spill's item a pointer (installSpills), in order.
func (l *spillList) install(db *DB) {
	for _, c := range l.full {
		db.installSpills(c)
	}
	db.installSpills(l.cur)
}

// vlogSwapBatch bounds the items swapped for pointers under one hold of
// the tree lock, so that a large checkpoint never stalls the writers'
// publication for long.
const vlogSwapBatch = 4096

// cold reports whether a value should live in the value log.
func (db *DB) cold(key, value []byte) bool {
	return db.opts.ColdValue != nil && len(value) > vlogPtrLen && db.opts.ColdValue(key, value)
}

// stored returns what a checkpoint record holds for it: the value, or a
// pointer — an existing one, or a new one to a value spilled now.
func (db *DB) stored(it index.KV, spills *spillList, scratch []byte) ([]byte, bool, error) {
	val := it.Value()
	if it.Indirect() {
		return val, true, nil
	}
	key := it.Key()
	if !db.cold(key, val) {
		return val, false, nil
	}
	ptr, err := db.vlog.append(key, val)
	if err != nil {
		return nil, false, fmt.Errorf("engine: append to the value log: %w", err)
	}
	db.vlogStats.spilled.Add(uint64(ptr.n))
	spills.add(vlogSpill{item: it, ptr: ptr})
	return ptr.encode(scratch[:0]), true, nil
}

// installSpills makes durable spilled values' items pointers and returns
// the record bytes they point at. An item written since the snapshot keeps
// its new value; its spilled record is garbage the collector reclaims.
func (db *DB) installSpills(spills []vlogSpill) (installed int64) {
	for len(spills) > 0 {
		n := min(len(spills), vlogSwapBatch)
		db.treeMu.Lock()
		for _, s := range spills[:n] {
			old, plen, ok := db.swapIn(s)
			if !ok {
				continue
			}
			klen := old.KeyLen()
			db.liveBytes += recordBytes(klen, plen) - recordBytes(klen, len(old.Value()))
			db.vlogLive[s.ptr.seg] += int64(s.ptr.n)
			installed += int64(s.ptr.n)
		}
		db.liveNow.Store(db.liveBytes)
		db.treeMu.Unlock()
		spills = spills[n:]
	}
	return installed
}

// swapIn puts s's pointer in place of its item if the tree still holds
// the value spilled (the key at the spilled item's version, in RAM), and returns the item
// replaced and the pointer's length. The pointer is put first and the old
// item put back if it was written or deleted since the snapshot: one
// descent of the tree per spill, not a Get and a Put, where most spilled
// keys are not rewritten while their checkpoint is written (a key that is
// costs two descents and a pointer item thrown away). Caller holds treeMu.
func (db *DB) swapIn(s vlogSpill) (old index.KV, plen int, ok bool) {
	key, version := s.item.Key(), s.item.Version()
	item := s.ptr.item(key, version)
	old, had := db.tree.Put(item)
	switch {
	case !had:
		db.tree.Delete(index.Probe(key))
	case old.Version() != version || old.Indirect():
		db.tree.Put(old)
	default:
		return old, len(item.Value()), true
	}
	return index.KV{}, 0, false
}

// unlive notes that the tree no longer points at old's value-log record.
// Caller holds treeMu (or owns the tree).
func unlive(live map[uint32]int64, old index.KV) {
	if !old.Indirect() {
		return
	}
	if ptr, err := decodeVlogPtr(old.Value()); err == nil {
		live[ptr.seg] -= int64(ptr.n)
	}
}

// relive notes that the tree points at it's value-log record.
func relive(live map[uint32]int64, it index.KV) {
	if !it.Indirect() {
		return
	}
	if ptr, err := decodeVlogPtr(it.Value()); err == nil {
		live[ptr.seg] += int64(ptr.n)
	}
}

// vlogReadTries bounds the reads of one key's value: a read that finds its
// segment gone raced the collector (a reader holding a pointer across two
// checkpoint links), and the tree then points elsewhere.
const vlogReadTries = 3

// valueOf returns it's value: its own bytes, or read from the value log.
// A failed read is retried on what the tree holds now, only if that is
// another place; anything else is the failure (never ErrNotFound, which
// a Scan could not tell from its own result).
func (db *DB) valueOf(it index.KV) ([]byte, error) {
	for try := 1; it.Indirect(); try++ {
		ptr, err := decodeVlogPtr(it.Value())
		if err != nil {
			return nil, err
		}
		v, err := db.vlog.read(it.Key(), ptr)
		if err == nil || try == vlogReadTries {
			return v, err
		}
		db.treeMu.RLock()
		again, ok := db.tree.Get(it)
		db.treeMu.RUnlock()
		if !ok || (again.Indirect() && samePtr(again.Value(), it.Value())) {
			return nil, err
		}
		it = again
	}
	return it.Value(), nil
}

// item turns a tree item into an Item, its value read if it is elsewhere.
func (db *DB) item(it index.KV) (store.Item, error) {
	v, err := db.valueOf(it)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: it.Key(), Value: v, Version: store.Version(it.Version())}, nil
}

// vlogCounters are ValueLogStats' counters.
type vlogCounters struct {
	spilled, relocated, collected, adopted atomic.Uint64
}

// ValueLogStats say what the value log holds and what it cost.
type ValueLogStats struct {
	Segments int
	// Bytes is the segments' size on disk; Live the bytes of records the
	// store still points at.
	Bytes, Live int64
	// Spilled counts record bytes checkpoints moved out of RAM since
	// open; Relocated those the collector copied to a new segment
	// (write amplification = (Spilled + Relocated) / Spilled).
	Spilled, Relocated uint64
	// Collected counts the segments the collector removed since open.
	Collected uint64
	// Adopted counts record bytes an interrupted checkpoint had spilled
	// that this process pointed its items at instead of spilling them
	// again (vlog_adopt.go).
	Adopted uint64
}

func (db *DB) valueLogStats() ValueLogStats {
	s := ValueLogStats{Spilled: db.vlogStats.spilled.Load(), Relocated: db.vlogStats.relocated.Load(), Collected: db.vlogStats.collected.Load(),
		Adopted: db.vlogStats.adopted.Load()}
	for _, id := range db.vlog.ids() {
		s.Segments++
		s.Bytes += db.vlog.size(id)
	}
	db.treeMu.RLock()
	for _, n := range db.vlogLive {
		s.Live += n
	}
	db.treeMu.RUnlock()
	return s
}
