package receipt

import (
	"errors"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// writeVerdict is what the error of a receipt write means for the receipt,
// and so what the step that wrote does next. Every write site of the
// lifecycle — creation, start, decision, publication, adoption, debt,
// cleanup — reads its error through classifyWrite and acts on the verdict,
// never on the error itself: the rules of docs/design.md §2 (ambiguity is pending,
// never failure) and §7 (a failed condition on the claim is fencing) live
// in this file only.
type writeVerdict uint8

const (
	// writeDone: the write is durable.
	writeDone writeVerdict = iota
	// writeRetry: someone else got there first — a failed condition, a
	// transaction begun or decided by another writer, a receipt that
	// changed under the step (errRetry). Nothing of ours was written: look
	// the receipt up again.
	writeRetry
	// writeFenced: the claim the write was conditioned on is no longer ours
	// (lease.ErrFenced): another owner holds the receipt.
	writeFenced
	// writeAmbiguous: the outcome is unknown (store.ErrAmbiguous,
	// twopc.ErrOutcomeUnknown, lease.ErrUncertain). The receipt keeps the
	// state it may or may not have reached; the answer is pending and a
	// retry with the same key converges.
	writeAmbiguous
	// writeRefused: the store accepts no writes (fail-stopped or closed)
	// and nothing was written.
	writeRefused
	// writeFailed: any other error. Nothing is known beyond it.
	writeFailed
)

func (v writeVerdict) String() string {
	return [...]string{"done", "retry", "fenced", "ambiguous", "refused", "failed"}[v]
}

// classifyWrite reads the error of a receipt write. fence is the key whose
// failed condition means fencing — the receipt's claim (lease.ClaimKey)
// for an owner's write, the job key for the cleaner's — or nil for a write
// that publishes a claim (creation, adoption), whose failed conditions are
// lost races.
func classifyWrite(err error, fence []byte) writeVerdict {
	if err == nil {
		return writeDone
	}
	if key, ok := store.FailedKey(err); ok && fence != nil && string(key) == string(fence) {
		return writeFenced
	}
	switch {
	case errors.Is(err, store.ErrConditionFailed), errors.Is(err, twopc.ErrDecisionConflict), errors.Is(err, twopc.ErrInProgress):
		return writeRetry
	case errors.Is(err, twopc.ErrOutcomeUnknown):
		return writeAmbiguous
	}
	return classifyStep(err)
}

// classifyStep reads the error of a step that is not itself a receipt
// write — a read, a lease check (Fence, Ensure, Resync), a 2PC resolution —
// by the same verdicts. Only the errors that speak about the receipt count:
// a failed condition or a 2PC race inside such a step is the step's own
// failure, not a lost race of ours.
func classifyStep(err error) writeVerdict {
	switch {
	case err == nil:
		return writeDone
	case errors.Is(err, errRetry):
		return writeRetry
	case errors.Is(err, lease.ErrFenced):
		return writeFenced
	case errors.Is(err, store.ErrAmbiguous), errors.Is(err, lease.ErrUncertain):
		return writeAmbiguous
	case errors.Is(err, store.ErrFailStopped), errors.Is(err, store.ErrClosed):
		return writeRefused
	}
	return writeFailed
}
