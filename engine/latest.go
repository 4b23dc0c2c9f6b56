package engine

import (
	"context"
	"slices"

	"github.com/idemdb/idem/store"
)

// GetLatest implements store.LatestReader.
func (db *DB) GetLatest(ctx context.Context, key []byte) (store.Item, error) {
	if db.closed.Load() {
		return store.Item{}, store.ErrClosed
	}
	db.mu.Lock()
	p, ok := db.pending[unsafeString(key)]
	db.mu.Unlock()
	if !ok {
		// Not pending: either durable in the tree already (onDurable
		// installs a write before it leaves pending) or never written.
		// A write sequenced from now on is newer than what Get returns,
		// and the condition on the version read is what catches it.
		return db.Get(ctx, key)
	}
	if p.deleted {
		return store.Item{}, store.ErrNotFound
	}
	// p.value is the engine's own copy (ownOps), never changed: shared
	// with the tree once installed, as Get's values are.
	return store.Item{Key: slices.Clone(key), Value: p.value, Version: p.version}, nil
}
