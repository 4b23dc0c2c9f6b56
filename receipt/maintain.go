package receipt

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// MaintainStats counts what one maintenance pass did.
type MaintainStats struct {
	Scanned    int // recovery entries read
	Adopted    int // receipts this pass took over from another owner or incarnation
	Terminal   int // receipts made terminal
	DebtPaid   int // visibility debts resolved
	Deferred   int // held by another live owner, or could not progress
	Strays     int // recovery entries of immutable or missing receipts removed
	Released   int // retained decisions released
	LocalBusy  int // receipts (or sessions) a local goroutine was already working on
	ErrorsSeen int
	// SessionsScanned counts the open-session entries read, and
	// SessionsEnded the sessions this pass ended: expired, or presumed
	// aborted after their owner's death.
	SessionsScanned int
	SessionsEnded   int
}

// MaintainOnce is one recovery pass: it walks every recovery entry (all
// owners), executes pending receipts it holds or may adopt from the stored
// canonical request, reconciles started ones through the retained 2PC
// record, resolves visibility debt, releases retained decisions of terminal
// debt-free receipts, and finishes table purges. It uses execution capacity
// only to execute pending receipts.
//
// A receipt the pass cannot advance is counted and passed over — the next
// pass, or a retry, tries again — and its cause is logged, sampled
// (maintainLog).
func (s *Service) MaintainOnce(ctx context.Context) (MaintainStats, error) {
	var ms MaintainStats
	if err := fault.Inject(fault.ReceiptMaintainBefore); err != nil {
		return ms, err // armed with `pause`, this blocks the pass: the supervisor must not care
	}
	s.core.stats.passes.Add(1)
	// The nodes to share dead nodes' receipts with (fairness.go). Without
	// the list this pass ranks itself first, which is safe, only not fair.
	nodes, err := lease.Nodes(ctx, s.core.store, nodesScanMax)
	if err != nil {
		nodes = nil
	}
	// Receipts and sessions share the pass page by page, in turn, so that
	// neither kind's backlog delays the other's recovery (docs/design.md §14).
	receipts := pageWalk{start: []byte(store.NSRecovery), end: store.PrefixEnd([]byte(store.NSRecovery))}
	open := store.NSSession.Prefix("open")
	sessions := pageWalk{start: open, end: store.PrefixEnd(open)}
	page := min(maintainPageMax, s.core.store.Limits().ScanItemsMax)
	budget := func() int { return min(page, MaintainReceiptsMax-ms.Scanned-ms.SessionsScanned) }
	for budget() > 0 && !(receipts.done && sessions.done) {
		if err := receipts.next(ctx, s.core.store, budget(), func(it store.Item) {
			ms.Scanned++
			s.recov.maintainEntry(ctx, it, &ms, nodes)
		}); err != nil {
			return ms, err
		}
		if budget() == 0 {
			break
		}
		if err := sessions.next(ctx, s.core.store, budget(), func(it store.Item) {
			ms.SessionsScanned++
			s.sess.maintainSession(ctx, it, &ms)
		}); err != nil {
			return ms, err
		}
	}
	s.sess.dropQueuedSteps(ctx)
	n, err := s.retain.releaseDecisions(ctx)
	ms.Released += n
	if err != nil {
		return ms, err
	}
	return ms, s.core.tables.Purge(ctx)
}

// pageWalk walks a key range a page at a time.
type pageWalk struct {
	start, end []byte
	done       bool
}

// next reads the next page, if any is left, and hands each item to fn.
func (w *pageWalk) next(ctx context.Context, st store.Store, page int, fn func(store.Item)) error {
	if w.done {
		return nil
	}
	items, err := st.Scan(ctx, w.start, w.end, page)
	if err != nil {
		return err
	}
	for _, it := range items {
		fn(it)
	}
	if len(items) < page {
		w.done = true
	} else {
		w.start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	return nil
}

// maintainEntry advances the receipt of one recovery entry, or removes
// the entry if its receipt is gone or settled.
func (r *recovery) maintainEntry(ctx context.Context, it store.Item, ms *MaintainStats, nodes []string) {
	rest := string(store.NSRecovery.Suffix(it.Key))
	slash := strings.LastIndexByte(rest, '/')
	if slash < 0 {
		return
	}
	id := rest[slash+1:]
	adoptAfter := func(dead string) time.Duration { return r.adoptDelay(id, dead, nodes) }
	if r.heldLiveElsewhere(ctx, id, adoptAfter) {
		ms.Deferred++
		return
	}
	f, mine := r.exec.beginFlight(id)
	if !mine {
		ms.LocalBusy++
		return
	}
	defer r.exec.endFlight(id, f)
	rec, ver, err := r.core.load(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && settled(rec)) {
		// A leftover: the receipt is gone or immutable.
		r.dropStray(ctx, it, id, "stray", ms)
		return
	}
	if err != nil {
		ms.ErrorsSeen++
		r.core.passedOver("load", classifyStep(err), id, err)
		return
	}
	r.advance(ctx, &attempt{id: id, rec: rec, ver: ver, adoptAfter: adoptAfter}, ms)
}

// dropStray deletes maintenance's entry it of id (recov/v1, or a
// session's open entry) whose receipt or session needs nothing more: gone,
// settled or ended. A write that fails is passed over as cause: the next
// pass meets the entry again.
func (r *recovery) dropStray(ctx context.Context, it store.Item, id, cause string, ms *MaintainStats) {
	_, err := r.core.store.Apply(ctx, new(store.Batch).AtVersion(it.Key, it.Version).Delete(it.Key))
	if v := classifyWrite(err, nil); v == writeDone {
		ms.Strays++
	} else {
		r.core.passedOver(cause, v, id, err)
	}
}

// heldLiveElsewhere reports whether another live owner holds the receipt
// id, by a look at its lease taken before any flight begins. Most entries
// a pass walks are such receipts, and a pass that merely looked at one
// under a flight would make a foreground request for it, in that moment,
// answer "in progress" as if this process were working on it — without
// naming the owner it could be forwarded to. An error reads as "not
// known to be": the hold under the flight reads the lease again.
func (r *recovery) heldLiveElsewhere(ctx context.Context, id string, adoptAfter func(string) time.Duration) bool {
	st, err := lease.Read(ctx, r.core.store, id)
	if err != nil || st.ClaimVersion == 0 || st.Claim.Of(r.core.owner) {
		return false
	}
	return ownership(leaseFacts{stored: st, me: r.core.owner, now: r.core.clock.Now(), adoptAfter: adoptAfter(st.Claim.Node)}) == holdBusy
}

// advance takes the mutable receipt a one step as maintenance: the same
// hold, start, reconcile and debt steps a foreground request takes, with
// no time to wait for another owner and no wait for an executor slot.
func (r *recovery) advance(ctx context.Context, a *attempt, ms *MaintainStats) {
	id := a.id
	act, err := r.flow.hold(ctx, a, time.Time{})
	if err != nil {
		ms.Deferred++
		if !errors.Is(err, errNotOurs) {
			r.core.passedOver("hold", classifyStep(err), id, err)
		}
		return
	}
	if act == holdAdopt {
		ms.Adopted++
	}
	switch next(a.rec.State) {
	case stepPayDebt:
		if err := r.payDebt(ctx, a); err != nil {
			ms.Deferred++
			r.core.passedOver("debt", classifyStep(err), id, err)
			return
		}
		ms.DebtPaid++
	case stepStart:
		// Execution capacity is the one thing maintenance needs for a
		// pending receipt; without a free slot it moves on (the next pass,
		// or a retry, runs it) rather than stall the rest of the pass.
		sl, ok := r.exec.tryAcquire()
		if !ok {
			ms.Deferred++
			return
		}
		// So are the documents' latches: one a keyed batch holds now
		// defers it the same way.
		plan, unlock, ok := r.flow.planLatched(ctx, a, false)
		if !ok {
			r.exec.release(sl)
			ms.Deferred++
			return
		}
		ans, err := r.flow.start(ctx, a, plan)
		unlock()
		r.exec.release(sl)
		r.countMaintained("start", a, ans, err, ms)
	case stepReconcile:
		ans, err := r.reconcile(ctx, a)
		r.countMaintained("reconcile", a, ans, err, ms)
	}
}

func (r *recovery) countMaintained(step string, a *attempt, ans Answer, err error, ms *MaintainStats) {
	if err == nil && ans.Terminal {
		ms.Terminal++
		r.core.stats.recovered.Add(1)
		return
	}
	ms.Deferred++
	if err != nil {
		r.core.passedOver(step, classifyStep(err), a.id, err)
	}
}

// passedOver logs, sampled, that a maintenance step went past receipt id
// because of err (verdict v). A lost race is no news: the receipt moved
// on without us.
func (c *core) passedOver(step string, v writeVerdict, id string, err error) {
	if v == writeRetry || v == writeDone {
		return
	}
	cause, n, ok := c.maintainLog.note(c.clock.Now(), step+"/"+v.String())
	if !ok {
		return
	}
	c.opts.Logger.Warn("receipt: maintenance passed over receipts it could not advance",
		"cause", cause, "count", n, "since", c.maintainLog.every, "txn_id", id, "err", err)
}
