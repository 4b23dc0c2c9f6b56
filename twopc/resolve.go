package twopc

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
)

// Resolve applies a decided transaction to every participant that has not
// acknowledged it yet, one participant per write: the participant's
// resolution and the mark "resolved" in the coordinator record are one
// atomic Apply, so a participant is marked only once its intents are gone.
// When the last one is resolved the record is deleted. It returns the number
// of participants resolved by this call; an undecided transaction is
// ErrInProgress.
func (c *Coordinator) Resolve(ctx context.Context, txnID string) (int, error) {
	o, err := c.Learn(ctx, txnID)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return 0, ErrInProgress
		}
		return 0, err
	}
	_, commit := o.(Committed)
	resolved := 0
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
		next := -1
		for i, pr := range rec.Participants {
			if !pr.Resolved {
				next = i
				break
			}
		}
		b := new(engine.Batch).AtVersion(recordKey(txnID), it.Version)
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
		if _, err := c.store.Apply(ctx, b); err != nil {
			if errors.Is(err, engine.ErrConditionFailed) {
				continue // someone else resolved concurrently: re-read
			}
			return resolved, err
		}
		if next >= 0 {
			resolved++
		}
		if err := fault.Inject(fault.TwoPCResolveAfter); err != nil {
			return resolved, err
		}
	}
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
	if _, err := c.store.Apply(ctx, b); err != nil {
		if key, ok := engine.FailedKey(err); ok && string(key) == string(recordKey(txnID)) {
			return ErrUnresolved
		}
		return err
	}
	return fault.Inject(fault.TwoPCReleaseAfter)
}
