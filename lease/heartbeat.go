package lease

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// Heartbeat bounds.
const (
	// RenewRetriesMax bounds the attempts of one Renew call.
	RenewRetriesMax = 32
	// RenewBackoffMin and RenewBackoffMax bound the wait between attempts
	// after a transient store error.
	RenewBackoffMin = 20 * time.Millisecond
	RenewBackoffMax = 500 * time.Millisecond
)

// Heartbeat is the one deadline-aware renewal used by the supervisor, by
// foreground execution and by recovery. A transient store error is retried
// (with backoff) while the last confirmed expiry of every lease being renewed
// is still in the future, less Margin; only a fenced claim (Lost) or an
// exhausted deadline (Uncertain) changes a lease's status.
type Heartbeat struct {
	Store  store.Store
	Clock  Clock
	TTL    time.Duration
	Margin time.Duration // safety margin before the confirmed expiry
}

// RenewReport counts what one Renew did.
type RenewReport struct {
	Renewed   int
	Fenced    int
	Uncertain int
	Attempts  int // Apply attempts (each one write)
	Transient int // attempts that failed transiently
	// Err is a failure no retry can mend, which ended the attempts at once:
	// the store refused the batch as invalid (a caller sized it beyond the
	// store's Limits: a bug), or is closed or fail-stopped.
	Err error
}

// Renew extends every lease in helds to now+TTL with one Apply per attempt.
// Leases that are Lost or still Publishing are skipped; Unconfirmed ones are
// resynced first.
func (hb *Heartbeat) Renew(ctx context.Context, helds []*Held) RenewReport {
	var rep RenewReport
	live := hb.renewable(ctx, helds, &rep)
	backoff := RenewBackoffMin
	for len(live) > 0 && rep.Attempts < RenewRetriesMax {
		rep.Attempts++
		until := hb.Clock.Now().Add(hb.TTL)
		var b *store.Batch
		if b, live = fencedRenewal(live, until, &rep); len(live) == 0 {
			break
		}
		err := fault.Inject(fault.LeaseRenewBefore)
		if err == nil {
			_, err = hb.Store.Apply(ctx, b)
		}
		if err == nil {
			for _, h := range live {
				h.renewed(until)
			}
			rep.Renewed += len(live)
			return rep
		}
		var next renewalRetry
		switch live, next = settleFailedRenewal(err, live, &rep); next {
		case retryAtOnce:
			continue
		case retryGiveUp:
		case retryAfterBackoff:
			if hb.backOff(ctx, live, &backoff) {
				continue
			}
		}
		break
	}
	for _, h := range live {
		h.uncertain()
	}
	rep.Uncertain += len(live)
	return rep
}

// renewable is helds less the ones that cannot be renewed: lost, still
// being published, or unconfirmed and not found on reading back.
func (hb *Heartbeat) renewable(ctx context.Context, helds []*Held, rep *RenewReport) []*Held {
	live := make([]*Held, 0, len(helds))
	for _, h := range helds {
		switch h.Status() {
		case Lost, Publishing:
			continue
		case Unconfirmed:
			if err := h.Resync(ctx, hb.Store); err != nil {
				if errors.Is(err, ErrFenced) {
					rep.Fenced++
				}
				continue
			}
		}
		live = append(live, h)
	}
	return live
}

// fencedRenewal is the one batch that extends every hold of live to until,
// each fenced on its claim's version, and the holds it covers (a hold
// already fenced drops out).
func fencedRenewal(live []*Held, until time.Time, rep *RenewReport) (*store.Batch, []*Held) {
	b := new(store.Batch)
	kept := live[:0]
	for _, h := range live {
		if err := h.Fence(b); err != nil {
			if errors.Is(err, ErrFenced) {
				rep.Fenced++
			}
			continue
		}
		b.Put(ExpiryKey(h.ID), encodeExpiry(until))
		kept = append(kept, h)
	}
	if fault.Planted(fault.BugRenewUnfenced) { // planted only under -tags idem_selftest
		b.Conds = nil // planted bug: the renewal is not fenced
	}
	return b, kept
}

// renewalRetry is what a failed renewal leads to.
type renewalRetry int

const (
	retryAtOnce       renewalRetry = iota // one claim was fenced: the rest go again
	retryAfterBackoff                     // transient: again while the leases are confirmed
	retryGiveUp                           // the store takes no more writes
)

// settleFailedRenewal classifies a failed renewal: a fenced claim drops its
// hold; a store that takes no more writes ends the round (rep.Err);
// anything else is transient.
func settleFailedRenewal(err error, live []*Held, rep *RenewReport) ([]*Held, renewalRetry) {
	if key, ok := store.FailedKey(err); ok {
		if i := indexOfClaim(live, key); i >= 0 {
			live[i].MarkLost()
			rep.Fenced++
			return append(live[:i], live[i+1:]...), retryAtOnce
		}
	}
	if errors.Is(err, store.ErrInvalidBatch) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrFailStopped) {
		rep.Err = err
		return live, retryGiveUp
	}
	rep.Transient++
	return live, retryAfterBackoff
}

// backOff waits before the next attempt, never past the earliest confirmed
// expiry less the margin; false when no time is left, or ctx ended.
func (hb *Heartbeat) backOff(ctx context.Context, live []*Held, backoff *time.Duration) bool {
	deadline := earliestUntil(live).Add(-hb.Margin)
	now := hb.Clock.Now()
	if !now.Before(deadline) || ctx.Err() != nil {
		return false
	}
	wait := min(*backoff, deadline.Sub(now))
	*backoff = min(2**backoff, RenewBackoffMax)
	select {
	case <-hb.Clock.After(wait):
	case <-ctx.Done():
	}
	return true
}

// Ensure renews h synchronously if less than need remains of its confirmed
// lease. It returns ErrFenced if the lease is lost and ErrUncertain if it
// could not be confirmed.
func (hb *Heartbeat) Ensure(ctx context.Context, h *Held, need time.Duration) error {
	if h.Status() == Live && h.Until().Sub(hb.Clock.Now()) >= need {
		return nil
	}
	hb.Renew(ctx, []*Held{h})
	switch h.Status() {
	case Live:
		return nil
	case Lost:
		return ErrFenced
	}
	return ErrUncertain
}

func indexOfClaim(helds []*Held, key []byte) int {
	for i, h := range helds {
		if string(ClaimKey(h.ID)) == string(key) {
			return i
		}
	}
	return -1
}

func earliestUntil(helds []*Held) time.Time {
	t := helds[0].Until()
	for _, h := range helds[1:] {
		if u := h.Until(); u.Before(t) {
			t = u
		}
	}
	return t
}
