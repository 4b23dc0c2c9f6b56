package table

import (
	"context"
	"errors"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// ApplyFast executes a plan as one atomic Apply, without a receipt or 2PC:
// the path of requests without an Idempotency-Key. Every touched document
// must be free of intents (an open 2PC transaction is a typed
// transaction_conflict); documents another fast writer changed between read
// and write are re-read up to FastRetriesMax times.
func (t *Tables) ApplyFast(ctx context.Context, p *Plan) (Result, error) {
	for attempt := 0; ; attempt++ {
		b, res, err := t.fastBatch(ctx, p)
		if err != nil {
			return Result{}, err
		}
		if b.Empty() {
			// Only deletes of documents that do not exist: the reads were
			// the whole effect, once no transaction holds one of them.
			return res, t.openIntents(ctx, p, b)
		}
		_, err = t.store.Apply(ctx, b)
		if err == nil {
			return res, nil
		}
		key, ok := store.FailedKey(err)
		if !ok {
			return Result{}, err
		}
		switch {
		case store.NSIntent.Has(key):
			return Result{}, intentConflict(p, key)
		case store.NSMeta.Has(key):
			return Result{}, tableNotFound(p.Table.Name)
		case attempt+1 >= FastRetriesMax:
			return Result{}, code.Errorf(code.TransactionConflict, "documents of the batch kept changing (%d attempts)", FastRetriesMax)
		}
	}
}

func (t *Tables) fastBatch(ctx context.Context, p *Plan) (*store.Batch, Result, error) {
	var res Result
	n := p.Batch.docCount()
	b := &store.Batch{Conds: make([]store.Condition, 0, 2*n+1), Ops: make([]store.Op, 0, n)}
	b.AtVersion(metaKey(p.Table.Tenant, p.Table.Name), p.Table.Version)
	for _, s := range p.Shards {
		for _, w := range s.docs {
			st, err := s.stage(ctx, w, &res)
			if err != nil {
				return nil, Result{}, err
			}
			st.commitTo(b)
		}
	}
	return b, res, nil
}

// openIntents checks the intent conditions of a batch with nothing to write
// by reading them: any open intent is a transaction_conflict.
func (t *Tables) openIntents(ctx context.Context, p *Plan, b *store.Batch) error {
	for _, c := range b.Conds {
		if !store.NSIntent.Has(c.Key) {
			continue
		}
		_, err := t.store.Get(ctx, c.Key)
		switch {
		case err == nil:
			return intentConflict(p, c.Key)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	return nil
}

// intentConflict is the transaction_conflict of a batch that found an open
// intent on key, naming its document.
func intentConflict(p *Plan, key []byte) error {
	for _, s := range p.Shards {
		if refusal, _, mine := s.Refusal(key); mine {
			return refusal
		}
	}
	return code.Errorf(code.TransactionConflict, "a document of the batch is being written by another transaction")
}
