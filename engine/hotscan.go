package engine

import (
	"context"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// ScanHot implements store.HotScanner.
func (db *DB) ScanHot(_ context.Context, start, end []byte, limit int) ([]store.Item, int, []byte, error) {
	if db.closed.Load() {
		return nil, 0, nil, store.ErrClosed
	}
	if err := store.CheckScan(limit, db.Limits()); err != nil {
		return nil, 0, nil, err
	}
	var hot []store.Item
	cold, walked := 0, 0
	var last index.KV
	collect := func(it index.KV) bool {
		if it.Indirect() {
			cold++
		} else {
			hot = append(hot, store.Item{Key: it.Key(), Value: it.Value(), Version: store.Version(it.Version())})
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
