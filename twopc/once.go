package twopc

import (
	"bytes"
	"context"
	"slices"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// CommitOnce commits txn in one atomic write, when every participant is a
// DirectCommitter and resolution is not deferred: every participant's
// direct commit and with's writes, conditioned on the transaction being
// neither begun nor decided. It is BeginCommit with nothing to publish
// ahead of the decision, and a write that is whole or absent needs no
// record of the transaction at all: no coordinator record (nothing is ever
// begun and undecided) and no decision (no one can be left to learn the
// outcome from it). with, called with the committed result, adds to the
// write what must therefore record the outcome itself, as the receipt
// layer's terminal receipt does with its whole envelope; Lookup knows
// nothing of a transaction committed so. A transaction that must stay
// visible to Lookup goes through BeginCommit or Begin and Decide.
//
// ok=false with a nil error means nothing was written: a participant is
// not direct or voted no, or a condition of the transaction's failed (it
// exists, a document another transaction holds or changed). Begin and
// Decide tell those cases apart. A failed condition of with's is returned
// as the store's *store.ConditionError, nothing written: Begin would fail
// it too, and a round trip later — the receipt layer answers a used key
// from what the failed write found there (ConditionError.Value). with's
// conditions come before the participants' so that the store, which names
// the first failed condition in batch order, names with's whenever it
// fails (a lost race for a key fails the documents' too). An ambiguous
// write returns an error wrapping ErrOutcomeUnknown and store.ErrAmbiguous.
func (c *Coordinator) CommitOnce(ctx context.Context, txn Txn, with func(result []byte, b *store.Batch) error) (store.Version, bool, error) {
	if !c.Direct(txn) {
		return 0, false, nil
	}
	for attempt := 0; ; attempt++ {
		v, ok, contended, err := c.commitOnce(ctx, txn, with)
		if !contended || attempt == ChainContendedRetriesMax {
			return v, ok, err
		}
	}
}

// commitOnce is one try of CommitOnce; contended is as for beginCommitOnce.
func (c *Coordinator) commitOnce(ctx context.Context, txn Txn, with func(result []byte, b *store.Batch) error) (v store.Version, ok, contended bool, err error) {
	b, withConds, refused, err := c.stageOnce(ctx, txn, with)
	if refused || err != nil {
		return 0, false, false, err // Begin reports the vote
	}
	if err := fault.Inject(fault.TwoPCChainBefore); err != nil {
		return 0, false, false, err
	}
	if v, err = c.applyStep(ctx, StepOnce, b); err != nil {
		if failedOneOf(err, withConds) {
			return 0, false, false, err
		}
		contended, err := notWritten(err)
		return 0, false, contended, err
	}
	return v, true, false, fault.Inject(fault.TwoPCChainAfter)
}

// stageOnce is CommitOnce's write, unapplied: under the transaction's
// absence, with's writes and conditions (withConds), then every
// participant's direct commit; refused when a participant voted no.
func (c *Coordinator) stageOnce(ctx context.Context, txn Txn, with func(result []byte, b *store.Batch) error) (_ *store.Batch, withConds []store.Condition, refused bool, err error) {
	conds, ops, result, err := c.stageDirect(ctx, txn, 2+onceWithConds, onceWithOps)
	if err != nil {
		return nil, nil, isVote(err), voteless(err)
	}
	rk, dk := txnKeys(txn.ID)
	b := new(store.Batch).Grow(conds, ops).Absent(rk).Absent(dk)
	own := len(b.Conds)
	if with != nil {
		if err := with(result, b); err != nil {
			return nil, nil, false, err
		}
	}
	withConds = b.Conds[own:len(b.Conds):len(b.Conds)]
	appendDirect(txn, b)
	return b, withConds, false, nil
}

// onceWithConds and onceWithOps are the room stageOnce leaves for with:
// the receipt layer's terminal write (receipt/create_terminal.go) adds its
// receipt's and its tombstone's absence, the receipt and its retention
// entry. withSlack's eight of each, sized for Begin and Decide, cost a
// keyed request about 580 bytes it never used; a with that adds more (a
// session's commit) grows the batch once, as it would past withSlack.
const onceWithConds, onceWithOps = 2, 2

// failedOneOf reports whether err is a failed condition on one of conds'
// keys.
func failedOneOf(err error, conds []store.Condition) bool {
	key, ok := store.FailedKey(err)
	return ok && slices.ContainsFunc(conds, func(c store.Condition) bool { return bytes.Equal(c.Key, key) })
}
