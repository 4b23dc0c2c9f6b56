package engine

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// A load of a delta (an open's, and a merge's of the deltas it did not
// load) takes its records' order on its CRC's word, as an open takes a
// part's (partload.go): its writer refused a key not above the one
// before. decodeDelta, which proves every record, stays for idemctl check
// and inspection.

// loadDeltaRecords appends d's records to run: puts as items aliasing
// data, deletions as key-only items marked tombstones.
func loadDeltaRecords(data []byte, d deltaMeta, run *loadRun) error {
	recs, err := deltaBody(data, d)
	if err != nil {
		return err
	}
	at := 0
	for i := uint64(0); i < d.count; i++ {
		b := recs[at:]
		klen, packed, vcode, n, err := recordHead(b, d.packed)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		raw := klen
		if packed {
			raw += 16
		}
		if raw > store.KeyBytesMax || klen > uint64(len(b)-n) {
			return fmt.Errorf("record %d: bad key", i)
		}
		if vcode == deltaTombstone {
			run.add(index.StoredProbe(b[n:n+int(klen)], packed), true)
			at += n + int(klen)
			continue
		}
		kv, size, err := recordItem(b, n, klen, vcode-deltaValueOffset, packed, d.ptrs)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		run.add(kv, false)
		at += size
	}
	if at != len(recs) {
		return fmt.Errorf("%d trailing bytes", len(recs)-at)
	}
	return nil
}

// loadDelta validates the delta d and returns its records, which alias
// the file's image as a part's do.
func (db *DB) loadDelta(d deltaMeta) (loadRun, error) { return db.loadDeltaInto(d, nil, false) }

// loadDeltaInto is loadDelta appending the records to items, an empty
// slice with room for d's count (nil: allocated here), the file mapped if
// mapIt (an open's, never a merge's: a mapping is never unmapped, and a
// merge's input is garbage once the merge is written).
func (db *DB) loadDeltaInto(d deltaMeta, items []index.KV, mapIt bool) (loadRun, error) {
	data, err := db.readImage(d.name, d.size, mapIt)
	if errors.Is(err, fs.ErrNotExist) {
		return loadRun{}, fmt.Errorf("%w: %s vanished", errCheckpointDamaged, d.name)
	}
	if err != nil {
		return loadRun{}, err
	}
	if items == nil {
		items = make([]index.KV, 0, min(d.count, loadPreallocMax))
	}
	run := loadRun{kv: items}
	if err := loadDeltaRecords(data, d, &run); err != nil {
		return loadRun{}, fmt.Errorf("%w: %s: %w", errCheckpointDamaged, d.name, err)
	}
	return run, nil
}
