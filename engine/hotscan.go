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
	// ScanHot is Scan, except that an item whose value lives in the value
	// log comes with a nil Value, and cold[i] true.
	ScanHot(ctx context.Context, start, end []byte, limit int) (items []Item, cold []bool, err error)
}

// ScanHot implements HotScanner.
func (db *DB) ScanHot(_ context.Context, start, end []byte, limit int) ([]Item, []bool, error) {
	if db.closed.Load() {
		return nil, nil, ErrClosed
	}
	if limit <= 0 || limit > ScanLimitMax {
		return nil, nil, fmt.Errorf("%w: scan limit %d (1..%d)", ErrInvalidScan, limit, ScanLimitMax)
	}
	items := make([]Item, 0, min(limit, 64))
	cold := make([]bool, 0, min(limit, 64))
	collect := func(it index.KV) bool {
		item := Item{Key: it.Key(), Version: Version(it.Version)}
		if !it.Indirect() {
			item.Value = it.Value()
		}
		items, cold = append(items, item), append(cold, it.Indirect())
		return len(items) < limit
	}
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	if end == nil {
		db.tree.Ascend(index.Probe(start), collect)
	} else {
		db.tree.AscendRange(index.Probe(start), index.Probe(end), collect)
	}
	return items, cold, nil
}
