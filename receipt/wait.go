package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/lease"
)

// Waiting on a receipt another job works on consumes no execution capacity
// (docs/design.md §5.3): a request waits, until its deadline (Prefer: wait), for a
// local flight to end or for another owner to finish, and then looks the
// receipt up again; without time left it answers 409 in progress.

// awaitLocal waits for another goroutine of this process working on id.
func (fl *flow) awaitLocal(ctx context.Context, id string, f *flight, deadline time.Time) (Answer, error) {
	if fl.exec.waitFlight(ctx, f, deadline) {
		return Answer{}, errRetry
	}
	return answerInProgress(id, Started, fl.core.retryAfter()), nil
}

// awaitOwner polls receipt a, which another live owner holds, until it is
// terminal, changes, or its lease expires (then the caller adopts), or
// deadline.
func (fl *flow) awaitOwner(ctx context.Context, a *attempt, deadline time.Time) (Answer, error) {
	for {
		d := deadline.Sub(fl.core.clock.Now())
		if d <= 0 || !fl.sleep(ctx, min(d, fl.core.opts.WaitPoll)) {
			return fl.heldElsewhere(a), nil
		}
		it, err := fl.core.store.Get(ctx, receiptKey(a.id))
		if err != nil || it.Version != a.ver {
			return Answer{}, errRetry
		}
		ls, err := lease.Read(ctx, fl.core.store, a.id)
		if err == nil && lease.MayAdopt(ls, fl.core.owner, fl.core.clock.Now()) {
			return Answer{}, errRetry
		}
	}
}

// heldElsewhere answers in progress for a receipt another live process
// holds, naming it (Answer.Holder) so that a server may forward.
func (fl *flow) heldElsewhere(a *attempt) Answer {
	ans := answerInProgress(a.id, a.rec.State, fl.core.retryAfter())
	ans.Holder = a.holder
	return ans
}

// sleep waits d on the service clock; false if ctx ended.
func (fl *flow) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-fl.core.clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
