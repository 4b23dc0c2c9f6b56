package engine

import (
	"context"
	"fmt"

	"github.com/idemdb/idem/wal"
)

// ChainLinksMax bounds the batches of one ApplyChain.
const ChainLinksMax = 8

// Chainer is implemented by stores whose batches share one log, which lets a
// caller make several dependent batches durable with one wait. A store that
// does not implement it (a cluster-shared Store) is used batch by batch.
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

// chainLink is one sequenced-to-be link while its chain is checked.
type chainLink struct {
	ops     []Op // the caller's: valid until ApplyChain returns
	body    []byte
	version Version
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

// ApplyChain implements Chainer. The whole chain counts as one batch
// against BatchBytesMax, which keeps it within what torn-tail repair
// accepts as one group.
func (db *DB) ApplyChain(ctx context.Context, batches ...*Batch) ([]Version, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if len(batches) == 0 || len(batches) > ChainLinksMax {
		return nil, fmt.Errorf("%w: chain of %d links (1..%d)", ErrInvalidBatch, len(batches), ChainLinksMax)
	}
	// Links hold the caller's ops while the chain is checked; only the
	// writes that reach the tree (liveOps) are copied to be kept.
	links := make([]chainLink, len(batches))
	total := 0
	for i, b := range batches {
		if err := validateBatch(b); err != nil {
			return nil, err
		}
		links[i] = chainLink{ops: b.Ops, body: encodeBody(make([]byte, 0, encodedBodySize(b.Ops)), b.Ops)}
		total += len(links[i].body)
	}
	if total > BatchBytesMax {
		return nil, fmt.Errorf("%w: chain of %d encoded bytes > %d", ErrInvalidBatch, total, BatchBytesMax)
	}
	live := liveOps(links)
	for i := range live {
		live[i] = ownOps(live[i])
	}
	if err := db.log.ReserveN(ctx, len(links)); err != nil {
		return nil, db.submitErr(err)
	}

	db.mu.Lock()
	if db.failed != nil {
		db.mu.Unlock()
		db.log.UnreserveN(len(links))
		return nil, fmt.Errorf("%w: %w", ErrFailStopped, db.failed)
	}
	// Under mu nobody else enqueues, so the links get the next indexes.
	next := Version(db.log.NextIndex())
	for i := range links {
		links[i].version = next + Version(i)
		if pending, err := db.checkCondsAfter(batches[i].Conds, links[:i]); err != nil {
			db.mu.Unlock()
			db.log.UnreserveN(len(links))
			if pending != nil {
				return nil, db.settleCondition(ctx, err, *pending)
			}
			return nil, err
		}
	}
	entries := make([]wal.Entry, len(links))
	for i, l := range links {
		entries[i] = wal.Entry{Kind: wal.KindBatch, Body: l.body, Tag: &applyRec{ops: live[i]}}
	}
	first, commit, err := db.log.EnqueueAll(entries)
	if err != nil {
		db.mu.Unlock()
		return nil, db.submitErr(err)
	}
	versions := make([]Version, len(links))
	for i, l := range links {
		versions[i] = Version(first) + Version(i)
		if versions[i] != l.version {
			panic(fmt.Sprintf("engine: chain link %d sequenced at %d, checked as %d", i, versions[i], l.version))
		}
		for _, op := range live[i] {
			db.pending[unsafeString(op.Key)] = pendingWrite{version: versions[i], deleted: op.Delete, commit: commit}
		}
	}
	db.mu.Unlock()

	if err := db.awaitDurable(ctx, commit); err != nil {
		return nil, err
	}
	return versions, nil
}

// liveOps drops, from each link, the writes a later link of the chain
// overwrites or deletes. The chain is one group, and onDurable installs a
// group in the tree under one lock hold, so those intermediate values would
// never be seen by anyone: a chained transaction's intents, record and
// started receipt, put by the first link and gone after the second, never
// touch the tree. The log keeps every op, so replay reaches the same state.
func liveOps(links []chainLink) [][]Op {
	live := make([][]Op, len(links))
	live[len(links)-1] = links[len(links)-1].ops
	later := make(map[string]struct{}, 2*len(links[len(links)-1].ops))
	for i := len(links) - 1; i >= 0; i-- {
		ops := links[i].ops
		if i < len(links)-1 {
			kept := ops[:0:0]
			for _, op := range ops {
				if _, overwritten := later[unsafeString(op.Key)]; !overwritten {
					kept = append(kept, op)
				}
			}
			live[i] = kept
		}
		for _, op := range ops {
			later[unsafeString(op.Key)] = struct{}{}
		}
	}
	return live
}
