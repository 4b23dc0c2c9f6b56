package receipt

import (
	"errors"
	"fmt"
)

// The records this package stores are checked twice against the same
// invariants, as TigerBeetle pairs its assertions: before they are encoded
// (a failure is a bug in the writer: store.InvalidRecord, nothing is
// written) and after they are decoded (a failure is damage: store.
// RecordError, naming the key). Each check holds for every record any
// version of Idem wrote — the golden fixtures pin that — so it is what a
// reader may rely on, not only what this version writes: a started
// receipt, for one, may carry its request (writers before 2026-11-30 kept
// it), and a receipt's timestamps come from a wall clock that may step
// back, so none is ordered against another except where one is computed
// from the other.

// check returns the first invariant r breaks, nil if it is well formed.
func (r *Record) check() error {
	switch {
	case r.Schema < Schema1:
		return errors.New("no schema")
	case r.State < Pending || r.State > Terminal:
		return fmt.Errorf("unknown state %d", r.State)
	case len(r.Fingerprint) == 0:
		return errors.New("no request fingerprint")
	case r.ProtectUntil != 0 && r.ProtectUntil < r.RetainUntil:
		// promise: a tombstone protects at least as long as the receipt replays.
		return fmt.Errorf("protected until %d, before its retention ends at %d", r.ProtectUntil, r.RetainUntil)
	case r.Envelope != nil && r.State != Terminal:
		return fmt.Errorf("a %s receipt with an envelope", r.State)
	}
	switch r.State {
	case Pending:
		if len(r.Request) == 0 {
			return errors.New("pending without its request: no successor could execute it")
		}
		if r.Owner == nil {
			return errors.New("pending without an owner's claim")
		}
	case Started:
		if r.Owner == nil {
			return errors.New("started without an owner's claim")
		}
		if r.Started == 0 {
			return errors.New("started without a start time")
		}
	case Terminal:
		return r.checkTerminal()
	}
	return nil
}

// checkTerminal is check of a terminal receipt: it replays its answer, so
// it must hold one.
func (r *Record) checkTerminal() error {
	// Completion time is not checked: protectUntil reads a record without
	// one, and TestRecord_DecodingIsAdditive decodes one.
	switch {
	case len(r.Request) != 0:
		return errors.New("terminal with its request (dropped once terminal)")
	case r.Schema == Schema1 && r.Outcome == "":
		return errors.New("schema-1 terminal without an outcome")
	case r.Schema == Schema1:
		return nil
	case r.Envelope == nil:
		// EnvelopeOf would replay the generic abort: a wrong answer.
		return errors.New("terminal without an envelope")
	}
	switch e := r.Envelope; {
	case e.Outcome != OutcomeCommitted && e.Outcome != OutcomeAborted && e.Outcome != OutcomeNotApplied:
		return fmt.Errorf("envelope with outcome %q (committed, aborted or not_applied)", e.Outcome)
	case e.Status < 100 || e.Status > 599:
		return fmt.Errorf("envelope with HTTP status %d", e.Status)
	}
	return nil
}

// check returns the first invariant r breaks, nil if it is well formed. An
// open session is held (its owner's claim); an ended one is not, has let
// its staging go, and is retained (its exp/v1 entry is at RetainUntil).
func (r *SessionRecord) check() error {
	switch {
	case r.Schema < 1:
		return errors.New("no schema")
	case r.State < SessionOpen || r.State > SessionAborted:
		return fmt.Errorf("unknown state %d", r.State)
	case r.State == SessionOpen && r.Owner == nil:
		return errors.New("open without an owner's claim")
	case r.State == SessionOpen:
		return nil
	case r.Owner != nil:
		return fmt.Errorf("%s with an owner's claim", r.State)
	case r.Staging != nil:
		return fmt.Errorf("%s with its staging", r.State)
	case r.RetainUntil == 0:
		return fmt.Errorf("%s without a retention deadline", r.State)
	case r.State == SessionCommitted && r.TxnID == "":
		return errors.New("committed without its commit's transaction")
	case r.State == SessionAborted && r.Reason == "":
		return errors.New("aborted without a reason")
	}
	return nil
}

// check returns the first invariant t breaks, nil if it is well formed:
// what its encoding can hold (encodeTomb), so that what is written decodes
// to what was meant.
func (t *Tombstone) check() error {
	switch {
	case tombKey(t.TxnID) == nil:
		return fmt.Errorf("transaction ID %q is not %d hex digits", t.TxnID, 2*txnIDBytes)
	case tombOutcome(t.Outcome) == 0:
		return fmt.Errorf("outcome %q (committed, aborted or not_applied)", t.Outcome)
	case t.Completed.UnixMilli() < 0:
		return fmt.Errorf("completed at %v, before 1970", t.Completed)
	case t.ProtectUntil.UnixMilli() < t.Completed.UnixMilli():
		return fmt.Errorf("protected until %v, before its completion at %v", t.ProtectUntil, t.Completed)
	}
	return nil
}
