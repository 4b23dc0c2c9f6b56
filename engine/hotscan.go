package engine

import (
	"context"
	"fmt"

	"github.com/idemdb/idem/index"
)

// ScanHot implements store.HotScanner.
func (db *DB) ScanHot(_ context.Context, start, end []byte, limit int) ([]Item, int, []byte, error) {
	if db.closed.Load() {
		return nil, 0, nil, ErrClosed
	}
	if err := store.CheckScan(limit, db.Limits()); err != nil {
		return nil, 0, nil, err
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
