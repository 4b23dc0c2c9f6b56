package receipt

import (
	"context"
	"time"
)

// The bounded executor (DESIGN §5.6) is ExecutorMax slots: a receipt's
// job takes one to start and execute a receipt and gives it back when the
// receipt is decided. Lookup, comparison, replay, waiting and adoption
// take none. A foreground request waits for a slot until its deadline and
// otherwise leaves the receipt pending (429); maintenance never waits.

// acquire takes an executor slot, waiting until deadline at most.
func (l *lifecycle) acquire(ctx context.Context, deadline time.Time) bool {
	if l.tryAcquire() {
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

// tryAcquire takes an executor slot if one is free now.
func (l *lifecycle) tryAcquire() bool {
	select {
	case l.exec <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l *lifecycle) release() { <-l.exec }
