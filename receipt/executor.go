package receipt

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/lease"
)

// The bounded executor (docs/design.md §5.6) is ExecutorMax slots: a receipt's
// job takes one to start and execute a receipt and gives it back when the
// receipt is decided. Lookup, comparison, replay, waiting and adoption
// take none. A foreground request waits for a slot until its deadline and
// otherwise leaves the receipt pending (429); maintenance never waits.
//
// Interactive sessions share the slots (docs/design.md §14: one executor capacity
// for both kinds): each step of a session that reads documents or writes
// its record takes one for its duration, and a session's commit, being a
// receipt, takes one as any receipt does. busy counts the slots by kind,
// for the metrics.
//
// How long a slot is held is measured (drainMeter), so that a refusal can
// say when the executor will have room again.

// executor is what bounds and orders the work done here: the slots, the
// local flights (at most one goroutine writes a receipt here; duplicates
// wait on it, flight.go), the latches of the documents new receipts are
// committing (doclatch.go: contention is waited out) and the
// per-principal quotas (quota.go, quota_sessions.go).
type executor struct {
	core    *core
	slots   chan struct{}   // executor slots
	busy    [2]atomic.Int64 // slots in use, by lease.Kind
	drain   drainMeter      // the slots' measured pace
	quotas  quotas          // per-principal bounds (quota.go)
	flights flightSet
	docs    docLatches
}

func newExecutor(c *core) *executor {
	return &executor{core: c, slots: make(chan struct{}, c.opts.ExecutorMax), quotas: newQuotas()}
}

// slot is an executor slot taken for work of kind k at start.
type slot struct {
	k     lease.Kind
	start time.Time
}

// acquire takes an executor slot for a receipt, waiting until deadline at
// most.
func (x *executor) acquire(ctx context.Context, deadline time.Time) (slot, bool) {
	return x.acquireFor(ctx, deadline, lease.KindReceipt)
}

// acquireFor takes an executor slot for work of kind k.
func (x *executor) acquireFor(ctx context.Context, deadline time.Time, k lease.Kind) (slot, bool) {
	if !x.waitSlot(ctx, deadline) {
		return slot{}, false
	}
	x.busy[k].Add(1)
	return slot{k: k, start: x.core.clock.Now()}, true
}

func (x *executor) waitSlot(ctx context.Context, deadline time.Time) bool {
	if x.trySlot() {
		return true
	}
	d := deadline.Sub(x.core.clock.Now())
	if d <= 0 {
		return false
	}
	x.drain.waiting.Add(1)
	defer x.drain.waiting.Add(-1)
	select {
	case x.slots <- struct{}{}:
		return true
	case <-x.core.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}

// tryAcquire takes an executor slot for a receipt if one is free now.
func (x *executor) tryAcquire() (slot, bool) {
	if !x.trySlot() {
		return slot{}, false
	}
	x.busy[lease.KindReceipt].Add(1)
	return slot{k: lease.KindReceipt, start: x.core.clock.Now()}, true
}

func (x *executor) trySlot() bool {
	select {
	case x.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// release gives back slot s and measures how long it was held.
func (x *executor) release(s slot) {
	x.drain.held(x.core.clock.Now().Sub(s.start))
	x.busy[s.k].Add(-1)
	<-x.slots
}

// drainMeter measures the executor: how long a slot is held (an EWMA) and
// how many wait for one.
type drainMeter struct {
	holdNanos atomic.Int64 // EWMA of a slot's hold time
	waiting   atomic.Int64 // goroutines waiting for a slot now
}

// drainWeightShift sets the EWMA's weight of a new sample to 1/8, as
// TCP's smoothed round-trip time (RFC 6298): a few dozen executions move
// it, one slow outlier does not.
const drainWeightShift = 3

// held folds one slot's hold time d into the average.
func (m *drainMeter) held(d time.Duration) {
	d = max(d, 0)
	for {
		old := m.holdNanos.Load()
		next := old + (int64(d)-old)>>drainWeightShift
		if old == 0 {
			next = int64(d) // the first sample is the average
		}
		if m.holdNanos.CompareAndSwap(old, next) {
			return
		}
	}
}

// Bounds of a drain-time Retry-After.
const (
	// DrainRetryAfterMin is the least a drain-time Retry-After says: a
	// second, Retry-After's resolution.
	DrainRetryAfterMin = time.Second
	// DrainRetryAfterMax caps it: past this the estimate (an average
	// times a queue that will have changed) says little, and a client
	// told to stay away longer would idle while the executor frees up.
	DrainRetryAfterMax = 30 * time.Second
)

// drainTime is how long the executor needs, at its measured pace, to
// work through the slots in use and the requests waiting for one:
// average hold × (busy + waiting) / slots, within the drain bounds.
func (x *executor) drainTime() time.Duration {
	queue := int64(len(x.slots)) + x.drain.waiting.Load()
	est := time.Duration(x.drain.holdNanos.Load() * queue / int64(cap(x.slots)))
	return min(max(est, DrainRetryAfterMin), DrainRetryAfterMax)
}
