package receipt

import (
	"fmt"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
)

// The session quota (quota.go): a begin takes a place of its principal's
// before it publishes anything, and the place becomes its open session's
// once the begin succeeded, or is given back if it did not.

// takeSessionPlace counts a begin of principal, or refuses it: the
// principal's quota first (the limit the principal can do something
// about), then the node's. A nil answer must be followed by
// sessionPlaceDone.
func (x *executor) takeSessionPlace(principal string) *code.Error {
	q := &x.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	ps := q.sessions[principal]
	if ps == nil {
		ps = &principalSessions{open: map[string]openSession{}}
		q.sessions[principal] = ps
	}
	// Only a principal at its quota is swept: sessions that ended give
	// their places back here, and a begin under the quota needs no walk
	// (a walk per begin made n begins cost n²).
	var earliest time.Time
	if len(ps.open)+ps.starting >= x.core.opts.SessionsPerPrincipalMax {
		earliest = x.sweepSessions(ps)
	}
	if n := len(ps.open) + ps.starting; n >= x.core.opts.SessionsPerPrincipalMax {
		x.dropIfIdle(principal, ps)
		x.countRefusal(RefusedPrincipalSessions)
		return &code.Error{Code: code.Overloaded, RetryAfter: retryAfterExpiry(x.core.clock.Now(), earliest), Message: fmt.Sprintf(
			"this principal has %d sessions open on this node, its quota (not the node's limit); retry when one of them ends", n)}
	}
	if n := x.core.active.LenOf(lease.KindSession); n >= x.core.opts.SessionsOpenMax {
		x.dropIfIdle(principal, ps)
		x.countRefusal(RefusedNodeSessions)
		return &code.Error{Code: code.Overloaded, RetryAfter: retryAfterExpiry(x.core.clock.Now(), x.earliestSessionExpiry()), Message: fmt.Sprintf(
			"%d sessions are open on this node, its limit (not this principal's quota); retry later", n)}
	}
	ps.starting++
	return nil
}

// sessionPlaceDone ends a begin that takeSessionPlace let in: its place
// becomes session id's, open here as o, or is given back (o.held nil: no
// session is held).
func (x *executor) sessionPlaceDone(principal, id string, o openSession) {
	q := &x.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	ps := q.sessions[principal]
	ps.starting--
	if o.held != nil {
		ps.open[id] = o
		q.tracked++
		if q.tracked > 2*x.core.opts.SessionsOpenMax {
			// Entries of principals that begin no more are swept here, so
			// that what is tracked stays within a few times the node's limit.
			x.earliestSessionExpiry()
		}
	}
	x.dropIfIdle(principal, ps)
}

// sweepSessions drops ps's sessions that are open here no more and
// returns the earliest expiry of those that are (zero: none). Under mu.
func (x *executor) sweepSessions(ps *principalSessions) time.Time {
	var earliest time.Time
	for id, o := range ps.open {
		if h, ok := x.core.active.Get(id); !ok || h != o.held {
			delete(ps.open, id)
			x.quotas.tracked--
			continue
		}
		if earliest.IsZero() || o.expires.Before(earliest) {
			earliest = o.expires
		}
	}
	return earliest
}

// earliestSessionExpiry sweeps every principal's sessions and returns the
// earliest expiry of all those open here (zero: none). Under mu.
func (x *executor) earliestSessionExpiry() time.Time {
	var earliest time.Time
	for p, ps := range x.quotas.sessions {
		e := x.sweepSessions(ps)
		if !e.IsZero() && (earliest.IsZero() || e.Before(earliest)) {
			earliest = e
		}
		x.dropIfIdle(p, ps)
	}
	return earliest
}

// dropIfIdle forgets principal when it has no session and no begin under
// way here. Under mu.
func (x *executor) dropIfIdle(principal string, ps *principalSessions) {
	if len(ps.open) == 0 && ps.starting == 0 {
		delete(x.quotas.sessions, principal)
	}
}

// PrincipalUsage is what one principal holds of its quotas on this node.
type PrincipalUsage struct {
	Sessions int // sessions open, and begins under way
	Inflight int // requests in flight
}

// Usage returns principal's usage of its quotas, and how many principals
// hold anything at all (after dropping the sessions that ended): for
// tests and operators, who must see every count return to zero once the
// requests are done.
func (s *Service) Usage(principal string) (u PrincipalUsage, principals int) {
	q := &s.exec.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	s.exec.earliestSessionExpiry()
	if ps := q.sessions[principal]; ps != nil {
		u.Sessions = len(ps.open) + ps.starting
	}
	u.Inflight = q.inflight[principal]
	seen := map[string]bool{}
	for p := range q.sessions {
		seen[p] = true
	}
	for p := range q.inflight {
		seen[p] = true
	}
	return u, len(seen)
}
