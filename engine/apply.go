package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// Apply implements Store. See DB for how sequencing and durability fit.
func (db *DB) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	return db.apply(ctx, []*store.Batch{b})
}

// apply sequences batches as the links of one chain (a lone Apply is a
// chain of one) and waits until they are durable, returning the first
// link's version. The whole chain counts as one batch against
// BatchBytesMax, which keeps it within what torn-tail repair accepts as one
// group.
func (db *DB) apply(ctx context.Context, batches []*store.Batch) (store.Version, error) {
	if db.closed.Load() {
		return 0, store.ErrClosed
	}
	// Encode outside the lock: nothing of it depends on the sequence.
	var one [1]chainLink // a lone Apply's, without an allocation
	links := one[:]
	if len(batches) > 1 {
		links = make([]chainLink, len(batches))
	}
	if err := db.encodeLinks(batches, links); err != nil {
		return 0, err
	}
	if err := db.log.ReserveN(ctx, len(links)); err != nil {
		return 0, db.submitErr(err)
	}

	db.mu.Lock()
	if db.failed != nil {
		db.mu.Unlock()
		db.log.UnreserveN(len(links))
		return 0, fmt.Errorf("%w: %w", store.ErrFailStopped, db.failed)
	}
	// Under mu nobody else enqueues, so the links get the next indexes.
	next := store.Version(db.log.NextIndex())
	for i := range links {
		links[i].version = next + store.Version(i)
		if pending, settle, err := db.checkConds(batches[i].Conds, links[:i]); err != nil {
			db.mu.Unlock()
			db.log.UnreserveN(len(links))
			if settle {
				return 0, db.settleCondition(ctx, err, pending)
			}
			return 0, err
		}
	}
	entries := make([]wal.Entry, len(links))
	for i, l := range links {
		entries[i] = wal.Entry{Kind: wal.KindBatch, Body: l.body, Tag: &applyRec{ops: l.live}}
	}
	first, commit, err := db.log.EnqueueAll(entries)
	if err != nil {
		db.mu.Unlock()
		return 0, db.submitErr(err)
	}
	if store.Version(first) != next {
		panic(fmt.Sprintf("engine: chain sequenced at %d, checked as %d", first, next))
	}
	for _, l := range links {
		for _, op := range l.live {
			// The value without the room ownOps left after it for the
			// version: a reader appending to it must not write there.
			value := op.Value[:len(op.Value):len(op.Value)]
			db.pending[unsafeString(op.Key)] = pendingWrite{version: l.version, deleted: op.Delete, value: value, commit: commit}
		}
	}
	db.mu.Unlock()
	store.Sequenced(ctx)

	if err := db.awaitDurable(ctx, commit); err != nil {
		return 0, err
	}
	return next, nil
}

// encodeLinks checks each batch against the contract and encodes it into
// links[i], within the bytes one sequenced write may carry, and sets each
// link's live ops (liveOps: engine-owned copies, less what a later link
// overwrites).
func (db *DB) encodeLinks(batches []*store.Batch, links []chainLink) error {
	total := 0
	for i, b := range batches {
		if err := store.Check(b, db.Limits()); err != nil {
			return err
		}
		links[i] = chainLink{ops: b.Ops, body: encodeBody(make([]byte, 0, encodedBodySize(b.Ops)), b.Ops)}
		total += len(links[i].body)
	}
	if total > store.BatchBytesMax {
		return fmt.Errorf("%w: %d encoded bytes > %d", store.ErrInvalidBatch, total, store.BatchBytesMax)
	}
	liveOps(links)
	return nil
}

// awaitDurable waits for a sequenced batch and maps the log's answer.
func (db *DB) awaitDurable(ctx context.Context, commit wal.Commit) error {
	err := commit.Wait(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wal.ErrAmbiguous):
		db.failStop(err)
		return fmt.Errorf("%w: %w", store.ErrAmbiguous, err)
	case errors.Is(err, wal.ErrFailStopped):
		db.failStop(err)
		return fmt.Errorf("%w: %w", store.ErrFailStopped, err)
	default: // ctx ended after submission
		return fmt.Errorf("%w: %w", store.ErrAmbiguous, err)
	}
}

// submitErr maps a failure before the batch reached the log: nothing was
// written.
func (db *DB) submitErr(err error) error {
	switch {
	case errors.Is(err, wal.ErrClosed):
		return store.ErrClosed
	case errors.Is(err, wal.ErrFailStopped):
		db.failStop(err)
		return fmt.Errorf("%w: %w", store.ErrFailStopped, err)
	}
	return err
}

// failStop forgets pending writes: none of them can be trusted until the
// store is reopened and the log replayed.
func (db *DB) failStop(err error) {
	db.mu.Lock()
	if db.failed == nil {
		db.failed = err
		db.stopped.Store(true)
		db.opts.Logger.Error("engine: fail-stop", "err", err)
	}
	clear(db.pending)
	db.mu.Unlock()
}

// checkConds evaluates conditions against durable state overlaid with
// pending writes and, on top, the writes of earlier links of the same chain
// (not yet in pending). Caller holds mu. When the failing condition was
// decided by another batch's pending write, that write's commit is returned
// too, with settle set (see settleCondition).
func (db *DB) checkConds(conds []store.Condition, earlier []chainLink) (pending wal.Commit, settle bool, err error) {
	if len(conds) == 0 {
		return wal.Commit{}, false, nil
	}
	db.treeMu.RLock()
	defer db.treeMu.RUnlock()
	// Every key's tree version first, in one ascending pass (condscan.go),
	// then the conditions in batch order: the first that fails is named.
	var buf [condScanMax]store.Version
	inTree := db.treeVersions(conds, buf[:0])
	for i, c := range conds {
		found := inTree[i]
		w, inChain := lastWrite(earlier, c.Key)
		p, isPending := db.pending[string(c.Key)]
		switch {
		case inChain:
			isPending = false // decided by this very chain: nothing to settle
			found = 0
			if !w.deleted {
				found = w.version
			}
		case isPending:
			found = 0
			if !p.deleted {
				found = p.version
			}
		}
		if !c.HoldsAt(found) {
			return p.commit, isPending, store.Failed(c, found)
		}
	}
	return wal.Commit{}, false, nil
}

// settleCondition reports a condition that failed because of a write not yet
// durable only once that write is: a caller that loses a create-if-absent race
// and then reads the key must find the winner, never "not found". Should the
// winner's write fail instead, the store has fail-stopped and nothing of
// ours was written either.
func (db *DB) settleCondition(ctx context.Context, condErr error, pending wal.Commit) error {
	if err := pending.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // nothing of ours was written
		}
		db.failStop(err)
		return fmt.Errorf("%w: %w", store.ErrFailStopped, err)
	}
	return condErr
}
