package receipt

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// sessionLockStripes bounds the locks that serialise session steps here.
const sessionLockStripes = 256

// sessionAttempt is one open session this process is working on, under
// its stripe lock: the record as stored, its version, and our hold on its
// lease.
type sessionAttempt struct {
	id   string
	rec  *SessionRecord
	ver  store.Version
	held *lease.Held
	// claimVer is the claim's version the step's write is fenced by.
	claimVer store.Version
}

// HeldElsewhereError says that an open session is held by another live
// process: only that one may stage on it, read through it, commit or abort
// it. A server forwards the request there.
type HeldElsewhereError struct {
	Session string
	Holder  lease.Owner
}

func (e *HeldElsewhereError) Error() string {
	return fmt.Sprintf("receipt: session %s is held by %s", e.Session, e.Holder)
}

// stripeLock is one stripe's lock: a one-slot channel rather than a
// sync.Mutex, so that a goroutine waiting for it is durably blocked — a
// host testing with testing/synctest (as the harness does) sees it settle.
type stripeLock chan struct{}

func newStripeLocks() (out [sessionLockStripes]stripeLock) {
	for i := range out {
		out[i] = make(stripeLock, 1)
	}
	return out
}

func (s stripeLock) Lock()   { s <- struct{}{} }
func (s stripeLock) Unlock() { <-s }

// TryLock takes the lock if it is free now.
func (s stripeLock) TryLock() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// lockSession takes the stripe lock of session id.
func (l *lifecycle) lockSession(id string) stripeLock {
	mu := l.sessionLocks[stripeOf(id)]
	mu.Lock()
	return mu
}

func stripeOf(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32() % sessionLockStripes
}

// loadSession reads session id of principal: session_not_found when it
// does not exist — or is another principal's, which must not learn that
// it exists.
func (l *lifecycle) loadSession(ctx context.Context, principal, id string) (*SessionRecord, store.Version, error) {
	if !ValidSessionID(id) {
		return nil, 0, errSessionNotFound(id)
	}
	it, err := l.store.Get(ctx, sessionKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, errSessionNotFound(id)
	}
	if err != nil {
		return nil, 0, err
	}
	rec, err := DecodeSession(it.Value)
	if err != nil {
		return nil, 0, err
	}
	if rec.Principal != principal {
		return nil, 0, errSessionNotFound(id)
	}
	return rec, it.Version, nil
}

// holdSession loads open session id of principal for a step of this
// process, the caller holding its stripe lock. A session that ended is its
// typed refusal (ended reports the record); one that outlived its TTL, or
// whose owner is gone, is ended here first (presumed aborted, docs/design.md §14);
// one a live process elsewhere holds is a *HeldElsewhereError.
func (l *lifecycle) holdSession(ctx context.Context, principal, id string) (sa *sessionAttempt, ended *SessionRecord, err error) {
	rec, ver, err := l.loadSession(ctx, principal, id)
	if err != nil {
		return nil, nil, err
	}
	if rec.State != SessionOpen {
		return nil, rec, errSessionEnded(id, rec)
	}
	sa = &sessionAttempt{id: id, rec: rec, ver: ver}
	now := l.clock.Now()
	if h, ok := l.active.Get(id); ok && rec.Owner != nil && h.Claim() == *rec.Owner {
		if h.Status() == lease.Unconfirmed {
			if err := h.Resync(ctx, l.store); err != nil && !errors.Is(err, lease.ErrFenced) {
				return nil, nil, err
			}
		}
		_, cv, _, st := h.Snapshot()
		if st == lease.Publishing {
			// Its begin is still settling (only maintenance can look this
			// early, and the stripe lock keeps it out): not a lost owner.
			return nil, nil, code.Errorf(code.Unavailable, "session %q is being begun; retry", id)
		}
		if st != lease.Lost && cv != 0 {
			sa.held, sa.claimVer = h, cv
			if sessionExpired(rec, now) {
				return l.endOrReload(ctx, sa, ReasonExpired, nil)
			}
			return sa, nil, nil
		}
	}
	// Not ours (any more): whoever holds it must be alive, or it is
	// presumed aborted.
	l.stagings.drop(id)
	ls, err := lease.Read(ctx, l.store, id)
	if err != nil {
		return nil, nil, err
	}
	if ls.ClaimVersion != 0 && ls.Claim.Of(l.owner) {
		// Ours by the store, not in the active set: a hold lost here
		// (fenced renewal) whose claim is still ours cannot be trusted.
		return l.endOrReload(ctx, sa, ReasonOwnerLost, &ls)
	}
	if lease.MayAdopt(ls, l.owner, now) || ls.ClaimVersion == 0 {
		return l.endOrReload(ctx, sa, ReasonOwnerLost, &ls)
	}
	return nil, nil, &HeldElsewhereError{Session: id, Holder: lease.Owner{Node: ls.Claim.Node, Incarnation: ls.Claim.Incarnation}}
}

// endOrReload ends sa for reason (endSession) and returns the session as
// it ended — here, or by whoever got there first — with the refusal the
// step answers with.
func (l *lifecycle) endOrReload(ctx context.Context, sa *sessionAttempt, reason string, taken *lease.State) (*sessionAttempt, *SessionRecord, error) {
	rec, err := l.endSession(ctx, sa, reason, taken)
	if err != nil {
		again, _, lerr := l.loadSession(ctx, sa.rec.Principal, sa.id)
		if lerr != nil || again.State == SessionOpen {
			return nil, nil, err
		}
		rec = again
	}
	return nil, rec, errSessionEnded(sa.id, rec)
}

// sessionWriteError turns the error of a session write into what the step
// answers: a failed condition means the session moved under us (ended by
// another process, or its lease taken), and is answered by reading it
// again; an unknown outcome is a typed 503 that says how to learn it.
func (l *lifecycle) sessionWriteError(ctx context.Context, sa *sessionAttempt, err error) error {
	switch classifyWrite(err, lease.ClaimKey(sa.id)) {
	case writeDone:
		return nil
	case writeFenced, writeRetry:
		if sa.held != nil {
			sa.held.MarkLost()
			l.active.Remove(sa.id, sa.held)
		}
		l.stagings.drop(sa.id)
		rec, _, lerr := l.loadSession(ctx, sa.rec.Principal, sa.id)
		switch {
		case lerr != nil:
			return lerr
		case rec.State != SessionOpen:
			return errSessionEnded(sa.id, rec)
		}
		return code.Errorf(code.Unavailable, "session %q changed under this request (another node took it over); retry", sa.id)
	case writeAmbiguous:
		return code.Errorf(code.Unavailable, "the store's answer was lost: whether session %q took this step is unknown; GET the session to learn it", sa.id)
	}
	return err
}
