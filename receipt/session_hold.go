package receipt

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// sessionLockStripes bounds the locks that serialise session steps here.
const sessionLockStripes = 256

// sessions is the machinery of interactive sessions (docs/sessions.md):
// holding one (this file), staging on it (session_stage.go), keeping its
// staging as steps (session_steps.go), and ending it by commit, abort or
// maintenance. A session's commit is a receipt: it goes through the flow's
// steps like a keyed request's.
type sessions struct {
	core  *core
	exec  *executor
	flow  *flow
	recov *recovery // maintenance drops a stray open entry as a receipt's
	plans *plans

	// locks serialise the steps of one session in this process (striped
	// by ID: bounded, whatever the number of sessions); across processes
	// the session record's version and claim fence them.
	locks    [sessionLockStripes]stripeLock
	stagings stagingCache // folded stagings of the sessions held here
	dropMu   sync.Mutex
	dropQ    []stepDrop // ended sessions whose steps maintenance deletes
}

func newSessions(c *core, x *executor, f *flow, r *recovery, p *plans) *sessions {
	return &sessions{core: c, exec: x, flow: f, recov: r, plans: p, locks: newStripeLocks()}
}

// sessionAttempt is one open session this process is working on, under
// its stripe lock: the record as stored, its version, and our hold on its
// lease.
//
// It is not an attempt, for a reason: a step's write only ever keeps the
// claim (fenced at claimVer, renewed by the supervisor alone), so none of
// an attempt's claim accounting (claimWrite, until, settle) applies, nor
// its transaction fields; and its record is a SessionRecord. A session's
// commit, which does publish a receipt, is an attempt (session_commit.go).
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
//
// Sessions take these locks, not flights (flight.go), for a reason: a
// flight lets a duplicate of one request join the first and read its
// outcome without running, while two steps of one session are different
// requests that must both run, one after the other: a mutex. And a
// commit runs its receipt's flight under the session's lock.
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
func (ss *sessions) lockSession(id string) stripeLock {
	mu := ss.locks[stripeOf(id)]
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
func (ss *sessions) loadSession(ctx context.Context, principal, id string) (*SessionRecord, store.Version, error) {
	if !ValidSessionID(id) {
		return nil, 0, errSessionNotFound(id)
	}
	it, err := ss.core.store.Get(ctx, sessionKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, errSessionNotFound(id)
	}
	if err != nil {
		return nil, 0, err
	}
	rec, err := sessionAt(it.Key, it.Value)
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
// one a live process elsewhere holds is a *HeldElsewhereError. Who holds
// it is decided by ownership (dispatch.go), as for a receipt, and read by
// sessionHoldOf.
func (ss *sessions) holdSession(ctx context.Context, principal, id string) (sa *sessionAttempt, ended *SessionRecord, err error) {
	rec, ver, err := ss.loadSession(ctx, principal, id)
	if err != nil {
		return nil, nil, err
	}
	if rec.State != SessionOpen {
		ss.forgetEnded(id)
		return nil, rec, errSessionEnded(id, rec)
	}
	sa = &sessionAttempt{id: id, rec: rec, ver: ver}
	now := ss.core.clock.Now()
	if kept, err := ss.holdTracked(ctx, sa, now); err != nil {
		return nil, nil, err
	} else if kept {
		if sessionExpired(rec, now) {
			return ss.endOrReload(ctx, sa, ReasonExpired, nil)
		}
		return sa, nil, nil
	}
	// Not ours (any more): whoever holds it must be alive, or it is
	// presumed aborted.
	ss.stagings.drop(id)
	ls, err := lease.Read(ctx, ss.core.store, id)
	if err != nil {
		return nil, nil, err
	}
	if sessionHoldOf(ownership(leaseFacts{stored: ls, me: ss.core.owner, now: now})) == sessionPresumeAborted {
		return ss.endOrReload(ctx, sa, ReasonOwnerLost, &ls)
	}
	return nil, nil, &HeldElsewhereError{Session: id, Holder: lease.Owner{Node: ls.Claim.Node, Incarnation: ls.Claim.Incarnation}}
}

// forgetEnded drops the hold this process may still track on session id
// once its record reads ended: an ending write whose answer was lost (a
// commit whose context ended mid-write) leaves the hold in the active set,
// and with it a place in its principal's session quota, until a renewal
// finds the lease gone. The record is the truth: nothing of an ended
// session needs renewing.
func (ss *sessions) forgetEnded(id string) {
	if h, ok := ss.core.active.Get(id); ok {
		ss.core.active.Remove(id, h)
	}
	ss.stagings.drop(id)
}

// holdTracked makes sa.held the hold this process tracks on sa when the
// session record names its claim as the owner, and reports whether it
// did. The record is read under the claim's fence, so its owner stands
// for the stored lease here: the step needs no read of the lease.
func (ss *sessions) holdTracked(ctx context.Context, sa *sessionAttempt, now time.Time) (bool, error) {
	h, ok := ss.core.active.Get(sa.id)
	if !ok || sa.rec.Owner == nil || h.Claim() != *sa.rec.Owner {
		return false, nil
	}
	if h.Status() == lease.Unconfirmed {
		if err := h.Resync(ctx, ss.core.store); err != nil && !errors.Is(err, lease.ErrFenced) {
			return false, err
		}
	}
	claim, cv, _, st := h.Snapshot()
	if st == lease.Publishing {
		// Its begin is still settling (only maintenance can look this
		// early, and the stripe lock keeps it out): not a lost owner.
		return false, code.Errorf(code.Unavailable, "session %q is being begun; retry", sa.id)
	}
	f := leaseFacts{stored: lease.State{Claim: *sa.rec.Owner, ClaimVersion: cv}, me: ss.core.owner, now: now,
		tracked: true, trackedClaim: claim, trackedLost: st == lease.Lost}
	if sessionHoldOf(ownership(f)) != sessionKeep {
		return false, nil
	}
	sa.held, sa.claimVer = h, cv
	return true, nil
}

// endOrReload ends sa for reason (endSession) and returns the session as
// it ended — here, or by whoever got there first — with the refusal the
// step answers with.
func (ss *sessions) endOrReload(ctx context.Context, sa *sessionAttempt, reason string, taken *lease.State) (*sessionAttempt, *SessionRecord, error) {
	rec, err := ss.endSession(ctx, sa, reason, taken)
	if err != nil {
		again, _, lerr := ss.loadSession(ctx, sa.rec.Principal, sa.id)
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
//
// It reads the write through classifyWrite as a receipt's step does, but
// is not stuck/notDone, for a reason: a keyed request's answer is its
// receipt's state (pending, in progress) and a retry with the same key
// converges on it, while a session step has no receipt to converge on —
// the client learns what happened from the session record (409 once it
// ended, GET after an unknown outcome) — and a fenced step drops the hold
// and the cached staging, which nothing here would use again.
func (ss *sessions) sessionWriteError(ctx context.Context, sa *sessionAttempt, err error) error {
	switch classifyWrite(err, lease.ClaimKey(sa.id)) {
	case writeDone:
		return nil
	case writeFenced, writeRetry:
		if sa.held != nil {
			sa.held.MarkLost()
			ss.core.active.Remove(sa.id, sa.held)
		}
		ss.stagings.drop(sa.id)
		rec, _, lerr := ss.loadSession(ctx, sa.rec.Principal, sa.id)
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
