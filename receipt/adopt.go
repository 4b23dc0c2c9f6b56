package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// Holding a mutable receipt comes before any step on it: this process must
// hold its lease claim, the fencing token of every write (docs/design.md §7). A
// claim of ours is used as it is; one of an older incarnation of this node
// is adopted at once, anyone else's once it expired by our clock (DESIGN
// §5.3) — with one CAS on the claim and the expiry key, so a renewal that
// lands first proves the owner alive and the adoption fails.

// hold makes a.held this process's hold on the mutable receipt a, adopting
// it if the lease allows, and says which way it went (ownership).
// errNotOurs means another live owner holds it (holdWait: the caller has
// until deadline to wait for it; holdBusy: no time).
func (fl *flow) hold(ctx context.Context, a *attempt, deadline time.Time) (holdAction, error) {
	st, err := lease.Read(ctx, fl.core.store, a.id)
	if err != nil {
		return 0, err
	}
	f := leaseFacts{stored: st, me: fl.core.owner, now: fl.core.clock.Now(), deadline: deadline}
	if a.adoptAfter != nil {
		f.adoptAfter = a.adoptAfter(st.Claim.Node)
	}
	tracked, ok := fl.core.active.Get(a.id)
	if ok {
		claim, _, _, status := tracked.Snapshot()
		f.tracked, f.trackedClaim, f.trackedLost = true, claim, status == lease.Lost
	}
	act := ownership(f)
	switch act {
	case holdGone:
		return act, errRetry
	case holdResync:
		if err := tracked.Resync(ctx, fl.core.store); err != nil {
			return act, err
		}
		a.held = tracked
	case holdResume:
		a.held = lease.Resume(a.id, st)
		a.held.Since = a.born()
		fl.core.active.Add(a.held)
	case holdAdopt:
		return act, fl.adopt(ctx, a, st)
	default:
		a.holder = lease.Owner{Node: st.Claim.Node, Incarnation: st.Claim.Incarnation}
		return act, errNotOurs
	}
	return act, nil
}

// adopt moves receipt a to this owner with one CAS on its lease st, its
// unchanged record and its recovery entry.
func (fl *flow) adopt(ctx context.Context, a *attempt, st lease.State) error {
	a.claim, a.until = claimPublished, fl.core.clock.Now().Add(fl.core.opts.LeaseTTL)
	b := new(store.Batch).AtVersion(receiptKey(a.id), a.ver)
	a.held = lease.ClaimAdopt(b, a.id, st, fl.core.owner, a.until)
	b.Delete(recoveryKey(st.Claim.Node, a.id)).Put(recoveryKey(fl.core.owner.Node, a.id), nil)
	a.held.Since = a.born()
	fl.core.active.Add(a.held)
	if err := fault.Inject(fault.ReceiptAdoptBefore); err != nil {
		fl.settle(a, writeFailed, 0)
		return err
	}
	ver, err := fl.core.store.Apply(ctx, b)
	v := classifyWrite(err, a.fence())
	fl.settle(a, v, ver)
	switch v {
	case writeDone:
	case writeRetry:
		return errRetry // renewed, adopted by someone else, or changed
	default:
		return err
	}
	fl.core.stats.adopted.Add(1)
	fl.core.opts.Logger.Info("receipt: adopted", "txn_id", a.id, "from", st.Claim.Node, "from_incarnation", st.Claim.Incarnation)
	return nil
}
