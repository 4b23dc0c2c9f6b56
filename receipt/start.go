package receipt

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Starting is the step only the executor's job takes (docs/design.md §5.6): the
// receipt becomes started in the same atomic Apply as the transaction's
// Begin — its coordinator record and every participant's prepare — so a
// started receipt always has the 2PC record recovery reconciles it by.
// A new receipt is created started (createStarted); a pending one is
// started here, fenced by its claim.

// start executes a pending receipt this process holds, as plan makes it:
// started + Begin in one fenced write, then the decision. A refusal makes
// it terminal not_applied.
func (fl *flow) start(ctx context.Context, a *attempt, plan planner) (Answer, error) {
	txn, refusal, err := plan(ctx, a)
	if refusal != nil {
		return fl.publish(ctx, a, notApplied(refusal, a.id))
	}
	if err != nil {
		return Answer{}, err
	}
	now := fl.core.clock.Now()
	a.claim, a.until = claimExtended, now.Add(fl.core.opts.LeaseTTL)
	b := new(store.Batch)
	if err := a.held.Fence(b); err != nil {
		return fl.stuck(a, classifyStep(err), err)
	}
	started := *a.rec
	claim := a.held.Claim()
	started.State, started.Owner, started.Started, started.Request = Started, &claim, now.UnixMilli(), nil
	val, err := EncodeRecord(&started)
	if err != nil {
		return Answer{}, err
	}
	b.AtVersion(receiptKey(a.id), a.ver).Put(receiptKey(a.id), val)
	lease.PutExpiry(b, a.id, a.until)
	return fl.begin(ctx, a, txn, &started, b)
}

// planLatched plans pending receipt a from its stored request and takes
// its documents' latches (doclatch.go); the caller holds the executor
// slot start needs (no one waits for a slot holding a latch). wait=false takes
// them only if they are free now (maintenance, which moves on rather than
// stall its pass). The planner it returns is the plan made; unlock gives
// the latches back. ok=false: the latches are busy, nothing is held.
func (fl *flow) planLatched(ctx context.Context, a *attempt, wait bool) (plan planner, unlock func(), ok bool) {
	txn, refusal, err := fl.replan(ctx, a)
	plan = func(context.Context, *attempt) (twopc.Txn, *code.Error, error) { return txn, refusal, err }
	if refusal != nil || err != nil {
		return plan, func() {}, true // start answers them
	}
	if wait {
		unlock, ok = fl.exec.latchDocs(ctx, txn)
		return plan, unlock, ok
	}
	keys := latchKeys(txn)
	if !fl.exec.docs.lock(ctx, keys, firedAlready) {
		return nil, nil, false
	}
	return plan, func() { fl.exec.docs.unlock(keys) }, true
}

// firedAlready is a timeout that has passed: a latch wait that gives up
// at once when the latch is busy.
func firedAlready() <-chan time.Time {
	ch := make(chan time.Time)
	close(ch)
	return ch
}

// begin writes Begin together with `with`, the write that makes the receipt
// started (publishing it, for a new one), and goes on by the result:
// prepared → decide; a participant's "no" → make the refusal durable; the
// transaction decided before → publish that decision; otherwise by the
// write's verdict.
func (fl *flow) begin(ctx context.Context, a *attempt, txn twopc.Txn, started *Record, with *store.Batch) (Answer, error) {
	res, err := fl.beginReplanned(ctx, txn, with, a.until)
	switch {
	case err == nil && res.Prepared:
		fl.settle(a, writeDone, res.Version)
		a.wrote(started, res.Version)
		a.parts, a.begun = txn.Participants, true
		fl.core.stats.executed.Add(1)
		result, err := txn.Result()
		if err != nil {
			return Answer{}, err
		}
		return fl.decide(ctx, a, twopc.Committed{Result: result})
	case err == nil && res.Refused != nil && a.cachedPlan:
		// Nothing was written; the refusal may be the cached metadata's
		// (createfirst.go): the next round plans from a fresh read.
		fl.settle(a, writeRetry, 0)
		fl.core.stats.replanned.Add(1)
		return Answer{}, errRetry
	case err == nil && res.Refused != nil && res.Contended:
		return fl.contended(a), nil
	case err == nil && res.Refused != nil:
		return fl.refuse(ctx, a, *res.Refused, started, with)
	case err == nil && !a.creating():
		return fl.publish(ctx, a, envelopeOf(res.Decided, a.id))
	}
	v := classifyWrite(err, a.fence())
	exists := err == nil || errors.Is(err, twopc.ErrInProgress) // begun or decided before
	if exists {
		v = writeRetry
	}
	fl.settle(a, v, 0)
	if exists && a.creating() {
		// The transaction exists although our receipt did not: a
		// concurrent creator of the same receipt in another process won,
		// with the receipt in the same write.
		return fl.lostCreateRace(ctx, a.id)
	}
	return fl.stuck(a, v, err)
}

// contended answers a Begin whose refusal was contention still standing
// after the waits the store allows (replan.go; none on a store one process
// owns, where the document latches order its own batches and an intent
// left in the way belongs to a transaction whose outcome is not known
// yet). Contention is not a conflict (docs/design.md §15), so no abort is
// stored: nothing was written, the receipt keeps the state it had (none,
// for a new key) and the answer is pending — a retry with the same key
// plans again once the holder's outcome is settled.
func (fl *flow) contended(a *attempt) Answer {
	fl.settle(a, writeRetry, 0)
	fl.core.stats.contendedPending.Add(1)
	var st State
	if !a.creating() {
		st = a.rec.State
	}
	return answerPending(a.id, st, msgContended, fl.core.retryAfter())
}

// refuse makes a participant's "no" vote durable the way every outcome is:
// the abort decision (create-if-absent) together with `with`, the write
// that makes the receipt started — nothing was prepared, so there is
// nothing to resolve — and then the terminal envelope. Were the second
// write to fail, recovery finds a started receipt with a retained decision
// and publishes the exact envelope later.
func (fl *flow) refuse(ctx context.Context, a *attempt, ab twopc.Aborted, started *Record, with *store.Batch) (Answer, error) {
	ver, err := fl.core.coord.DecideAt(ctx, a.id, nil, ab, with)
	v := classifyWrite(err, a.fence())
	fl.settle(a, v, ver)
	switch {
	case v == writeDone:
		a.wrote(started, ver)
		return fl.publish(ctx, a, envelopeOf(ab, a.id))
	case a.creating() && errors.Is(err, twopc.ErrDecisionConflict):
		// Decided by a concurrent creator of the same receipt (see
		// lostCreateRace).
		return fl.lostCreateRace(ctx, a.id)
	case a.creating():
		return fl.stuckAs(a, Started, msgRefusalUnknown, v, err)
	}
	return fl.stuck(a, v, err)
}
