package receipt

import (
	"context"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// Reconciliation finishes what a receipt's own execution left unfinished,
// by whoever holds it now (a retry, or maintenance after a crash) and
// without executing again (docs/design.md §4, §6): a started receipt learns its
// decision from the retained 2PC record, or has one decided by the
// recovery policy through the same create-if-absent; a terminal receipt
// with visibility debt has its intents resolved.

// reconcile finishes a started receipt whose execution is not running
// here.
func (r *recovery) reconcile(ctx context.Context, a *attempt) (Answer, error) {
	return r.settleStarted(ctx, a, func(st twopc.Status) twopc.Outcome {
		if !st.Begun {
			// Started but never prepared: nothing to commit.
			return twopc.PresumedOutcome(twopc.PresumeAbort, nil)
		}
		return twopc.PresumedFor(r.core.opts.recoveryPolicy(), st)
	})
}

// settleStarted makes held started receipt a terminal: with the decision
// in force, learned from the retained 2PC record, or — none yet — with
// undecided's outcome, written through the decision's create-if-absent.
func (r *recovery) settleStarted(ctx context.Context, a *attempt, undecided func(twopc.Status) twopc.Outcome) (Answer, error) {
	st, err := r.core.coord.Lookup(ctx, a.id)
	if err != nil {
		return r.flow.stuck(a, classifyStep(err), err)
	}
	a.begun = st.Begun
	if st.Decision != nil {
		if st.Begun && !r.core.opts.knobs.DeferResolution {
			if _, err := r.core.coord.Resolve(ctx, a.id); err != nil {
				return r.flow.stuck(a, classifyStep(err), err)
			}
		}
		return r.flow.publish(ctx, a, envelopeOf(st.Decision, a.id))
	}
	if err := r.core.hb.Ensure(ctx, a.held, r.core.opts.SafetyMargin); err != nil {
		return r.flow.stuck(a, classifyStep(err), err)
	}
	return r.flow.decideAndPublish(ctx, a, undecided(st))
}

// payDebt resolves the intents of a terminal receipt with visibility debt
// and then drops its lease, which makes it immutable and cleanable.
func (r *recovery) payDebt(ctx context.Context, a *attempt) error {
	if _, err := r.core.coord.Resolve(ctx, a.id); err != nil {
		return err
	}
	a.claim = claimKept
	b := new(store.Batch)
	if err := a.held.Fence(b); err != nil {
		return err
	}
	t := *a.rec
	t.Debt &^= VisibilityDebt
	t.Owner = nil
	val, err := EncodeRecord(&t)
	if err != nil {
		return err
	}
	b.AtVersion(receiptKey(a.id), a.ver).Put(receiptKey(a.id), val).Delete(recoveryKey(a.held.Claim().Node, a.id))
	lease.Drop(b, a.id)
	_, err = r.core.store.Apply(ctx, b)
	if v := classifyWrite(err, a.fence()); v != writeDone {
		r.flow.settle(a, v, 0)
		return err
	}
	r.core.active.Remove(a.id, a.held)
	r.retain.queueRelease(a.id)
	return nil
}
