package twopc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
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
		if errors.Is(err, store.ErrNotFound) {
			return 0, ErrInProgress
		}
		return 0, err
	}
	resolved, conflicts := 0, 0
	for {
		step, err := c.nextResolution(ctx, txnID)
		if err != nil || step == nil {
			return resolved, err
		}
		if err := fault.Inject(fault.TwoPCResolveBefore); err != nil {
			return resolved, err
		}
		if _, err := c.apply(ctx, step.batch); err != nil {
			if err := c.resolveRaced(ctx, txnID, step, err); err != nil {
				return resolved, err
			}
			// Someone else resolved concurrently: re-read.
			if conflicts++; conflicts >= ResolveConflictsMax {
				return resolved, fmt.Errorf("%w: %s: %d writes failed their conditions (the last: %v)",
					ErrResolveContended, txnID, conflicts, err)
			}
			continue
		}
		if step.resolvesOne {
			resolved++
		}
		if err := fault.Inject(fault.TwoPCResolveAfter); err != nil {
			return resolved, err
		}
	}
}

// resolution is one write of Resolve, read at the record's and the
// decision's versions it is conditioned on.
type resolution struct {
	batch                 *store.Batch
	resolvesOne           bool // it resolves a participant (else it only deletes the record)
	recVersion, decidedAt store.Version
}

// nextResolution reads txnID's record and decision and returns the write
// that resolves its next unresolved participant (the last one deletes the
// record), or that deletes a record with none left; nil when the record
// is gone: everything is resolved.
func (c *Coordinator) nextResolution(ctx context.Context, txnID string) (*resolution, error) {
	it, err := c.store.Get(ctx, recordKey(txnID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := decodeRecord(it.Key, it.Value)
	if err != nil {
		return nil, fmt.Errorf("twopc: decode record %s: %w", txnID, err)
	}
	o, decided, err := c.learnAt(ctx, txnID)
	if errors.Is(err, store.ErrNotFound) {
		// Released and begun again since the first read: undecided.
		return nil, ErrInProgress
	}
	if err != nil {
		return nil, err
	}
	_, commit := o.(Committed)
	step := &resolution{batch: new(store.Batch).AtVersion(recordKey(txnID), it.Version).AtVersion(decisionKey(txnID), decided),
		recVersion: it.Version, decidedAt: decided}
	next := slices.IndexFunc(rec.Participants, func(pr partRecord) bool { return !pr.Resolved })
	if next < 0 {
		step.batch.Delete(recordKey(txnID))
		return step, nil
	}
	p, err := c.participantAt(it.Key, rec.Participants[next])
	if err != nil {
		return nil, err
	}
	rb, err := p.Resolve(ctx, txnID, commit)
	if err != nil {
		return nil, err
	}
	step.batch.Merge(rb)
	step.resolvesOne = true
	rec.Participants[next].Resolved = true
	if next == len(rec.Participants)-1 {
		step.batch.Delete(recordKey(txnID))
		return step, nil
	}
	val, err := encodeRecord(rec)
	if err != nil {
		return nil, err
	}
	step.batch.Put(recordKey(txnID), val)
	return step, nil
}

// resolveRaced classifies a resolution write that failed: nil when it
// lost to a concurrent resolver (re-read and go on); an error when the
// write failed otherwise, or the decision it stood on did not stand.
func (c *Coordinator) resolveRaced(ctx context.Context, txnID string, step *resolution, err error) error {
	if !errors.Is(err, store.ErrConditionFailed) {
		return err
	}
	if key, _ := store.FailedKey(err); string(key) == string(decisionKey(txnID)) {
		return c.checkDecisionStood(ctx, txnID, step.recVersion, step.decidedAt)
	}
	return nil
}

// checkDecisionStood is the read-back half of "a decided record never
// changes": Resolve read the record at version rec and then the decision at
// version decided, and its write found the decision no longer there. If the
// record is still at rec it stood all along, so no Release (which requires
// it absent) can have removed the decision: the decided record changed,
// which is an error wrapping ErrDecisionChanged. Otherwise the record
// moved too — resolved, or released and begun again — and the caller
// re-reads as after any conflict.
func (c *Coordinator) checkDecisionStood(ctx context.Context, txnID string, rec, decided store.Version) error {
	it, err := c.store.Get(ctx, recordKey(txnID))
	switch {
	case errors.Is(err, store.ErrNotFound):
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
func ReleaseInto(b *store.Batch, txnID string) *store.Batch {
	return b.Absent(recordKey(txnID)).Delete(decisionKey(txnID))
}

// Release ends the retention of txnID's decision: once released, the same
// txn_id may begin again as a new transaction. It fails with ErrUnresolved
// while participants still hold intents.
func (c *Coordinator) Release(ctx context.Context, txnID string, with *store.Batch) error {
	b := ReleaseInto(new(store.Batch), txnID).Merge(with)
	if err := fault.Inject(fault.TwoPCReleaseBefore); err != nil {
		return err
	}
	if _, err := c.apply(ctx, b); err != nil {
		if key, ok := store.FailedKey(err); ok && string(key) == string(recordKey(txnID)) {
			return ErrUnresolved
		}
		return err
	}
	return fault.Inject(fault.TwoPCReleaseAfter)
}
