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
// (0: sessionTTLDefault, 30 s; at most Options.SessionTTLMax) unless it is
// committed or aborted first. One Apply publishes its record, its open
// entry and its lease, held by this process and renewed by the supervisor
// while the session is open.
func (s *Service) BeginSession(ctx context.Context, principal string, ttl time.Duration) (Session, error) {
	switch {
	case ttl < 0 || ttl > s.core.opts.SessionTTLMax:
		return Session{}, code.Errorf(code.InvalidRequest, "ttl must be between 1 s and %s", s.core.opts.SessionTTLMax)
	case ttl == 0:
		ttl = min(sessionTTLDefault, s.core.opts.SessionTTLMax)
	}
	if err := s.core.refusesWrites(); err != nil {
		return Session{}, errUnavailable()
	}
	if s.core.spaceFull() {
		return Session{}, errStoreFull()
	}
	if cerr := s.exec.enter(principal); cerr != nil {
		return Session{}, cerr
	}
	defer s.exec.leave(principal)
	if cerr := s.exec.takeSessionPlace(principal); cerr != nil {
		return Session{}, cerr
	}
	sess, id, o, err := s.sess.beginSessionSlot(ctx, principal, ttl)
	s.exec.sessionPlaceDone(principal, id, o)
	return sess, err
}

// beginSessionSlot begins a session under an executor slot. It returns
// the session's ID and, if the session is held here — as it is once begun,
// and after a begin whose outcome is unknown, until its TTL ends it — its
// hold and expiry (o.held nil: none).
func (ss *sessions) beginSessionSlot(ctx context.Context, principal string, ttl time.Duration) (_ Session, id string, o openSession, _ error) {
	sl, ok := ss.exec.acquireFor(ctx, time.Time{}, lease.KindSession)
	if !ok {
		return Session{}, "", o, ss.exec.errExecutorFull()
	}
	defer ss.exec.release(sl)
	id, err := newSessionID(ss.core.opts.SessionShard)
	if err != nil {
		return Session{}, "", o, err
	}
	// Under the session's stripe lock, as every step: maintenance, which
	// walks open sessions, passes over one whose publishing write is still
	// being settled here rather than find its hold not confirmed yet and
	// presume it aborted.
	mu := ss.lockSession(id)
	defer mu.Unlock()
	expires := ss.core.clock.Now().Add(ttl)
	sess, err := ss.beginSession(ctx, principal, id, ttl)
	if err == nil {
		expires = sess.Expires
	}
	if h, ok := ss.core.active.Get(id); ok {
		o = openSession{held: h, expires: expires}
	}
	return sess, id, o, err
}

func (ss *sessions) beginSession(ctx context.Context, principal, id string, ttl time.Duration) (Session, error) {
	now := ss.core.clock.Now()
	until := now.Add(ss.core.opts.LeaseTTL)
	b := new(store.Batch).Absent(sessionKey(id))
	held := lease.ClaimNew(b, id, ss.core.owner, until)
	held.Since = now
	claim := held.Claim()
	rec := &SessionRecord{Schema: sessionSchemaCurrent, Principal: principal, State: SessionOpen, Owner: &claim,
		Created: now.UnixMilli(), Expires: now.Add(ttl).UnixMilli(), Staging: &table.Staging{}}
	val, err := encodeSession(rec)
	if err != nil {
		return Session{}, err
	}
	b.Put(sessionKey(id), val).Put(sessionOpenKey(id), nil)
	ss.core.active.Add(held) // before the write that publishes it (docs/design.md §7)
	if err := fault.Inject(fault.SessionBeginBefore); err != nil {
		ss.core.active.Remove(id, held)
		return Session{}, err
	}
	v, err := ss.core.store.Apply(ctx, b)
	switch classifyWrite(err, nil) {
	case writeDone:
		held.Confirmed(v, until)
		ss.stagings.put(id, v, &table.Staging{})
		ss.core.stats.sessBegun.Add(1)
		return sessionOf(id, rec), nil
	case writeAmbiguous:
		// It may exist; if it does, it is ours and renewal resyncs it,
		// else maintenance finds no open entry and nothing is left. The
		// client learns no ID, so the session is simply never used: its
		// TTL ends it.
		held.Unconfirm()
		return Session{}, code.Errorf(code.Unavailable, "the store's answer was lost: the session may or may not exist; begin another")
	}
	ss.core.active.Remove(id, held)
	return Session{}, err
}
