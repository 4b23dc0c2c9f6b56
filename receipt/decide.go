package receipt

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Only a typed coordinator outcome turns a started receipt terminal
// (docs/design.md §4). The terminal write carries the complete envelope, drops the
// canonical request and — unless visibility debt keeps them for
// maintenance — the lease and the recovery entry, and moves the retention
// entry to completion + Retention. It is fenced by the claim and the
// receipt's version; with a new decision it shares one Apply (docs/design.md §12:
// the decision and the envelope are one durable point).
//
//	decide           foreground, after Begin: lease margin, then decideAndPublish
//	decideAndPublish a create-if-absent decision + the terminal receipt, one write
//	publish          the terminal receipt of an outcome decided already
//	terminalOps      the writes of a terminal receipt, for all three

// decide publishes the outcome of a transaction this process began: first
// making sure the lease has SafetyMargin left (the started write may have
// used the window up, docs/design.md §7), then the decision and the terminal
// envelope in one write.
func (fl *flow) decide(ctx context.Context, a *attempt, o twopc.Outcome) (Answer, error) {
	if err := fl.core.hb.Ensure(ctx, a.held, fl.core.opts.SafetyMargin); err != nil {
		return fl.stuck(a, classifyStep(err), err)
	}
	if err := fault.Inject(fault.ReceiptDecideBefore); err != nil {
		return Answer{}, err
	}
	return fl.decideAndPublish(ctx, a, o)
}

// decideAndPublish writes decision o create-if-absent together with the
// terminal receipt. If another writer decided first, the winner's outcome
// is published instead; if the outcome cannot be established, the receipt
// stays as it is and the answer is pending.
func (fl *flow) decideAndPublish(ctx context.Context, a *attempt, o twopc.Outcome) (Answer, error) {
	env := envelopeOf(o, a.id)
	a.claim = claimKept
	with, err := fl.fencedTerminal(a, env)
	if err != nil {
		return fl.stuck(a, classifyStep(err), err)
	}
	inForce, ours, err := fl.core.coord.DecideOrLearn(ctx, a.id, a.parts, o, with)
	v := classifyWrite(err, a.fence())
	fl.settle(a, v, 0)
	switch {
	case v == writeDone && ours:
		fl.finished(a, env)
		return Answer{Envelope: env, Terminal: true}, nil
	case v == writeDone:
		// Someone else decided (a successor, after our lease lapsed):
		// publish their outcome if we still may.
		return fl.publish(ctx, a, envelopeOf(inForce, a.id))
	case errors.Is(err, twopc.ErrOutcomeUnknown):
		return fl.stuckAs(a, a.rec.State, msgTxnOutcomeUnknown, v, err)
	}
	return fl.stuck(a, v, err)
}

// publish makes an outcome that is already decided (or a not_applied
// decided before start) the receipt's terminal answer with one fenced
// write.
func (fl *flow) publish(ctx context.Context, a *attempt, env Envelope) (Answer, error) {
	a.claim = claimKept
	b, err := fl.fencedTerminal(a, env)
	if err != nil {
		return fl.stuck(a, classifyStep(err), err)
	}
	if err := fault.Inject(fault.ReceiptTerminalBefore); err != nil {
		return Answer{}, err
	}
	_, err = fl.applyStep(ctx, stepPublishTerminal, b)
	if ok, ans, err := fl.applied(a, 0, err); !ok {
		return ans, err
	}
	fl.finished(a, env)
	return Answer{Envelope: env, Terminal: true}, nil
}

// fencedTerminal is terminalOps conditioned on the claim and on the
// receipt being the version the attempt read or wrote.
func (fl *flow) fencedTerminal(a *attempt, env Envelope) (*store.Batch, error) {
	b := new(store.Batch)
	if err := a.held.Fence(b); err != nil {
		return nil, err
	}
	if fault.Planted(fault.BugTerminalUnfenced) { // planted only under -tags idem_selftest
		b = new(store.Batch)
	}
	b.AtVersion(receiptKey(a.id), a.ver)
	return fl.terminalOps(b, a, env)
}

// terminalOps adds to b the writes that make a.rec terminal with env,
// without conditions. With visibility debt the receipt keeps its lease
// and recovery entry (maintenance resolves the intents); otherwise both go.
func (fl *flow) terminalOps(b *store.Batch, a *attempt, env Envelope) (*store.Batch, error) {
	t := fl.terminal(a, env, fl.core.clock.Now())
	if fl.owesVisibility(a) {
		t.Debt |= VisibilityDebt
	} else {
		t.Owner = nil
		lease.Drop(b, a.id)
		b.Delete(recoveryKey(a.held.Claim().Node, a.id))
	}
	val, err := EncodeRecord(&t)
	if err != nil {
		return nil, err
	}
	b.Put(receiptKey(a.id), val)
	a.final = &t
	if t.RetainUntil != a.rec.RetainUntil {
		b.Delete(expiryKey(a.rec.RetainUntil, a.id)).Put(expiryKey(t.RetainUntil, a.id), nil)
	}
	return b, nil
}

// terminal returns a.rec made terminal with env at now, and retained from
// then.
func (fl *flow) terminal(a *attempt, env Envelope, now time.Time) Record {
	t := *a.rec
	t.State, t.Request, t.Completed, t.Envelope = Terminal, nil, now.UnixMilli(), storedFor(&t, env)
	t.RetainUntil = now.Add(fl.core.opts.Retention).UnixMilli()
	t.ProtectUntil = fl.core.promise(now, t.RetainUntil)
	return t
}
