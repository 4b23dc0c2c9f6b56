package engine

import (
	"context"

	"github.com/idemdb/idem/index"
	"github.com/idemdb/idem/store"
)

// Get implements Store.
func (db *DB) Get(_ context.Context, key []byte) (store.Item, error) {
	if db.closed.Load() {
		return store.Item{}, store.ErrClosed
	}
	db.treeMu.RLock()
	it, ok := db.tree.Get(index.Probe(key))
	db.treeMu.RUnlock()
	if !ok {
		return store.Item{}, store.ErrNotFound
	}
	v, err := db.valueOf(it)
	if err != nil {
		return store.Item{}, err
	}
	// The key asked for, not the item's: a packed key (index/packedkey.go)
	// would be made raw again in an allocation of its own.
	return store.Item{Key: key, Value: v, Version: store.Version(it.Version())}, nil
}

// Limits implements store.Store: the local store's bounds are the most
// any store accepts.
func (db *DB) Limits() store.Limits { return store.MaxLimits }

// Capabilities implements store.Store: one log under every batch.
func (db *DB) Capabilities() store.Capabilities {
	return store.Capabilities{Chain: db, HotScan: db, Latest: db}
}

// Scan implements Store.
func (db *DB) Scan(_ context.Context, start, end []byte, limit int) ([]store.Item, error) {
	if db.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := store.CheckScan(limit, db.Limits()); err != nil {
		return nil, err
	}
	found := make([]index.KV, 0, min(limit, 64))
	collect := func(it index.KV) bool {
		found = append(found, it)
		return len(found) < limit
	}
	db.treeMu.RLock()
	if end == nil {
		db.tree.Ascend(index.Probe(start), collect)
	} else {
		db.tree.AscendRange(index.Probe(start), index.Probe(end), collect)
	}
	db.treeMu.RUnlock()
	// Values in the value log are read outside the tree lock: a pread
	// must not hold up the writers' publication.
	out := make([]store.Item, 0, len(found))
	for _, it := range found {
		item, err := db.item(it)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// Snapshot is a consistent, read-only view of the store at one version. It
// costs O(1) to take and stays valid while the store moves on.
type Snapshot struct {
	tree    *index.Ordered[index.KV]
	version store.Version
	db      *DB // reads values in the value log
}

// Snapshot takes a snapshot of the durable state.
func (db *DB) Snapshot() *Snapshot {
	db.treeMu.Lock()
	defer db.treeMu.Unlock()
	return &Snapshot{tree: db.tree.Clone(), version: db.applied, db: db}
}

// Version is the last batch included in the snapshot.
func (s *Snapshot) Version() store.Version { return s.version }

// Len is the number of keys.
func (s *Snapshot) Len() int { return s.tree.Len() }

// Ascend calls fn for each item with key ≥ start, in order, until fn
// returns false or a value cannot be read (the error returned). A value in
// the value log is read as of now: the collector may have moved it, never
// changed it.
func (s *Snapshot) Ascend(start []byte, fn func(store.Item) bool) error {
	var err error
	s.tree.Ascend(index.Probe(start), func(it index.KV) bool {
		var item store.Item
		if item, err = s.db.item(it); err != nil {
			return false
		}
		return fn(item)
	})
	return err
}
