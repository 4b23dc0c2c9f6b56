package twopc

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
)

// ResolveConflictsMax bounds the writes of one Resolve call that may fail
// their conditions. Each failure means another writer got there first — a
// concurrent Resolve or Recover marked a participant resolved, or a
// participant's intents changed — and costs one more round of reads; at
// the bound Resolve stops with ErrResolveContended and leaves the rest to
// a later call (Recover, the receipt layer's maintenance), so that a
// condition that can never hold cannot keep it busy forever.
const ResolveConflictsMax = 64

// Resolve applies a decided transaction to every participant that has not
// acknowledged it yet, one participant per write: the participant's
// resolution and the mark "resolved" in the coordinator record are one
// atomic Apply, so a participant is marked only once its intents are gone.
// When the last one is resolved the record is deleted. It returns the number
// of participants resolved by this call; an undecided transaction is
// ErrInProgress.
//
// Each write is conditioned on the coordinator record and on the decision
// as read for it (record first), so it applies the decision in force to
// that very record. A write whose conditions fail is retried from fresh
// reads; the ResolveConflictsMax-th failure of one call ends it with an
// error wrapping ErrResolveContended and the count resolved so far. A
// decision found changed while the record stood unchanged ends it with an
// error wrapping ErrDecisionChanged; nothing more is written.
func (c *Coordinator) Resolve(ctx context.Context, txnID string) (int, error) {
	if _, err := c.Learn(ctx, txnID); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return 0, ErrInProgress
		}
		return 0, err
	}
	resolved, conflicts := 0, 0
	for {
		it, err := c.store.Get(ctx, recordKey(txnID))
		if errors.Is(err, engine.ErrNotFound) {
			return resolved, nil
		}
		if err != nil {
			return resolved, err
		}
		rec, err := decodeRecord(it.Value)
		if err != nil {
			return resolved, fmt.Errorf("twopc: decode record %s: %w", txnID, err)
		}
		o, decided, err := c.learnAt(ctx, txnID)
		if errors.Is(err, engine.ErrNotFound) {
			// Released and begun again since the first read: undecided.
			return resolved, ErrInProgress
		}
		if err != nil {
			return resolved, err
		}
		_, commit := o.(Committed)
		next := -1
		for i, pr := range rec.Participants {
			if !pr.Resolved {
				next = i
				break
			}
		}
		b := new(engine.Batch).AtVersion(recordKey(txnID), it.Version).AtVersion(decisionKey(txnID), decided)
		if next < 0 {
			b.Delete(recordKey(txnID))
		} else {
			p, err := c.resolve(rec.Participants[next].Ref)
			if err != nil {
				return resolved, err
			}
			rb, err := p.Resolve(ctx, txnID, commit)
			if err != nil {
				return resolved, err
			}
			b.Merge(rb)
			rec.Participants[next].Resolved = true
			if last := next == len(rec.Participants)-1; last {
				b.Delete(recordKey(txnID))
			} else {
				val, err := cbor.Marshal(rec)
				if err != nil {
					return resolved, err
				}
				b.Put(recordKey(txnID), val)
			}
		}
		if err := fault.Inject(fault.TwoPCResolveBefore); err != nil {
			return resolved, err
		}
		if _, err := c.apply(ctx, b); err != nil {
			if !errors.Is(err, engine.ErrConditionFailed) {
				return resolved, err
			}
			if key, _ := engine.FailedKey(err); string(key) == string(decisionKey(txnID)) {
				if err := c.checkDecisionStood(ctx, txnID, it.Version, decided); err != nil {
					return resolved, err
				}
			}
			// Someone else resolved concurrently: re-read.
			if conflicts++; conflicts >= ResolveConflictsMax {
				return resolved, fmt.Errorf("%w: %s: %d writes failed their conditions (the last: %v)",
					ErrResolveContended, txnID, conflicts, err)
			}
			continue
		}
		if next >= 0 {
			resolved++
		}
		if err := fault.Inject(fault.TwoPCResolveAfter); err != nil {
			return resolved, err
		}
	}
}

// checkDecisionStood is the read-back half of "a decided record never
// changes": Resolve read the record at version rec and then the decision at
// version decided, and its write found the decision no longer there. If the
// record is still at rec it stood all along, so no Release (which requires
// it absent) can have removed the decision: the decided record changed,
// which is an error wrapping ErrDecisionChanged. Otherwise the record
// moved too — resolved, or released and begun again — and the caller
// re-reads as after any conflict.
func (c *Coordinator) checkDecisionStood(ctx context.Context, txnID string, rec, decided engine.Version) error {
	it, err := c.store.Get(ctx, recordKey(txnID))
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return nil
	case err != nil:
		return err
	case it.Version != rec:
		return nil
	}
	return fmt.Errorf("%w: transaction %s: the decision read at version %d is gone or rewritten while its coordinator record stayed at version %d",
		ErrDecisionChanged, txnID, decided, rec)
}

// ReleaseInto adds to b the release of txnID's retained decision: it deletes
// the decision, on condition that no coordinator record (no unresolved
// participant) remains. Owners use it to fold the release into their own
// cleanup write.
func ReleaseInto(b *engine.Batch, txnID string) *engine.Batch {
	return b.Absent(recordKey(txnID)).Delete(decisionKey(txnID))
}

// Release ends the retention of txnID's decision: once released, the same
// txn_id may begin again as a new transaction. It fails with ErrUnresolved
// while participants still hold intents.
func (c *Coordinator) Release(ctx context.Context, txnID string, with *engine.Batch) error {
	b := ReleaseInto(new(engine.Batch), txnID).Merge(with)
	if err := fault.Inject(fault.TwoPCReleaseBefore); err != nil {
		return err
	}
	if _, err := c.apply(ctx, b); err != nil {
		if key, ok := engine.FailedKey(err); ok && string(key) == string(recordKey(txnID)) {
			return ErrUnresolved
		}
		return err
	}
	return fault.Inject(fault.TwoPCReleaseAfter)
}
