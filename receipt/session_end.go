package receipt

import (
	"context"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// Ending a session without a commit: the client's abort, its expiry, or
// the presumed abort of a session whose owner is gone (docs/design.md §14: before
// its commit is requested, a session whose lease expired is presumed
// aborted). Whichever it is, one fenced Apply turns the record aborted,
// drops what it staged, its lease and its open entry, and gives the record
// a retention entry, so that the session frees everything it held at once
// and later calls learn how it ended. Nothing else needs undoing: staged
// work lives only in the record until a commit.

// AbortSession aborts session id of principal (DELETE). Aborting an
// aborted session answers it as it is; a committed one is
// session_committed.
func (s *Service) AbortSession(ctx context.Context, principal, id string) (Session, error) {
	mu := s.sess.lockSession(id)
	defer mu.Unlock()
	sa, ended, err := s.sess.holdSession(ctx, principal, id)
	if ended != nil && ended.State == SessionAborted {
		return sessionOf(id, ended), nil
	}
	if err != nil {
		return Session{}, err
	}
	rec, err := s.sess.endSession(ctx, sa, ReasonAborted, nil)
	if err != nil {
		return Session{}, err
	}
	if rec.State != SessionAborted {
		return Session{}, errSessionEnded(id, rec)
	}
	return sessionOf(id, rec), nil
}

// endSession aborts open session sa for reason: fenced by our claim, or —
// taken set — by the CAS that takes the claim in that state from a dead or
// older owner. It returns the session as it ended, which is another
// process's ending when that one came first.
func (ss *sessions) endSession(ctx context.Context, sa *sessionAttempt, reason string, taken *lease.State) (*SessionRecord, error) {
	now := ss.core.clock.Now()
	b := new(store.Batch).AtVersion(sessionKey(sa.id), sa.ver)
	if taken != nil {
		b.AtVersion(lease.ClaimKey(sa.id), taken.ClaimVersion).AtVersion(lease.ExpiryKey(sa.id), taken.ExpiryVersion)
	} else {
		b.AtVersion(lease.ClaimKey(sa.id), sa.claimVer)
	}
	rec := *sa.rec
	rec.State, rec.Reason, rec.Ended, rec.Owner = SessionAborted, reason, now.UnixMilli(), nil
	rec.RetainUntil = now.Add(ss.core.opts.Retention).UnixMilli()
	rec.Staging = nil
	if err := ss.putEnded(b, sa.id, &rec); err != nil {
		return nil, err
	}
	inline := ss.dropStepsInto(b, sa.id, sa.rec.Steps)
	if err := fault.Inject(fault.SessionEndBefore); err != nil {
		return nil, err
	}
	_, err := ss.core.store.Apply(ctx, b)
	if err != nil {
		return nil, ss.sessionWriteError(ctx, sa, err)
	}
	ss.core.active.Remove(sa.id, sa.held)
	ss.ended(sa.id, sa.rec.Steps, inline)
	ss.core.stats.sessAborted.Add(1)
	if reason != ReasonAborted {
		ss.core.stats.sessExpired.Add(1)
	}
	return &rec, nil
}

// putEnded adds to b what every ending of a session writes: its ended
// record, the removal of its open entry and its lease, and its retention
// entry.
func (ss *sessions) putEnded(b *store.Batch, id string, rec *SessionRecord) error {
	val, err := encodeSession(rec)
	if err != nil {
		return err
	}
	b.Put(sessionKey(id), val).Delete(sessionOpenKey(id)).Put(expiryKey(rec.RetainUntil, id), nil)
	lease.Drop(b, id)
	return nil
}

// sessionExpired reports whether an open session outlived its TTL at now.
func sessionExpired(rec *SessionRecord, now time.Time) bool {
	return now.UnixMilli() >= rec.Expires
}
