package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// BeginSession begins an interactive session of principal that lives ttl
// (0: SessionTTLDefault; at most Options.SessionTTLMax) unless it is
// committed or aborted first. One Apply publishes its record, its open
// entry and its lease, held by this process and renewed by the supervisor
// while the session is open.
func (s *Service) BeginSession(ctx context.Context, principal string, ttl time.Duration) (Session, error) {
	switch {
	case ttl < 0 || ttl > s.opts.SessionTTLMax:
		return Session{}, code.Errorf(code.InvalidRequest, "ttl must be between 1 s and %s", s.opts.SessionTTLMax)
	case ttl == 0:
		ttl = min(SessionTTLDefault, s.opts.SessionTTLMax)
	}
	if err := s.refusesWrites(); err != nil {
		return Session{}, errUnavailable()
	}
	if s.spaceFull() {
		return Session{}, errStoreFull()
	}
	if cerr := s.enter(principal); cerr != nil {
		return Session{}, cerr
	}
	defer s.leave(principal)
	if cerr := s.takeSessionPlace(principal); cerr != nil {
		return Session{}, cerr
	}
	sess, id, o, err := s.beginSessionSlot(ctx, principal, ttl)
	s.sessionPlaceDone(principal, id, o)
	return sess, err
}

// beginSessionSlot begins a session under an executor slot. It returns
// the session's ID and, if the session is held here — as it is once begun,
// and after a begin whose outcome is unknown, until its TTL ends it — its
// hold and expiry (o.held nil: none).
func (s *Service) beginSessionSlot(ctx context.Context, principal string, ttl time.Duration) (_ Session, id string, o openSession, _ error) {
	sl, ok := s.acquireFor(ctx, time.Time{}, lease.KindSession)
	if !ok {
		return Session{}, "", o, s.errExecutorFull()
	}
	defer s.release(sl)
	id, err := newSessionID()
	if err != nil {
		return Session{}, "", o, err
	}
	// Under the session's stripe lock, as every step: maintenance, which
	// walks open sessions, passes over one whose publishing write is still
	// being settled here rather than find its hold not confirmed yet and
	// presume it aborted.
	mu := s.lockSession(id)
	defer mu.Unlock()
	expires := s.clock.Now().Add(ttl)
	sess, err := s.beginSession(ctx, principal, id, ttl)
	if err == nil {
		expires = sess.Expires
	}
	if h, ok := s.active.Get(id); ok {
		o = openSession{held: h, expires: expires}
	}
	return sess, id, o, err
}

func (l *lifecycle) beginSession(ctx context.Context, principal, id string, ttl time.Duration) (Session, error) {
	now := l.clock.Now()
	until := now.Add(l.opts.LeaseTTL)
	b := new(store.Batch).Absent(sessionKey(id))
	held := lease.ClaimNew(b, id, l.owner, until)
	held.Since = now
	claim := held.Claim()
	rec := &SessionRecord{Schema: SessionSchemaCurrent, Principal: principal, State: SessionOpen, Owner: &claim,
		Created: now.UnixMilli(), Expires: now.Add(ttl).UnixMilli(), Staging: &table.Staging{}}
	val, err := EncodeSession(rec)
	if err != nil {
		return Session{}, err
	}
	b.Put(sessionKey(id), val).Put(sessionOpenKey(id), nil)
	l.active.Add(held) // before the write that publishes it (docs/design.md §7)
	if err := fault.Inject(fault.SessionBeginBefore); err != nil {
		l.active.Remove(id, held)
		return Session{}, err
	}
	v, err := l.store.Apply(ctx, b)
	switch classifyWrite(err, nil) {
	case writeDone:
		held.Confirmed(v, until)
		l.stagings.put(id, v, &table.Staging{})
		l.stats.sessBegun.Add(1)
		return sessionOf(id, rec), nil
	case writeAmbiguous:
		// It may exist; if it does, it is ours and renewal resyncs it,
		// else maintenance finds no open entry and nothing is left. The
		// client learns no ID, so the session is simply never used: its
		// TTL ends it.
		held.Unconfirm()
		return Session{}, code.Errorf(code.Unavailable, "the store's answer was lost: the session may or may not exist; begin another")
	}
	l.active.Remove(id, held)
	return Session{}, err
}
