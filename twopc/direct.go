package twopc

import (
	"context"

	"github.com/idemdb/idem/store"
)

// DirectCommitter is a participant whose prepare a chained commit can carry
// in its decision link instead of staging it as intents. In a chain nothing
// comes between the two links, and they are sequenced as one: intents put
// by the first link and deleted by the second would cost their log bytes
// and conditions twice and protect nothing. The first link then holds no
// prepare, so a crash that keeps it alone (a torn chain) leaves nothing of
// the transaction to commit: docs/design.md §12 lets recovery commit only what has
// every prepare durable, and presumes abort otherwise.
type DirectCommitter interface {
	// StageDirect stages txnID as Prepare does — a *code.Error is a "no"
	// vote — and returns how many conditions and ops AppendDirect adds.
	StageDirect(ctx context.Context, txnID string) (conds, ops int, err error)
	// AppendDirect adds to b, in place of intents, the writes of the commit
	// StageDirect staged, under the conditions Prepare's vote would rest on
	// (no open intent on a document, each document read still as read).
	// Refusal explains a failed condition as it does Prepare's. Staging and
	// writing are apart so that every participant writes into the one batch
	// that carries them all, sized once.
	AppendDirect(b *store.Batch)
}

// directChain returns BeginCommit's two links for participants that are
// all DirectCommitters, or ok=false if one is not (or resolution is
// deferred, which needs intents to defer). The first link is beginWith
// with a coordinator record marked Unprepared (no participants: there is
// nothing to resolve), conditioned on the transaction being neither begun
// nor decided: a first link kept alone is a begun transaction that
// recovery, whatever its policy, presumes aborted — and the caller's
// started receipt keeps its retained 2PC record, as every started receipt
// does. The second link is the decision with every participant's direct
// commit, the record's deletion and decideWith's writes. With an empty
// beginWith the first link has nothing to protect (BeginCommit then
// writes the decision link alone): its record is left out.
func (c *Coordinator) directChain(ctx context.Context, txn Txn, beginWith *store.Batch) (begin, decide *store.Batch, result []byte, ok bool, err error) {
	if !c.Direct(txn) {
		return nil, nil, nil, false, nil
	}
	conds, ops, result, err := c.stageDirect(ctx, txn, 1+withSlack, 2+withSlack)
	if err != nil {
		return nil, nil, nil, true, err
	}
	val, err := encodeDecision(Committed{Result: result}, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, nil, nil, true, err
	}
	begin = new(store.Batch).Absent(recordKey(txn.ID)).Absent(decisionKey(txn.ID))
	if beginWith != nil && len(beginWith.Ops) > 0 {
		rec, err := encodeRecord(record{Schema: schemaV1, Created: c.opts.Now().UnixMilli(), Unprepared: true})
		if err != nil {
			return nil, nil, nil, true, err
		}
		begin.Grow(len(beginWith.Conds), 1+len(beginWith.Ops)).Put(recordKey(txn.ID), rec)
	}
	begin.Merge(beginWith) // its conditions, even with no op to write
	decide = new(store.Batch).Grow(conds, ops).Absent(decisionKey(txn.ID)).Put(decisionKey(txn.ID), val)
	appendDirect(txn, decide)
	if len(begin.Ops) > 0 {
		decide.Delete(recordKey(txn.ID))
	}
	return begin, decide, result, true, nil
}

// Direct reports whether txn can commit without intents — through
// CommitOnce, or BeginCommit's direct chain: every participant is a
// DirectCommitter, and resolution is not deferred (which needs intents to
// defer).
func (c *Coordinator) Direct(txn Txn) bool {
	if c.opts.knobs.DeferResolution {
		return false
	}
	for _, p := range txn.Participants {
		if _, isDirect := p.(DirectCommitter); !isDirect {
			return false
		}
	}
	return true
}

// stageDirect stages every participant's direct commit and the result,
// and counts the conditions and ops of a batch that carries them on top of
// conds and ops of its own.
func (c *Coordinator) stageDirect(ctx context.Context, txn Txn, conds, ops int) (condsAll, opsAll int, result []byte, err error) {
	for _, p := range txn.Participants {
		nc, no, err := p.(DirectCommitter).StageDirect(ctx, txn.ID)
		if err != nil {
			return 0, 0, nil, err
		}
		conds, ops = conds+nc, ops+no
	}
	if txn.Result != nil {
		if result, err = txn.Result(); err != nil {
			return 0, 0, nil, err
		}
	}
	return conds, ops, result, nil
}

// appendDirect adds every participant's staged direct commit to b.
func appendDirect(txn Txn, b *store.Batch) {
	for _, p := range txn.Participants {
		p.(DirectCommitter).AppendDirect(b)
	}
}
