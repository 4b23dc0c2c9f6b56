package engine

import (
	"context"
	"slices"
)

// LatestReader is implemented by stores that can read a key's newest
// sequenced write before it is durable (the local engine's pending
// writes). It exists for one use (issue 37, many increments of one
// document per fsync): staging a write that is conditioned on the version
// read and is itself sequenced after it. The log is one sequence and a
// crash keeps a prefix of it, so such a write is never durable without
// the write it read, and its caller answers only once it is durable.
// Nothing read so may reach an answer, or a decision, that is not itself
// a write sequenced after it: Get stays the read for everything else.
type LatestReader interface {
	// GetLatest is Get over the durable state overlaid with the writes
	// sequenced and not yet durable: the newest version of key, or
	// ErrNotFound if its newest write deleted it (or none exists).
	GetLatest(ctx context.Context, key []byte) (Item, error)
}

// GetLatest implements LatestReader.
func (db *DB) GetLatest(ctx context.Context, key []byte) (Item, error) {
	if db.closed.Load() {
		return Item{}, ErrClosed
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
		return Item{}, ErrNotFound
	}
	// p.value is the engine's own copy (ownOps), never changed: shared
	// with the tree once installed, as Get's values are.
	return Item{Key: slices.Clone(key), Value: p.value, Version: p.version}, nil
}

// OnSequenced returns ctx carrying fn, which Apply and ApplyChain on the
// local engine call once the batch (chain) is sequenced — its conditions
// passed, its place in the log fixed — and before they wait for it to be
// durable. A caller that serializes writers of a document (receipt's
// document latches) can let the next one stage on this write, read
// through GetLatest, while this one waits for its fsync: both then share
// one group commit. fn must be quick and must not call the store.
func OnSequenced(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, sequencedKey{}, fn)
}

type sequencedKey struct{}

// sequenced calls ctx's OnSequenced function, if any.
func sequenced(ctx context.Context) {
	if fn, ok := ctx.Value(sequencedKey{}).(func()); ok {
		fn()
	}
}
