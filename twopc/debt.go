package twopc

import (
	"context"
	"errors"
)

// Visibility debt met by a Begin: a decided transaction whose intents are
// still on its documents — resolution deferred (testknobs.TwoPC), or cut
// short by a crash before maintenance came — holds them as surely as
// a transaction in flight, yet nothing is left to wait for: its outcome is
// fixed. A Begin whose condition failed on such an intent resolves that
// transaction itself (Resolve: idempotent, conditioned on the record and
// the decision, exactly what maintenance would write) and prepares afresh,
// instead of refusing a batch for a write that is already over. An intent
// of an undecided transaction is left alone: that is contention, for the
// caller's wait or re-plan.

// payDebtOn resolves every decided transaction whose intent is on one of
// txn's documents: a participant's "no" vote (a document not found, or
// found where an insert wants none) may come from reading a document whose
// newest committed state is still only in such an intent. paid reports
// that it resolved one, so a fresh prepare reads what is committed. Only
// a vote no pays this cost: one read per document.
func (c *Coordinator) payDebtOn(ctx context.Context, txn Txn) (paid bool, err error) {
	var keys [][]byte
	for _, p := range txn.Participants {
		if h, ok := p.(IntentHolder); ok {
			keys = h.IntentKeys(keys)
		}
	}
	for _, k := range keys {
		one, err := c.payDebtAt(ctx, txn, k)
		if err != nil {
			return paid, err
		}
		paid = paid || one
	}
	return paid, nil
}

// payDebtAt resolves the decided transaction whose intent is at key, if
// there is one and it is not txn itself; paid reports that it did, so a
// fresh prepare may succeed.
func (c *Coordinator) payDebtAt(ctx context.Context, txn Txn, key []byte) (paid bool, err error) {
	holder, ok, err := holderOf(ctx, txn, key)
	if err != nil || !ok || holder == txn.ID {
		return false, err
	}
	st, err := c.Lookup(ctx, holder)
	if err != nil || st.Decision == nil {
		return false, err
	}
	if _, err := c.Resolve(ctx, holder); err != nil && !errors.Is(err, ErrResolveContended) {
		return false, err
	}
	c.debtPaid.Add(1)
	return true, nil
}

// holderOf asks the participant that owns key which transaction's intent
// is there.
func holderOf(ctx context.Context, txn Txn, key []byte) (string, bool, error) {
	for _, p := range txn.Participants {
		if h, ok := p.(IntentHolder); ok {
			if id, found, err := h.HolderOf(ctx, key); err != nil || found {
				return id, found, err
			}
		}
	}
	return "", false, nil
}
