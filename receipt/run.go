package receipt

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// The durable points of a keyed request on the happy path are two writes
// (DESIGN §12):
//
//  1. Begin: the receipt (created as started, with its lease, recovery and
//     expiry entries), the coordinator record and every participant's
//     intents — one atomic Apply.
//  2. Decide: the create-if-absent decision, the resolution of every
//     intent, and the terminal receipt with its complete envelope, fenced
//     by the lease — one atomic Apply.
//
// For a new receipt on a store that shares one log the two are chained
// (twopc.BeginCommit): sequenced back to back, durable with one fsync wait,
// and the log never holds the second without the first. Releasing the
// retained decision happens later, off the response path.

func participantsOf(p *table.Plan) []twopc.Participant {
	out := make([]twopc.Participant, len(p.Shards))
	for i, s := range p.Shards {
		out[i] = s
	}
	return out
}

func txnFor(id string, plan *table.Plan) twopc.Txn {
	return twopc.Txn{ID: id, Participants: participantsOf(plan),
		Result: func() ([]byte, error) { return resultJSON(plan.Result()), nil }}
}

// createStarted publishes a new receipt as started together with Begin.
func (s *Service) createStarted(ctx context.Context, id string, rec *Record, plan *table.Plan) (Answer, error) {
	start := s.clock.Now()
	until := start.Add(s.opts.LeaseTTL)
	b := new(engine.Batch).Absent(receiptKey(id))
	held := lease.ClaimNew(b, id, s.owner, until)
	claim := held.Claim()
	// A started receipt never executes again — recovery reconciles it
	// through the 2PC record written in the same Apply — so it does not
	// carry the canonical request (only pending receipts need it).
	rec.State, rec.Owner, rec.Started, rec.Request = Started, &claim, start.UnixMilli(), nil
	val, err := EncodeRecord(rec)
	if err != nil {
		return Answer{}, err
	}
	b.Put(receiptKey(id), val).Put(recoveryKey(s.owner.Node, id), nil).Put(expiryKey(rec.RetainUntil, id), nil)
	s.active.Add(held) // before the write that publishes it
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		s.active.Remove(id, held)
		return Answer{}, err
	}
	txn := txnFor(id, plan)
	if !s.opts.SeparateDecide {
		if a, done, err := s.createCommitted(ctx, id, rec, held, until, txn, b); done {
			return a, err
		}
		// Nothing was written: Begin and Decide tell apart whatever
		// stopped the chain.
	}
	res, err := s.coord.Begin(ctx, txn, b)
	switch {
	case err == nil && res.Prepared:
		held.Confirmed(res.Version, until)
		s.stats.executed.Add(1)
		return s.decide(ctx, id, rec, res.Version, held, txn.Participants, twopc.Committed{Result: resultJSON(plan.Result())})
	case err == nil && res.Refused != nil:
		return s.publishRefused(ctx, id, rec, held, until, b, *res.Refused)
	case err == nil, errors.Is(err, twopc.ErrInProgress):
		// The transaction exists (begun or decided) although our receipt
		// did not: a concurrent creator of the same receipt in another
		// process won, with the receipt in the same write.
		s.active.Remove(id, held)
		return s.lostCreateRace(ctx, id)
	case errors.Is(err, engine.ErrConditionFailed):
		s.active.Remove(id, held)
		return Answer{}, errRetry // a duplicate published first
	case errors.Is(err, engine.ErrAmbiguous):
		held.Unconfirm()
		return answerPending(id, 0, "publishing the receipt had an unknown outcome; retry with the same key", s.retryAfter()), nil
	}
	s.active.Remove(id, held)
	return Answer{}, err
}

// createCommitted publishes the started receipt with Begin and the
// committed terminal receipt with the decision as one chain (one wait).
// done is false when nothing was written and the caller goes on with Begin.
func (s *Service) createCommitted(ctx context.Context, id string, rec *Record, held *lease.Held, until time.Time, txn twopc.Txn, create *engine.Batch) (a Answer, done bool, err error) {
	debt := s.opts.DeferResolution
	var env Envelope
	terminal := func(result []byte) (*engine.Batch, error) {
		env = envelopeOf(twopc.Committed{Result: result}, id)
		// No fence: the claim is written by the chain's first link and
		// nothing can come between the two.
		return s.terminalOps(new(engine.Batch), id, rec, held, env, debt)
	}
	ch, ok, err := s.coord.BeginCommit(ctx, txn, create, terminal)
	switch {
	case ok:
		held.Confirmed(ch.Begun, until)
		s.stats.executed.Add(1)
		s.finished(id, held, env, debt)
		if err != nil { // a failpoint after the durable chain
			return Answer{}, true, err
		}
		return Answer{Envelope: env, Terminal: true}, true, nil
	case errors.Is(err, twopc.ErrOutcomeUnknown):
		held.Unconfirm()
		return answerPending(id, 0, "publishing the receipt had an unknown outcome; retry with the same key", s.retryAfter()), true, nil
	case err != nil:
		s.active.Remove(id, held)
		return Answer{}, true, err
	}
	return Answer{}, false, nil
}

// publishRefused makes a participant's "no" vote durable the way every
// outcome is: the abort decision (create-if-absent) together with the
// started receipt in `started` — nothing was prepared, so there is nothing
// to resolve — and then the terminal envelope. Were the second write to
// fail, recovery finds a started receipt with a retained decision and
// publishes the exact envelope later.
func (s *Service) publishRefused(ctx context.Context, id string, rec *Record, held *lease.Held, until time.Time, started *engine.Batch, ab twopc.Aborted) (Answer, error) {
	v, err := s.coord.DecideAt(ctx, id, nil, ab, started)
	switch {
	case err == nil:
		held.Confirmed(v, until)
		return s.terminalize(ctx, id, rec, v, held, envelopeOf(ab, id), false)
	case errors.Is(err, twopc.ErrDecisionConflict):
		// Decided by a concurrent creator of the same receipt (see
		// lostCreateRace).
		s.active.Remove(id, held)
		return s.lostCreateRace(ctx, id)
	case errors.Is(err, engine.ErrConditionFailed):
		s.active.Remove(id, held)
		return Answer{}, errRetry
	case errors.Is(err, engine.ErrAmbiguous):
		held.Unconfirm()
		return answerPending(id, Started, "publishing the outcome had an unknown result; retry with the same key", s.retryAfter()), nil
	}
	s.active.Remove(id, held)
	return Answer{}, err
}

// lostCreateRace answers a create that found the receipt's transaction
// already begun or decided. Local duplicates share a flight, and the
// receipt layer begins a transaction only in the write that publishes its
// receipt (or on an existing receipt), so this is another process's create
// of the same receipt that won: the lookup is retried and finds its receipt
// (in progress, or terminal to replay). The winner's write may be sequenced
// but not yet readable; if the receipt still does not show, the retries of
// Execute end in a typed pending answer, never in an error.
func (s *Service) lostCreateRace(ctx context.Context, id string) (Answer, error) {
	if _, err := s.store.Get(ctx, receiptKey(id)); errors.Is(err, engine.ErrNotFound) {
		s.opts.Logger.Debug("receipt: transaction exists before its receipt is visible; retrying the lookup", "txn_id", id)
	}
	return Answer{}, errRetry
}

// executePending runs a pending receipt this process holds: preflight from
// the stored canonical request, then started + Begin in one write.
func (s *Service) executePending(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held) (Answer, error) {
	tbl, batch, err := decodeRequest(rec.Request)
	if err != nil {
		return Answer{}, err
	}
	plan, err := s.tables.Preflight(ctx, rec.Principal, tbl, batch)
	var ce *code.Error
	if errors.As(err, &ce) {
		return s.terminalize(ctx, id, rec, ver, held, notApplied(ce, id), false)
	}
	if err != nil {
		return Answer{}, err
	}
	start := s.clock.Now()
	until := start.Add(s.opts.LeaseTTL)
	b := new(engine.Batch)
	if err := held.Fence(b); err != nil {
		return s.pendingOnError(id, Pending, err)
	}
	st := *rec
	claim := held.Claim()
	st.State, st.Owner, st.Started, st.Request = Started, &claim, start.UnixMilli(), nil
	val, err := EncodeRecord(&st)
	if err != nil {
		return Answer{}, err
	}
	b.AtVersion(receiptKey(id), ver).Put(receiptKey(id), val)
	lease.PutExpiry(b, id, until)
	txn := txnFor(id, plan)
	res, err := s.coord.Begin(ctx, txn, b)
	switch {
	case err == nil && res.Prepared:
		held.Renewed(until)
		s.stats.executed.Add(1)
		return s.decide(ctx, id, &st, res.Version, held, txn.Participants, twopc.Committed{Result: resultJSON(plan.Result())})
	case err == nil && res.Refused != nil:
		v, err := s.coord.DecideAt(ctx, id, nil, *res.Refused, b)
		switch {
		case err == nil:
			held.Renewed(until)
			return s.terminalize(ctx, id, &st, v, held, envelopeOf(*res.Refused, id), false)
		case lease.IsFence(err, id):
			held.MarkLost()
			return s.pendingOnError(id, Pending, lease.ErrFenced)
		case errors.Is(err, engine.ErrConditionFailed), errors.Is(err, twopc.ErrDecisionConflict):
			return Answer{}, errRetry
		}
		return s.pendingOnError(id, Pending, err)
	case err == nil:
		return s.terminalize(ctx, id, rec, ver, held, envelopeOf(res.Decided, id), false)
	case lease.IsFence(err, id):
		held.MarkLost()
		return s.pendingOnError(id, Pending, lease.ErrFenced)
	case errors.Is(err, engine.ErrConditionFailed), errors.Is(err, twopc.ErrInProgress):
		return Answer{}, errRetry
	}
	return s.pendingOnError(id, Pending, err)
}

// decide publishes the outcome of a transaction this process began: first
// making sure the lease has SafetyMargin left (the started write may have
// used the window up), then the decision and the terminal envelope in one
// write.
func (s *Service) decide(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held, parts []twopc.Participant, o twopc.Outcome) (Answer, error) {
	if err := s.hb.Ensure(ctx, held, s.opts.SafetyMargin); err != nil {
		return s.pendingOnError(id, Started, err)
	}
	if err := fault.Inject(fault.ReceiptDecideBefore); err != nil {
		return Answer{}, err
	}
	return s.decideTerminal(ctx, id, rec, ver, held, parts, o, true)
}

// decideTerminal writes decision o create-if-absent together with the
// terminal receipt. If another writer decided first, the winner's outcome is
// published instead; if the outcome cannot be established, the receipt
// stays as it is and the answer is pending.
func (s *Service) decideTerminal(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held, parts []twopc.Participant, o twopc.Outcome, begun bool) (Answer, error) {
	env := envelopeOf(o, id)
	debt := begun && s.opts.DeferResolution
	with, err := s.terminalWrite(id, rec, ver, held, env, debt)
	if err != nil {
		return s.pendingOnError(id, rec.State, err)
	}
	inForce, ours, err := s.coord.DecideOrLearn(ctx, id, parts, o, with)
	switch {
	case err == nil && ours:
		s.finished(id, held, env, debt)
		return Answer{Envelope: env, Terminal: true}, nil
	case err == nil:
		// Someone else decided (a successor, after our lease lapsed): publish
		// their outcome if we still may.
		return s.terminalize(ctx, id, rec, ver, held, envelopeOf(inForce, id), debt)
	case lease.IsFence(err, id):
		held.MarkLost()
		return s.pendingOnError(id, rec.State, lease.ErrFenced)
	case errors.Is(err, engine.ErrConditionFailed):
		return Answer{}, errRetry // our view is stale: read the receipt again
	case errors.Is(err, twopc.ErrOutcomeUnknown):
		return answerPending(id, rec.State, "the transaction's outcome is not known yet; retry with the same key", s.retryAfter()), nil
	}
	return s.pendingOnError(id, rec.State, err)
}

// terminalWrite builds the fenced write that makes rec terminal with env.
// With debt the receipt keeps its lease and recovery entry (maintenance
// resolves the intents); otherwise both go.
func (s *Service) terminalWrite(id string, rec *Record, ver engine.Version, held *lease.Held, env Envelope, debt bool) (*engine.Batch, error) {
	b := new(engine.Batch)
	if err := held.Fence(b); err != nil {
		return nil, err
	}
	b.AtVersion(receiptKey(id), ver)
	return s.terminalOps(b, id, rec, held, env, debt)
}

// terminalOps adds to b the writes of terminalWrite, without its
// conditions.
func (s *Service) terminalOps(b *engine.Batch, id string, rec *Record, held *lease.Held, env Envelope, debt bool) (*engine.Batch, error) {
	now := s.clock.Now()
	t := *rec
	t.State, t.Request, t.Completed, t.Envelope = Terminal, nil, now.UnixMilli(), env.stored()
	t.RetainUntil = now.Add(s.opts.Retention).UnixMilli()
	if debt {
		t.Debt |= VisibilityDebt
	} else {
		t.Owner = nil
		lease.Drop(b, id)
		b.Delete(recoveryKey(held.Claim().Node, id))
	}
	val, err := EncodeRecord(&t)
	if err != nil {
		return nil, err
	}
	b.Put(receiptKey(id), val)
	if t.RetainUntil != rec.RetainUntil {
		b.Delete(expiryKey(rec.RetainUntil, id)).Put(expiryKey(t.RetainUntil, id), nil)
	}
	return b, nil
}

// terminalize publishes an outcome that is already decided (or a not_applied
// decided before start) with one fenced write.
func (s *Service) terminalize(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held, env Envelope, debt bool) (Answer, error) {
	b, err := s.terminalWrite(id, rec, ver, held, env, debt)
	if err != nil {
		return s.pendingOnError(id, rec.State, err)
	}
	if err := fault.Inject(fault.ReceiptTerminalBefore); err != nil {
		return Answer{}, err
	}
	_, err = s.store.Apply(ctx, b)
	switch {
	case err == nil:
		s.finished(id, held, env, debt)
		return Answer{Envelope: env, Terminal: true}, nil
	case lease.IsFence(err, id):
		held.MarkLost()
		return s.pendingOnError(id, rec.State, lease.ErrFenced)
	case errors.Is(err, engine.ErrConditionFailed):
		return Answer{}, errRetry
	}
	return s.pendingOnError(id, rec.State, err)
}

// finished updates in-memory state after a terminal write.
func (s *Service) finished(id string, held *lease.Held, env Envelope, debt bool) {
	s.countTerminal(env)
	if !debt {
		s.active.Remove(id, held)
		s.queueRelease(id)
	}
}

// reconcile finishes a started receipt whose execution is not running here:
// it learns the decision from the retained 2PC record, or decides by the
// recovery policy through the same create-if-absent — never executing again.
func (s *Service) reconcile(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held) (Answer, error) {
	st, err := s.coord.Lookup(ctx, id)
	if err != nil {
		return s.pendingOnError(id, Started, err)
	}
	if st.Decision != nil {
		if st.Begun && !s.opts.DeferResolution {
			if _, err := s.coord.Resolve(ctx, id); err != nil {
				return s.pendingOnError(id, Started, err)
			}
		}
		return s.terminalize(ctx, id, rec, ver, held, envelopeOf(st.Decision, id), st.Begun && s.opts.DeferResolution)
	}
	if err := s.hb.Ensure(ctx, held, s.opts.SafetyMargin); err != nil {
		return s.pendingOnError(id, Started, err)
	}
	o := twopc.PresumedOutcome(s.opts.recoveryPolicy(), st.Result)
	if !st.Begun {
		// Started but never prepared: nothing to commit.
		o = twopc.PresumedOutcome(twopc.PresumeAbort, nil)
	}
	return s.decideTerminal(ctx, id, rec, ver, held, nil, o, st.Begun)
}

// payDebt resolves the intents of a terminal receipt with visibility debt
// and then drops its lease, which makes it immutable and cleanable.
func (s *Service) payDebt(ctx context.Context, id string, rec *Record, ver engine.Version, held *lease.Held) error {
	if _, err := s.coord.Resolve(ctx, id); err != nil {
		return err
	}
	b := new(engine.Batch)
	if err := held.Fence(b); err != nil {
		return err
	}
	t := *rec
	t.Debt &^= VisibilityDebt
	t.Owner = nil
	val, err := EncodeRecord(&t)
	if err != nil {
		return err
	}
	b.AtVersion(receiptKey(id), ver).Put(receiptKey(id), val).Delete(recoveryKey(held.Claim().Node, id))
	lease.Drop(b, id)
	if _, err := s.store.Apply(ctx, b); err != nil {
		if lease.IsFence(err, id) {
			held.MarkLost()
		}
		return err
	}
	s.active.Remove(id, held)
	s.queueRelease(id)
	return nil
}

// queueRelease remembers a decision to release once its receipt is terminal
// and debt-free; beyond ReleaseQueueMax the maintenance scan finds it.
func (s *Service) queueRelease(id string) {
	s.releaseMu.Lock()
	if len(s.releaseQ) < ReleaseQueueMax {
		s.releaseQ = append(s.releaseQ, id)
	}
	s.releaseMu.Unlock()
}
