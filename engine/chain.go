package engine

import (
	"context"
	"fmt"

	"github.com/idemdb/idem/store"
)

// chainLink is one link of a chain being sequenced (see apply).
type chainLink struct {
	ops     []store.Op // the caller's: valid until the call returns
	live    []store.Op // engine-owned copies of the ops that reach the tree (liveOps)
	body    []byte
	version store.Version
}

// lastWrite is the newest write to key among earlier links, as the pending
// entry it is about to become.
func lastWrite(links []chainLink, key []byte) (pendingWrite, bool) {
	for i := len(links) - 1; i >= 0; i-- {
		ops := links[i].ops
		for j := len(ops) - 1; j >= 0; j-- {
			if string(ops[j].Key) == string(key) {
				return pendingWrite{version: links[i].version, deleted: ops[j].Delete}, true
			}
		}
	}
	return pendingWrite{}, false
}

// ApplyChain implements store.Chainer.
func (db *DB) ApplyChain(ctx context.Context, batches ...*store.Batch) ([]store.Version, error) {
	if len(batches) == 0 || len(batches) > store.ChainLinksMax {
		return nil, fmt.Errorf("%w: chain of %d links (1..%d)", store.ErrInvalidBatch, len(batches), store.ChainLinksMax)
	}
	first, err := db.apply(ctx, batches)
	if err != nil {
		return nil, err
	}
	versions := make([]store.Version, len(batches))
	for i := range versions {
		versions[i] = first + store.Version(i)
	}
	return versions, nil
}

// liveOps sets each link's live ops: engine-owned copies of its writes, less
// those a later link of the chain overwrites or deletes. The chain is one
// group, and onDurable installs a
// group in the tree under one lock hold, so those intermediate values would
// never be seen by anyone: a chained transaction's intents, record and
// started receipt, put by the first link and gone after the second, never
// touch the tree (nor get copied). The log keeps every op, so replay
// reaches the same state.
func liveOps(links []chainLink) {
	last := len(links) - 1
	links[last].live = ownOps(links[last].ops)
	if last == 0 {
		return
	}
	later := make(map[string]struct{}, 2*len(links[last].ops))
	for i := last; i >= 0; i-- {
		ops := links[i].ops
		if i < last {
			kept := ops[:0:0]
			for _, op := range ops {
				if _, overwritten := later[unsafeString(op.Key)]; !overwritten {
					kept = append(kept, op)
				}
			}
			links[i].live = ownOps(kept)
		}
		for _, op := range ops {
			later[unsafeString(op.Key)] = struct{}{}
		}
	}
}
