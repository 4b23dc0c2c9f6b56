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
func (l *lifecycle) awaitLocal(ctx context.Context, id string, f *flight, deadline time.Time) (Answer, error) {
	if l.waitFlight(ctx, f, deadline) {
		return Answer{}, errRetry
	}
	return answerInProgress(id, Started, l.retryAfter()), nil
}

// awaitOwner polls receipt a, which another live owner holds, until it is
// terminal, changes, or its lease expires (then the caller adopts), or
// deadline.
func (l *lifecycle) awaitOwner(ctx context.Context, a *attempt, deadline time.Time) (Answer, error) {
	for {
		d := deadline.Sub(l.clock.Now())
		if d <= 0 || !l.sleep(ctx, min(d, l.opts.WaitPoll)) {
			return l.heldElsewhere(a), nil
		}
		it, err := l.store.Get(ctx, receiptKey(a.id))
		if err != nil || it.Version != a.ver {
			return Answer{}, errRetry
		}
		ls, err := lease.Read(ctx, l.store, a.id)
		if err == nil && lease.MayAdopt(ls, l.owner, l.clock.Now()) {
			return Answer{}, errRetry
		}
	}
}

// heldElsewhere answers in progress for a receipt another live process
// holds, naming it (Answer.Holder) so that a server may forward.
func (l *lifecycle) heldElsewhere(a *attempt) Answer {
	ans := answerInProgress(a.id, a.rec.State, l.retryAfter())
	ans.Holder = a.holder
	return ans
}

// sleep waits d on the service clock; false if ctx ended.
func (l *lifecycle) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-l.clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
