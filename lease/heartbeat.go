package lease

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
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
	Store  engine.Store
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
	backoff := RenewBackoffMin
	for len(live) > 0 && rep.Attempts < RenewRetriesMax {
		rep.Attempts++
		until := hb.Clock.Now().Add(hb.TTL)
		b := new(engine.Batch)
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
		live = kept
		if len(live) == 0 {
			break
		}
		if fault.Planted(fault.BugRenewUnfenced) { // planted only under -tags idem_selftest
			b.Conds = nil // planted bug: the renewal is not fenced
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
		if key, ok := engine.FailedKey(err); ok {
			if i := indexOfClaim(live, key); i >= 0 {
				live[i].MarkLost()
				rep.Fenced++
				live = append(live[:i], live[i+1:]...)
				continue
			}
		}
		if errors.Is(err, engine.ErrInvalidBatch) || errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrFailStopped) {
			rep.Err = err
			break
		}
		// Transient: retry only while every lease is still confirmed.
		rep.Transient++
		deadline := earliestUntil(live).Add(-hb.Margin)
		now := hb.Clock.Now()
		if !now.Before(deadline) || ctx.Err() != nil {
			break
		}
		wait := min(backoff, deadline.Sub(now))
		backoff = min(2*backoff, RenewBackoffMax)
		select {
		case <-hb.Clock.After(wait):
		case <-ctx.Done():
		}
	}
	for _, h := range live {
		h.uncertain()
	}
	rep.Uncertain += len(live)
	return rep
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
