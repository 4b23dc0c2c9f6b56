package receipt

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Create first (issue 39 part 2; docs/etcd.md, "Round trips"). On a store
// where every call is a network round trip (store.MultiGetter: etcd), a
// keyed request for a new key needs nothing the lookup would tell it: the
// write that publishes the receipt is conditioned on the receipt's and its
// tombstone's absence anyway (absentReceipt), and Begin on the version of
// the table's metadata (Shard.Prepare). So the first round of such a
// request reads nothing: it plans from this process's copy of the table's
// metadata and sends create+Begin at once, and the decision makes two
// round trips in all. A key that exists fails that write's first condition
// — nothing written — and the store's failed absence reads the receipt in
// the same round trip (store.ConditionError.Value; etcdstore's Else
// branch): the next round starts from it (Request.Seen) and replays or
// takes it over as it always did, so a retry costs one round trip too.
//
// The copy of the metadata may be stale: another node dropped the table,
// or dropped and created it again under a new ID. Begin then writes
// nothing, and its refusal (table_not_found for the moved version, or a
// document vote made from the old table's documents) is the copy's, not
// the table's: it is never made durable. The next round plans again from
// a fresh read (attempt.cachedPlan, begin), and only what that plan meets
// is an answer (receipt/tablenodes_test.go holds it).

// RetryHintAfter is how long ago a request must say it was first sent
// (Request.FirstSent) to be taken for a retry: its key most likely exists,
// and one read answers it where a create would cost a Txn that writes
// nothing. (It also covers a FirstSent older than KeyMemory, which is
// answered differently for a missing key than it is created.)
const RetryHintAfter = time.Second

// createFirst is the planner of a create sent before any lookup, and
// ok=false when the request looks its key up first: this process holds
// no copy of the table's metadata, the request is likely a retry (its key
// was created or answered here lately: recentKeys; or it says so:
// RetryHintAfter), or it would be answered differently for a missing key
// than it is created (the store refuses writes, or the space watcher
// refuses new keys: both still replay an existing key).
func (s *Service) createFirst(x *execution) (planner, bool) {
	req := x.req
	if s.core.refusesWrites() != nil || s.core.spaceFull() || s.recent.has(x.id) ||
		(!req.FirstSent.IsZero() && s.core.clock.Now().Sub(req.FirstSent) > RetryHintAfter) {
		return nil, false
	}
	plan, ok, err := s.core.tables.PreflightCached(req.Principal, req.Table, req.Batch)
	if !ok {
		return nil, false
	}
	id := x.id // not x: a planner holding x would move every request's execution to the heap
	return func(context.Context, *attempt) (twopc.Txn, *code.Error, error) {
		return s.plans.planned(id, plan, err)
	}, true
}

// noteFound keeps, for the next round, the receipt a creating attempt's
// failed write found at its key, when the store read it with the failure.
// A value that does not decode is left for the next round's own read.
func (a *attempt) noteFound(err error) {
	var ce *store.ConditionError
	if !a.creating() || !errors.As(err, &ce) || ce.Value == nil || ce.Found == 0 ||
		!bytes.Equal(ce.Cond.Key, receiptKey(a.id)) {
		return
	}
	if rec, derr := DecodeRecord(ce.Value); derr == nil {
		a.found = &Seen{id: a.id, rec: rec, ver: ce.Found}
	}
}
