package engine

import (
	"context"
	"fmt"

	"github.com/idemdb/idem/index"
)

// HotScanner is implemented by stores that keep some values in a value
// log (the local engine, Options.ColdValue). ScanHot is Scan without
// reading those values: a walk that needs only what is in RAM — a count by
// state, where the host's ColdValue already says what a cold value is —
// then costs no pread per key, and no damage on disk can fail it. An
// optimisation, like MultiGetter: Scan works on every store.
type HotScanner interface {
	// ScanHot walks at most limit keys of [start, end) as Scan does, but
	// reads no value from the value log: hot holds the other keys' items,
	// in order, and cold counts the keys passed over. last is the last key
	// walked when limit were, nil when the range ended first.
	ScanHot(ctx context.Context, start, end []byte, limit int) (hot []Item, cold int, last []byte, err error)
}

// ScanHot implements HotScanner.
func (db *DB) ScanHot(_ context.Context, start, end []byte, limit int) ([]Item, int, []byte, error) {
	if db.closed.Load() {
		return nil, 0, nil, ErrClosed
	}
	if limit <= 0 || limit > ScanLimitMax {
		return nil, 0, nil, fmt.Errorf("%w: scan limit %d (1..%d)", ErrInvalidScan, limit, ScanLimitMax)
	}
	var hot []Item
	cold, walked := 0, 0
	var last index.KV
	collect := func(it index.KV) bool {
		if it.Indirect() {
			cold++
		} else {
			hot = append(hot, Item{Key: it.Key(), Value: it.Value(), Version: Version(it.Version)})
		}
		walked++
		last = it
		return walked < limit
	}
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	if end == nil {
		db.tree.Ascend(index.Probe(start), collect)
	} else {
		db.tree.AscendRange(index.Probe(start), index.Probe(end), collect)
	}
	if walked < limit {
		return hot, cold, nil, nil
	}
	return hot, cold, last.Key(), nil
}
