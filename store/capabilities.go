package store

import (
	"context"
	"errors"
)

// Capabilities is what a store offers beyond the contract, declared as data
// rather than found by type assertion, so that a wrapper says what it
// forwards and what it hides. Each is an optimisation: a nil field means
// the store lacks it, and its caller takes the plain path (Apply batch by
// batch, Get per key, Scan).
type Capabilities struct {
	// Chain: the store's batches share one log (the local engine).
	Chain Chainer
	// MultiGet: the store reads several keys in one round trip (etcd).
	MultiGet MultiGetter
	// HotScan: the store keeps some values out of RAM (the local engine's
	// value log) and can walk without reading them.
	HotScan HotScanner
	// Latest: the store sequences writes before they are durable and can
	// read the newest sequenced one (the local engine).
	Latest LatestReader
	// Space: the store says when it is near its space quota (etcd with a
	// space watcher), before it refuses writes (ErrNoSpace).
	Space SpaceReporter
}

// ChainLinksMax bounds the batches of one ApplyChain.
const ChainLinksMax = 8

// Chainer is offered by stores whose batches share one log, which lets a
// caller make several dependent batches durable with one wait. A store
// without it (a cluster-shared Store) is used batch by batch.
type Chainer interface {
	// ApplyChain sequences links back to back, each atomic with its own
	// version (returned in order), each link's conditions checked against
	// the writes of the links before it, and waits once for all of them.
	//
	// Sequencing is all or none: a failed condition in any link returns
	// *ConditionError and nothing is written. Durability follows log
	// order: a link is never durable without every link before it, though
	// a crash may keep only a prefix of the chain. Other errors are those of
	// Apply, and ErrAmbiguous covers every link.
	ApplyChain(ctx context.Context, links ...*Batch) ([]Version, error)
}

// MultiGetter is offered by stores that read several keys in one round
// trip and one point-in-time view (etcd: one read-only Txn). GetAll works
// on every store.
type MultiGetter interface {
	// GetMany returns one Item per key, in order; a missing key's Item has
	// its Key and Version 0. Errors are Get's.
	GetMany(ctx context.Context, keys ...[]byte) ([]Item, error)
}

// GetManyMax bounds the keys of one GetMany: a handful, read together on
// the hot path, never a scan.
const GetManyMax = 16

// GetAll reads keys through s's GetMany if it has one, else one Get each
// (then not one view: fine for keys that are read together only to save
// round trips). A missing key's Item has its Key and Version 0.
func GetAll(ctx context.Context, s Store, keys ...[]byte) ([]Item, error) {
	if len(keys) > GetManyMax {
		return nil, errors.New("store: GetAll of more than GetManyMax keys")
	}
	if m := s.Capabilities().MultiGet; m != nil {
		return m.GetMany(ctx, keys...)
	}
	out := make([]Item, len(keys))
	for i, k := range keys {
		it, err := s.Get(ctx, k)
		switch {
		case errors.Is(err, ErrNotFound):
			out[i] = Item{Key: k}
		case err != nil:
			return nil, err
		default:
			out[i] = it
		}
	}
	return out, nil
}

// HotScanner is offered by stores that keep some values in a value log
// (the local engine, its Options.ColdValue). ScanHot is Scan without
// reading those values: a walk that needs only what is in RAM — a count by
// state, where the host's ColdValue already says what a cold value is —
// then costs no pread per key, and no damage on disk can fail it.
type HotScanner interface {
	// ScanHot walks at most limit keys of [start, end) as Scan does, but
	// reads no value from the value log: hot holds the other keys' items,
	// in order, and cold counts the keys passed over. last is the last key
	// walked when limit were, nil when the range ended first.
	ScanHot(ctx context.Context, start, end []byte, limit int) (hot []Item, cold int, last []byte, err error)
}

// LatestReader is offered by stores that can read a key's newest
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

// SpaceReporter is offered by stores that watch their space quota. While
// SpaceFull, the layers above refuse new work (store_full) so that work
// already started finishes in the room left (docs/cluster.md).
type SpaceReporter interface {
	SpaceFull() bool
}

// OnSequenced returns ctx carrying fn, which a store with Latest calls
// from Apply and ApplyChain once the batch (chain) is sequenced — its
// conditions passed, its place in the log fixed — and before it waits for
// it to be durable. A caller that serializes writers of a document
// (receipt's document latches) can let the next one stage on this write,
// read through GetLatest, while this one waits for its fsync: both then
// share one group commit. fn must be quick and must not call the store.
// Other stores never call it.
func OnSequenced(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, sequencedKey{}, fn)
}

type sequencedKey struct{}

// Sequenced calls ctx's OnSequenced function, if any: the store's part.
func Sequenced(ctx context.Context) {
	if fn, ok := ctx.Value(sequencedKey{}).(func()); ok {
		fn()
	}
}
