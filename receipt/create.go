package receipt

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Creation publishes a receipt that does not exist yet (docs/design.md §5.3
// absent), in one Apply conditioned on its absence, together with its
// lease, recovery and retention entries — and, when it can start at once,
// with the transaction's Begin (docs/design.md §12: the receipt is durable no
// later than the first durable effect). Each write is preceded by the
// receipt/create-before failpoint.

// create publishes a new receipt a.rec (identity, fingerprint and
// canonical request filled in): terminal not_applied when plan refuses it;
// otherwise started together with the transaction's Begin when an executor
// slot is free, or pending when none is.
func (fl *flow) create(ctx context.Context, a *attempt, plan planner, deadline time.Time) (Answer, error) {
	f, mine := fl.exec.beginFlight(a.id)
	if !mine && a.cachedPlan {
		// Created before any lookup (createfirst.go): the key may well
		// exist — a retry racing a retry — and only a read says whether
		// the flight here is a create to wait for.
		return Answer{}, errRetry
	}
	if !mine {
		return fl.awaitLocal(ctx, a.id, f, deadline)
	}
	defer fl.exec.endFlight(a.id, f)
	now := fl.core.clock.Now()
	a.rec.Created, a.rec.RetainUntil = now.UnixMilli(), now.Add(fl.core.opts.Retention).UnixMilli()
	txn, refusal, err := plan(ctx, a)
	if refusal == nil && err != nil {
		return Answer{}, err
	}
	facts := createFacts{refused: refusal != nil}
	if !facts.refused {
		var sl slot
		if sl, facts.slotFree = fl.exec.acquire(ctx, deadline); facts.slotFree {
			defer fl.exec.release(sl)
			// The documents' latches once a slot is held (doclatch.go: no
			// one waits for a slot holding a latch). A wait that runs out
			// defers the batch as a pending receipt, as a full executor does.
			var unlock func()
			if unlock, facts.latched = fl.exec.latchDocs(ctx, txn); facts.latched {
				a.latches = unlock
				defer a.unlatch()
			}
		}
		facts.chains, facts.direct = fl.core.store.Capabilities().Chain != nil, fl.core.coord.Direct(txn)
		facts.separateDecide = fl.core.opts.knobs.SeparateDecide
	}
	switch route := routeOf(facts); route {
	case routeNotApplied:
		return fl.createNotApplied(ctx, a, refusal)
	case routePending:
		return fl.createPending(ctx, a)
	default:
		return fl.createStarted(ctx, a, txn, route)
	}
}

// createNotApplied makes a preflight failure the receipt's terminal answer
// (docs/design.md §5.5): deterministic, decided before anything started, so the
// receipt has no lease and no request.
func (fl *flow) createNotApplied(ctx context.Context, a *attempt, refusal *code.Error) (Answer, error) {
	env := notApplied(refusal, a.id)
	rec := a.rec
	now := fl.core.clock.Now()
	rec.State, rec.Completed, rec.Envelope, rec.Request = Terminal, now.UnixMilli(), storedFor(rec, env), nil
	rec.ProtectUntil = fl.core.promise(now, rec.RetainUntil)
	val, err := EncodeRecord(rec)
	if err != nil {
		return Answer{}, err
	}
	k := a.keys()
	b := fl.absentReceipt(k).Put(k.receipt, val).Put(expiryKey(rec.RetainUntil, a.id), nil)
	a.final = rec
	if a.alongside != nil {
		if err := a.alongside(b); err != nil {
			return fl.stuck(a, classifyStep(err), err)
		}
	}
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		return Answer{}, err
	}
	_, err = fl.applyStep(ctx, stepPublishNotApplied, b)
	if v := classifyWrite(err, nil); v != writeDone {
		return fl.stuck(a, v, err)
	}
	a.publishedOnce()
	fl.core.countTerminal(env)
	return Answer{Envelope: env, Terminal: true}, nil
}

// What the write that publishes a new receipt holds, at most, before a
// planner's or a session's additions: the receipt's and its tombstone's
// absence and the claim's conditions; the claim, its expiry, the receipt,
// its recovery and retention entries.
const (
	publishCondsMax = 4
	publishOpsMax   = 6
)

// absentReceipt starts the write that publishes a receipt (at k.receipt,
// which the caller also puts): conditioned
// on its absence, and on the absence of its tombstone — the proof, not
// the lookup before it, that an expired key never executes again.
func (fl *flow) absentReceipt(k receiptKeys) *store.Batch {
	// Sized for the claim and the receipt's writes that follow (newClaimed):
	// grown once, not write by write.
	return fl.addAbsentReceipt(new(store.Batch).Grow(publishCondsMax, publishOpsMax), k)
}

// addAbsentReceipt adds absentReceipt's conditions to b.
func (fl *flow) addAbsentReceipt(b *store.Batch, k receiptKeys) *store.Batch {
	b.Absent(k.receipt)
	if k.tomb != nil {
		b.Absent(k.tomb)
	}
	return b
}

// createPending publishes a pending receipt when no executor slot is free:
// a retry with the same key, or maintenance, runs it from its stored
// request.
func (fl *flow) createPending(ctx context.Context, a *attempt) (Answer, error) {
	b, err := fl.newClaimed(a, Pending, fl.core.clock.Now())
	if err != nil {
		return Answer{}, err
	}
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		return fl.notDone(a, err)
	}
	v, err := fl.applyStep(ctx, stepPublishPending, b)
	if ok, ans, err := fl.applied(a, v, err); !ok {
		return ans, err
	}
	a.wrote(a.rec, v)
	return fl.exec.refuseExecutor(a.id), nil
}

// createStarted publishes a new receipt, by route (writeplan.go): already
// terminal in the write that commits it (createTerminal), started with
// Begin and terminal with the decision in one chain (createCommitted), or
// started with Begin and then decided (begin, decide) — the route the
// first two take on when their write wrote nothing.
func (fl *flow) createStarted(ctx context.Context, a *attempt, txn twopc.Txn, route createRoute) (Answer, error) {
	if err := fault.Inject(fault.ReceiptCreateBefore); err != nil {
		return fl.notDone(a, err)
	}
	if route == routeOnce {
		// One write commits it all: once it is sequenced, the next batch
		// on its documents may stage on it (store.LatestReader) and
		// share its fsync (docs/receipts.md, "Hot documents").
		octx := ctx
		if a.latches != nil {
			octx = store.OnSequenced(ctx, a.unlatch)
		}
		if ans, done, err := fl.createTerminal(octx, a, txn); done {
			return ans, err
		}
		route = route.fallback() // nothing was written: Begin and Decide tell apart what stopped it
	}
	b, err := fl.newClaimed(a, Started, fl.core.clock.Now())
	if err != nil {
		return Answer{}, err
	}
	if route == routeChained {
		if ans, done, err := fl.createCommitted(ctx, a, txn, b); done {
			return ans, err
		}
	}
	return fl.begin(ctx, a, txn, a.rec, b)
}

// newClaimed builds the write that publishes a.rec in state st (pending or
// started at now) under a new claim of this owner, and adds the claim to
// the active set — before the write that publishes it (docs/design.md §7).
func (fl *flow) newClaimed(a *attempt, st State, now time.Time) (*store.Batch, error) {
	a.claim, a.until = claimPublished, now.Add(fl.core.opts.LeaseTTL)
	k := a.keys()
	b := fl.absentReceipt(k)
	a.held = lease.ClaimNew(b, a.id, fl.core.owner, a.until)
	claim := a.held.Claim()
	rec := a.rec
	rec.State, rec.Owner = st, &claim
	if st == Started {
		// A started receipt never executes again — recovery reconciles it
		// through the 2PC record written in the same Apply — so it does
		// not carry the canonical request (only pending receipts need it).
		rec.Started, rec.Request = now.UnixMilli(), nil
	}
	val, err := EncodeRecord(rec)
	if err != nil {
		return nil, err
	}
	b.Put(k.receipt, val).Put(recoveryKey(fl.core.owner.Node, a.id), nil).Put(expiryKey(rec.RetainUntil, a.id), nil)
	if a.alongside != nil {
		if err := a.alongside(b); err != nil {
			return nil, err
		}
	}
	if a.held.Since = a.born(); a.held.Since.IsZero() {
		a.held.Since = now
	}
	fl.core.active.Add(a.held)
	return b, nil
}

// createCommitted publishes the started receipt with Begin and the
// committed terminal receipt with the decision as one chain (one wait).
// done is false when nothing was written and the caller goes on with Begin.
func (fl *flow) createCommitted(ctx context.Context, a *attempt, txn twopc.Txn, create *store.Batch) (ans Answer, done bool, err error) {
	var env Envelope
	a.parts, a.begun = txn.Participants, true // the chain's first link begins it
	terminal := func(result []byte) (*store.Batch, error) {
		env = envelopeOf(twopc.Committed{Result: result}, a.id)
		// No fence: the claim is written by the chain's first link and
		// nothing can come between the two.
		return fl.terminalOps(new(store.Batch), a, env)
	}
	ch, ok, err := fl.core.coord.BeginCommit(ctx, txn, create, terminal)
	if !ok {
		a.parts, a.begun = nil, false
		if err == nil {
			return Answer{}, false, nil
		}
		ans, err := fl.notDone(a, err)
		return ans, true, err
	}
	fl.settle(a, writeDone, ch.Begun)
	fl.core.stats.executed.Add(1)
	fl.finished(a, env)
	if err != nil { // a failpoint after the durable chain
		return Answer{}, true, err
	}
	return Answer{Envelope: env, Terminal: true}, true, nil
}

// lostCreateRace answers a create that found the receipt's transaction
// already begun or decided. Local duplicates share a flight, and the
// receipt layer begins a transaction only in the write that publishes its
// receipt (or on an existing receipt), so this is another process's create
// of the same receipt that won: the lookup is retried and finds its receipt
// (in progress, or terminal to replay). The winner's write may be sequenced
// but not yet readable; if the receipt still does not show, the retries of
// Execute end in a typed pending answer, never in an error.
func (fl *flow) lostCreateRace(ctx context.Context, id string) (Answer, error) {
	if _, err := fl.core.store.Get(ctx, receiptKey(id)); errors.Is(err, store.ErrNotFound) {
		fl.core.opts.Logger.Debug("receipt: transaction exists before its receipt is visible; retrying the lookup", "txn_id", id)
	}
	return Answer{}, errRetry
}
