package engine

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/idemdb/idem/index"
)

// Adopting what interrupted checkpoints spilled.
//
// A checkpoint spills the cold values of the file it writes to the value
// log and syncs them before the file; a process killed after that, before
// the file is linked, leaves the records with no pointer to them, and the
// values still in RAM (the log replays them). The next life's checkpoint
// would spill them all again: in a crash loop whose lives are shorter
// than a delta, every life re-spilled everything dirty since the chain's
// tip, the value log grew with the square of the lives (memfs:
// TestValueLog_ACrashLoopOfInterruptedDeltasAdoptsTheirSpills), and no
// delta completed, so the log an open replays grew too (docs/engine.md,
// Bounded recovery). Before its first checkpoint, each life therefore
// reads the segments that hold bytes the tree does not point at, newest
// first, and points every item still in RAM at a record holding its key
// and exactly its value — the spill the crash cut off — once that segment
// is synced. The value is the same bytes, so nothing a reader sees
// changes; the checkpoint then writes the pointer it already has. A
// delta's values, its costly half, thus carry over from life to life as a
// base's parts do, and only its file is written again.
//
// Adoption only adds pointers, into segments that exist; it never removes
// one, so no chain, fallback or log loses a record it may lead to.

// vlogAdoptBytesMax bounds the value-log bytes one life reads to adopt
// spills, newest segment first: an interrupted delta spilled the cold
// values of the log since the chain's tip, about two intervals of 64 MiB
// at the defaults, into the newest segments.
const vlogAdoptBytesMax = 128 << 20

// adoptSpills adopts what interrupted checkpoints spilled, once per
// life, before the life's first spill. Caller holds ckptMu.
func (gc *collector) adoptSpills() error {
	if gc.adopted {
		return nil
	}
	gc.adopted = true
	db := gc.db
	budget := int64(vlogAdoptBytesMax)
	ids := db.vlog.ids()
	for _, id := range slices.Backward(ids) {
		size := db.vlog.size(id)
		db.treeMu.RLock()
		garbage := size - db.vlogLive[id]
		db.treeMu.RUnlock()
		if garbage <= 0 || (db.vlog.active != nil && id == db.vlog.active.id) {
			continue
		}
		if budget -= size; budget < 0 {
			break
		}
		found, err := gc.adoptable(id)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			continue
		}
		if err := db.vlog.syncSegment(id); err != nil {
			return fmt.Errorf("engine: sync value-log segment %s before adopting its records: %w", vlogSegName(id), err)
		}
		if n := db.installSpills(found); n > 0 {
			gc.unretire(id)
			db.vlogStats.adopted.Add(uint64(n))
		}
	}
	return nil
}

// adoptable lists segment id's records whose key the tree holds in RAM
// with exactly the record's value, and that a checkpoint would spill.
func (gc *collector) adoptable(id uint32) ([]vlogSpill, error) {
	db := gc.db
	var found []vlogSpill
	_, err := db.vlog.records(id, func(ptr vlogPtr, key, value []byte) bool {
		db.treeMu.RLock()
		it, ok := db.tree.Get(index.Probe(key))
		db.treeMu.RUnlock()
		if ok && !it.Indirect() && db.cold(key, it.Value()) && bytes.Equal(it.Value(), value) {
			found = append(found, vlogSpill{item: it, ptr: ptr})
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("engine: read value-log segment %s to adopt its records: %w", vlogSegName(id), err)
	}
	return found, nil
}

// unretire keeps segment id: the tree points into it again.
func (gc *collector) unretire(id uint32) {
	gc.retired = slices.DeleteFunc(gc.retired, func(r retiredSeg) bool { return r.id == id })
}
