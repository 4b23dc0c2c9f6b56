package receipt

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Contended re-plans: the document latches (doclatch.go) order the keyed
// batches of one process, but on a store shared by several (etcd) two
// nodes' batches on one hot document still meet: one finds the other's
// intent, or the document changed between its read and its Begin. That is
// contention, not a conflict (twopc.Contender), so it is waited out here,
// not voted no: Begin is tried again after a short, jittered backoff, and
// each try re-prepares — every participant reads the document at its
// newest version and computes its ops there ($inc and the other
// transforms re-applied on the newer version; docs/design.md §15). Only a
// real conflict is refused: a session's read set changed, a transform
// invalid on what it finds, a dropped table.
//
// The node that keeps its latch holds its place in its own queue, so at
// most one batch per node contends for a document: the re-plans race a
// few other nodes' heads, not every request.

// ContendedReplansMax bounds how often one Begin is tried again after a
// contended refusal, before the batch is answered pending with nothing
// stored (start.go contended). With the backoff below it
// is about two seconds of waiting, far more than a hot document's queue
// on a few nodes needs (each holder keeps a document for two store round
// trips); the lease of the receipt being published bounds it too
// (beginReplanned).
const ContendedReplansMax = 96

// The backoff between contended re-plans doubles from replanBackoffMin to
// replanBackoffMax: short enough that a waiter sees the holder's decision
// within a round trip or two of it, long enough that a queue of waiters
// does not turn into a storm of failed Txns.
const (
	replanBackoffMin = 500 * time.Microsecond
	replanBackoffMax = 16 * time.Millisecond
)

// beginReplanned is Begin, tried again while its refusal is contention,
// up to ContendedReplansMax times, the request's context, and the claim
// that `with` publishes: no try starts that would land with less than
// SafetyMargin of it left (until), so a long wait never publishes a
// receipt whose lease another node may already take.
func (fl *flow) beginReplanned(ctx context.Context, txn twopc.Txn, with *store.Batch, until time.Time) (twopc.BeginResult, error) {
	for replans := 0; ; replans++ {
		res, err := fl.core.coord.Begin(ctx, txn, with)
		if err != nil || res.Refused == nil || !res.Contended || !fl.core.opts.ReplanContended || replans == ContendedReplansMax {
			return res, err
		}
		wait := replanBackoff(txn.ID, replans)
		if fl.core.clock.Now().Add(wait).After(until.Add(-fl.core.opts.SafetyMargin)) {
			return res, nil
		}
		select {
		case <-fl.core.clock.After(wait):
		case <-ctx.Done():
			return res, nil // answered pending (start.go contended)
		}
		fl.core.stats.replans.Add(1)
	}
}

// replanBackoff is the wait before re-plan n of transaction id: the
// doubling bound, jittered down to half of it so that waiters that met
// the same holder do not wake together. The jitter is a hash of (id, n),
// not a random draw, so that a run on a simulated clock replays exactly.
func replanBackoff(id string, n int) time.Duration {
	d := replanBackoffMax
	if n < 16 && replanBackoffMin<<n < replanBackoffMax {
		d = replanBackoffMin << n
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{byte(n)})
	return d/2 + time.Duration(h.Sum64()%uint64(d/2+1))
}
