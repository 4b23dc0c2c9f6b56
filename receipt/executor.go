package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/lease"
)

// The bounded executor (DESIGN §5.6) is ExecutorMax slots: a receipt's
// job takes one to start and execute a receipt and gives it back when the
// receipt is decided. Lookup, comparison, replay, waiting and adoption
// take none. A foreground request waits for a slot until its deadline and
// otherwise leaves the receipt pending (429); maintenance never waits.
//
// Interactive sessions share the slots (DESIGN §14: one executor capacity
// for both kinds): each step of a session that reads documents or writes
// its record takes one for its duration, and a session's commit, being a
// receipt, takes one as any receipt does. busy counts the slots by kind,
// for the metrics.

// acquire takes an executor slot for a receipt, waiting until deadline at
// most.
func (l *lifecycle) acquire(ctx context.Context, deadline time.Time) bool {
	return l.acquireFor(ctx, deadline, lease.KindReceipt)
}

// acquireFor takes an executor slot for work of kind k.
func (l *lifecycle) acquireFor(ctx context.Context, deadline time.Time, k lease.Kind) bool {
	if !l.waitSlot(ctx, deadline) {
		return false
	}
	l.busy[k].Add(1)
	return true
}

func (l *lifecycle) waitSlot(ctx context.Context, deadline time.Time) bool {
	if l.trySlot() {
		return true
	}
	d := deadline.Sub(l.clock.Now())
	if d <= 0 {
		return false
	}
	select {
	case l.exec <- struct{}{}:
		return true
	case <-l.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}

// tryAcquire takes an executor slot for a receipt if one is free now.
func (l *lifecycle) tryAcquire() bool {
	if !l.trySlot() {
		return false
	}
	l.busy[lease.KindReceipt].Add(1)
	return true
}

func (l *lifecycle) trySlot() bool {
	select {
	case l.exec <- struct{}{}:
		return true
	default:
		return false
	}
}

// release gives back a receipt's slot.
func (l *lifecycle) release() { l.releaseFor(lease.KindReceipt) }

// releaseFor gives back a slot taken for work of kind k.
func (l *lifecycle) releaseFor(k lease.Kind) {
	l.busy[k].Add(-1)
	<-l.exec
}
