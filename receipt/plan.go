package receipt

import (
	"context"
	"errors"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// planner plans the retained-2PC transaction that executes a receipt: the
// one request-specific step of the lifecycle. A keyed batch is planned from
// the request the client sent (planRequest) or, by a successor, from the
// canonical request its pending receipt stores (planStored); an
// interactive session's commit can bring its own planner and go through the
// same create, start and decide steps.
//
// refusal is a deterministic pre-execution failure, such as
// table_not_found: the receipt becomes terminal not_applied with its exact
// code and message (docs/design.md §5.5). err means the receipt cannot be planned
// now; it is returned to the caller as it is.
type planner func(ctx context.Context, a *attempt) (txn twopc.Txn, refusal *code.Error, err error)

// plans makes planners: a keyed batch's from its request, a session
// commit's from its staging, and a stored receipt's from what it stores.
type plans struct {
	core *core
}

// planRequest plans the keyed batch of req.
func (p *plans) planRequest(req Request) planner {
	return func(ctx context.Context, a *attempt) (twopc.Txn, *code.Error, error) {
		return p.planBatch(ctx, a.id, req.Principal, req.Table, req.Batch)
	}
}

// planRequestWith is planRequest with the table's metadata item read
// already (core.loadWithMeta), during this request.
func (p *plans) planRequestWith(req Request, meta store.Item) planner {
	return func(ctx context.Context, a *attempt) (twopc.Txn, *code.Error, error) {
		plan, err := p.core.tables.PreflightWithMeta(req.Principal, req.Table, req.Batch, meta)
		return p.planned(a.id, plan, err)
	}
}

// planStored plans a pending receipt from the canonical request it stores,
// so that a successor executes without the client (docs/design.md §4). A request
// that does not decode is the receipt's damage (store.RecordError), not a
// refusal.
func (p *plans) planStored(ctx context.Context, a *attempt) (twopc.Txn, *code.Error, error) {
	if a.rec.Session != "" {
		st, err := decodeStaging(a.rec.Request)
		if err != nil {
			return twopc.Txn{}, nil, store.RecordError(receiptKey(a.id), "receipt: the session staging of a record", err)
		}
		return p.planSession(a.rec.Principal, st)(ctx, a)
	}
	tbl, batch, err := decodeRequest(a.rec.Request)
	if err != nil {
		return twopc.Txn{}, nil, store.RecordError(receiptKey(a.id), "receipt: the request of a record", err)
	}
	return p.planBatch(ctx, a.id, a.rec.Principal, tbl, batch)
}

// planBatch preflights batch b on principal's table tbl: a typed failure
// is a refusal.
func (p *plans) planBatch(ctx context.Context, id, principal, tbl string, b *table.Batch) (twopc.Txn, *code.Error, error) {
	plan, err := p.core.tables.Preflight(ctx, principal, tbl, b)
	return p.planned(id, plan, err)
}

// planned is the transaction of a preflight's plan, or its refusal.
func (p *plans) planned(id string, plan *table.Plan, err error) (twopc.Txn, *code.Error, error) {
	var ce *code.Error
	if errors.As(err, &ce) {
		return twopc.Txn{}, ce, nil
	}
	if err != nil {
		return twopc.Txn{}, nil, err
	}
	return txnFor(id, plan), nil, nil
}

// txnFor is the transaction that executes plan: one participant per shard
// it touches, committing the batch's result.
func txnFor(id string, plan *table.Plan) twopc.Txn {
	return twopc.Txn{ID: id, Participants: participantsOf(plan),
		Result: func() ([]byte, error) { return resultJSON(plan.Result()), nil }}
}

func participantsOf(p *table.Plan) []twopc.Participant {
	out := make([]twopc.Participant, len(p.Shards))
	for i, s := range p.Shards {
		out[i] = s
	}
	return out
}

// resultJSON is r as encoding/json writes it, without its reflection (a
// keyed request's commit result, stored in its envelope).
func resultJSON(r table.Result) []byte {
	return r.AppendJSON(make([]byte, 0, resultJSONBytes))
}

// resultJSONBytes holds a result of three counts of up to seven digits.
const resultJSONBytes = 64
