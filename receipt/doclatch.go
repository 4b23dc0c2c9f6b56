package receipt

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/twopc"
)

// Document latches: contention is waited out, not voted no (docs/design.md §15,
// issue 37). A new receipt's transaction reads its documents, computes
// their new states and commits them conditioned on the versions it read.
// Two such transactions on one document (a shared counter every order
// increments) used to race: the loser's condition failed, a few fresh
// prepares failed the same way, and its receipt was stored aborted
// (transaction_conflict, retry with a new key). In this process the race
// is avoidable: a keyed batch takes a latch on each of its documents,
// FIFO per document, before it reads them, and keeps them until its
// commit is durable. The next one then reads the committed version and
// its conditions hold. Increments are serialized, not re-applied
// commutatively (docs/receipts.md, "Hot documents", says why).
//
// Latches are an optimisation of the conditions, never a replacement:
// every write is still conditioned on the versions it read, so a writer
// the latches do not order (the key-less fast path, another process on a
// shared store) still meets a failed condition, as before.
//
// Deadlock freedom: a batch takes its latches in key order, each latch
// is FIFO, and no one waits for an executor slot while holding a latch
// (a receipt takes its slot first, then its latches; the fast path takes
// no slot). A full executor therefore still defers a new batch at once
// (pending), before any latch wait.

// DocWaitMax bounds how long a new keyed batch waits for the latches of
// documents that other batches of this process are committing. It is a
// bound, not an expected wait: a commit holds a latch for about one
// fsync, so even a long queue on one document drains in well under it.
// Past it (or past the request's context), the receipt is published
// pending and the answer says to retry with the same key — the batch is
// deferred, never refused.
const DocWaitMax = 10 * time.Second

// docLatches holds the documents that batches of this process are
// committing: a document is latched while a key is in held, and its FIFO
// queue of waiters is held[key]. The zero value is ready for use.
type docLatches struct {
	mu     sync.Mutex
	held   map[string][]chan struct{}
	waited atomic.Uint64 // waits for a held latch (Stats.DocWaits)
}

// docKeyer is a participant that names the keys of its documents (a
// table shard), so that its transaction can latch them.
type docKeyer interface {
	DocKeys(dst []string) []string
}

// latchKeys is the sorted, distinct document keys of txn's participants.
func latchKeys(txn twopc.Txn) []string {
	var keys []string
	for _, p := range txn.Participants {
		if d, ok := p.(docKeyer); ok {
			keys = d.DocKeys(keys)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// lock takes the latch of every key (sorted, distinct), waiting in each
// one's queue until the timer started by after fires (started at the
// first wait: an uncontended batch starts none) or ctx ends. ok=false:
// none is held.
func (d *docLatches) lock(ctx context.Context, keys []string, after func() <-chan time.Time) bool {
	var timeout <-chan time.Time
	for i, k := range keys {
		if !d.lockOne(ctx, k, &timeout, after) {
			d.unlock(keys[:i])
			return false
		}
	}
	return true
}

// lockOne takes key k's latch: at once if it is free, otherwise once its
// holder and every waiter ahead have handed it on.
func (d *docLatches) lockOne(ctx context.Context, k string, timeout *<-chan time.Time, after func() <-chan time.Time) bool {
	d.mu.Lock()
	if d.held == nil {
		d.held = make(map[string][]chan struct{})
	}
	q, busy := d.held[k]
	if !busy {
		d.held[k] = nil
		d.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	d.held[k] = append(q, ch)
	d.mu.Unlock()
	if *timeout == nil {
		*timeout = after()
	}
	d.waited.Add(1)
	select {
	case <-ch:
		return true
	case <-*timeout:
	case <-ctx.Done():
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := slices.Index(d.held[k], ch); i >= 0 {
		d.held[k] = slices.Delete(d.held[k], i, i+1)
		return false
	}
	// Handed to us as we gave up: hand it on.
	d.unlockOneLocked(k)
	return false
}

// unlock releases the latches of keys, each to the first in its queue.
func (d *docLatches) unlock(keys []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		d.unlockOneLocked(k)
	}
}

func (d *docLatches) unlockOneLocked(k string) {
	q := d.held[k]
	if len(q) == 0 {
		delete(d.held, k)
		return
	}
	close(q[0])
	d.held[k] = q[1:]
}

// latchDocs takes the latches of txn's documents for a new receipt,
// waiting until DocWaitMax at most. It returns the function that gives
// them back, or ok=false when the wait ran out.
func (x *executor) latchDocs(ctx context.Context, txn twopc.Txn) (unlock func(), ok bool) {
	keys := latchKeys(txn)
	if len(keys) == 0 {
		return func() {}, true
	}
	after := func() <-chan time.Time { return x.core.clock.After(DocWaitMax) }
	if !x.docs.lock(ctx, keys, after) {
		x.core.stats.docWaitsExpired.Add(1)
		return nil, false
	}
	return func() { x.docs.unlock(keys) }, true
}
