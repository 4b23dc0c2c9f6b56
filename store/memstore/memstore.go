// Package memstore is the reference store.Store: every rule of the
// contract, in memory, with nothing else — no log, no durability, no
// pending writes, one mutex. Like raft's MemoryStorage it exists so that
// the contract has an implementation simple enough to be obviously right:
// the conformance suite (store/storetest) holds the real stores to it,
// and the layers above the store run their tests on it as well as on
// engine.DB.
package memstore

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/google/btree"

	"github.com/idemdb/idem/store"
)

// Store is an in-memory store.Store. Its zero value is not usable; call
// New.
type Store struct {
	limits  store.Limits
	mu      sync.RWMutex
	items   *btree.BTreeG[store.Item]
	version store.Version // of the last applied batch
	closed  bool
}

// treeDegree is the B-tree's degree: any value works; this one keeps nodes
// about a cache line of pointers wide.
const treeDegree = 16

// defaultLimits are engine.DB's (store.MaxLimits), so that code tested
// on memstore sizes its batches as it will on the local store.
var defaultLimits = store.MaxLimits

// New returns an empty store with defaultLimits.
func New() *Store { return NewWithLimits(defaultLimits) }

// NewWithLimits returns an empty store that refuses what goes beyond l
// (each bound at most store.MaxLimits'): tests use it to hold the layers
// above to a replicated store's much smaller limits.
func NewWithLimits(l store.Limits) *Store {
	return &Store{limits: l.Within(), items: btree.NewG(treeDegree, func(a, b store.Item) bool { return bytes.Compare(a.Key, b.Key) < 0 })}
}

// Limits implements store.Store.
func (s *Store) Limits() store.Limits { return s.limits }

// Capabilities implements store.Store: the contract and nothing more.
func (s *Store) Capabilities() store.Capabilities { return store.Capabilities{} }

// Close makes every later call fail with store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	return nil
}

// Get implements store.Store.
func (s *Store) Get(_ context.Context, key []byte) (store.Item, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Item{}, store.ErrClosed
	}
	it, ok := s.items.Get(store.Item{Key: key})
	if !ok {
		return store.Item{}, store.ErrNotFound
	}
	return it, nil
}

// Scan implements store.Store. It is a point-in-time view: it holds the
// read lock throughout, so no batch lands in the middle of it.
func (s *Store) Scan(_ context.Context, start, end []byte, limit int) ([]store.Item, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if err := store.CheckScan(limit, s.limits); err != nil {
		return nil, err
	}
	var out []store.Item
	collect := func(it store.Item) bool {
		out = append(out, it)
		return len(out) < limit
	}
	if end == nil {
		s.items.AscendGreaterOrEqual(store.Item{Key: start}, collect)
	} else {
		s.items.AscendRange(store.Item{Key: start}, store.Item{Key: end}, collect)
	}
	return out, nil
}

// Apply implements store.Store: the batch's conditions are checked in
// order against the current state, the first that fails is reported, and
// otherwise every op lands at one new version. It never answers
// ErrAmbiguous or ErrFailStopped: nothing here can fail half-way.
func (s *Store) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if err := store.Check(b, s.limits); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	for _, c := range b.Conds {
		var found store.Version
		if it, ok := s.items.Get(store.Item{Key: c.Key}); ok {
			found = it.Version
		}
		if !c.HoldsAt(found) {
			return 0, store.Failed(c, found)
		}
	}
	s.version++
	for _, op := range b.Ops {
		key := slices.Clone(op.Key)
		if op.Delete {
			s.items.Delete(store.Item{Key: key})
			continue
		}
		// A nil value is stored as empty, as engine.DB stores it.
		s.items.ReplaceOrInsert(store.Item{Key: key, Value: append([]byte{}, op.Value...), Version: s.version})
	}
	return s.version, nil
}

var _ store.Store = (*Store)(nil)
