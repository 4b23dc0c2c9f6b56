package receipt

import (
	"context"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/twopc"
)

// Create first (issue 39 part 2; docs/etcd.md, "Round trips"). On a store
// where every call is a network round trip (engine.MultiGetter: etcd), a
// keyed request for a new key needs nothing the lookup would tell it: the
// write that publishes the receipt is conditioned on the receipt's and its
// tombstone's absence anyway (absentReceipt), and Begin on the version of
// the table's metadata (Shard.Prepare). So the first round of such a
// request reads nothing: it plans from this process's copy of the table's
// metadata and sends create+Begin at once, and the decision makes two
// round trips in all. A key that exists fails that write's first condition
// — nothing written — and the next round looks it up and replays or takes
// it over as it always did.
//
// The copy of the metadata may be stale: another node dropped the table,
// or dropped and created it again under a new ID. Begin then writes
// nothing, and its refusal (table_not_found for the moved version, or a
// document vote made from the old table's documents) is the copy's, not
// the table's: it is never made durable. The next round plans again from
// a fresh read (attempt.cachedPlan, begin), and only what that plan meets
// is an answer (receipt/tablenodes_test.go holds it).

// createFirst is the planner of a create sent before any lookup, and
// ok=false when the request must look its key up first: this process
// holds no copy of the table's metadata, or the request would be answered
// differently for a missing key than it is created (the store refuses
// writes, the space watcher refuses new keys, or its FirstSent is older
// than the key is remembered: every one of them replays an existing key).
func (s *Service) createFirst(x *execution) (planner, bool) {
	req := x.req
	if s.refusesWrites() != nil || s.spaceFull() ||
		(!req.FirstSent.IsZero() && s.clock.Now().Sub(req.FirstSent) > s.KeyMemory()) {
		return nil, false
	}
	plan, ok, err := s.tables.PreflightCached(req.Principal, req.Table, req.Batch)
	if !ok {
		return nil, false
	}
	return func(context.Context, *attempt) (twopc.Txn, *code.Error, error) {
		return s.planned(x.id, plan, err)
	}, true
}
