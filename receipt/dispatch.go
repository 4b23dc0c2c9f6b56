package receipt

import (
	"time"

	"github.com/idemdb/idem/lease"
)

// The decisions of the keyed flow (docs/design.md §5.3) as pure functions of what
// the steps have read: no I/O, no clock (now is an input). Execute, the
// foreground take-over and maintenance gather the facts and carry out the
// answer; dispatch_test.go walks every row against the DESIGN section it
// proves.

// found is what a keyed request's lookup found.
type found struct {
	exists      bool  // a receipt is stored under the key
	sameRequest bool  // its fingerprint is this request's
	state       State // its state (when it exists)
	// expired: no receipt, but a tombstone: the key's receipt was cleaned
	// after its retention and the key is still protected.
	expired bool
	// refuses says the store accepts no writes (it fail-stopped, or is
	// closing): only what needs no write can be answered.
	refuses bool
}

// action is what a keyed request does with the receipt it found.
type action uint8

const (
	// actCreate: no receipt: publish one (docs/design.md §5.3 absent).
	actCreate action = iota + 1
	// actReplay: terminal, same request: the stored envelope, exactly.
	actReplay
	// actMismatch: another request's receipt, in any state: 422.
	actMismatch
	// actTakeOver: pending or started, same request: join the local flight,
	// wait for the owner, adopt, or continue it (see ownership).
	actTakeOver
	// actUnavailable: no receipt, and the store cannot create one: 503
	// unavailable, not_applied.
	actUnavailable
	// actUnavailablePending: a receipt that is not terminal, and the store
	// cannot advance it: 503 unavailable, pending.
	actUnavailablePending
	// actExpired: the key's receipt was cleaned and its tombstone protects
	// it: 409 idempotency_key_expired, never a new execution (whatever
	// the request: the key is spent).
	actExpired
)

// dispatch decides what a keyed request does with what its lookup found.
// A store that refuses writes still replays terminal receipts and refuses
// mismatches: neither writes.
func dispatch(f found) action {
	switch {
	case !f.exists && f.expired:
		return actExpired
	case !f.exists && f.refuses:
		return actUnavailable
	case !f.exists:
		return actCreate
	case !f.sameRequest:
		return actMismatch
	case f.state == Terminal:
		return actReplay
	case f.refuses:
		return actUnavailablePending
	}
	return actTakeOver
}

// leaseFacts is what the hold step knows about a mutable receipt's lease.
type leaseFacts struct {
	stored lease.State // the lease as read from the store
	me     lease.Owner
	now    time.Time
	// tracked says this process tracks a hold on the receipt (the active
	// set), trackedClaim is its claim and trackedLost whether it was lost.
	tracked      bool
	trackedClaim lease.Claim
	trackedLost  bool
	// deadline bounds how long the request may wait for another owner
	// (Prefer: wait); maintenance never waits (zero).
	deadline time.Time
	// adoptAfter is how long past the lease's expiry this process waits
	// before it adopts another node's receipt (fairness.go); zero for a
	// foreground request.
	adoptAfter time.Duration
}

// holdAction is what this process does about a mutable receipt's lease.
type holdAction uint8

const (
	// holdGone: no claim is stored: the receipt became immutable meanwhile.
	// Look it up again.
	holdGone holdAction = iota + 1
	// holdResync: ours, and tracked here with that very claim: read its
	// fencing version back and continue with the tracked hold.
	holdResync
	// holdResume: ours in the store, but not tracked here, or tracked as
	// lost (e.g. after an ambiguous answer): track it again and continue.
	holdResume
	// holdAdopt: an older incarnation's (at once), or expired by our clock:
	// adopt it with one CAS (docs/design.md §5.3, §7).
	holdAdopt
	// holdWait: another live owner's: wait, until deadline, for it to
	// finish or for its lease to expire.
	holdWait
	// holdBusy: another live owner's and no time left to wait: in progress.
	holdBusy
)

// ownership decides what to do about a mutable receipt's lease. Safety
// never depends on it — every write is fenced by CAS — but it decides who
// tries.
func ownership(f leaseFacts) holdAction {
	switch {
	case f.stored.ClaimVersion == 0:
		return holdGone
	case f.stored.Claim.Of(f.me):
		if f.tracked && f.trackedClaim == f.stored.Claim && !f.trackedLost {
			return holdResync
		}
		return holdResume
	case lease.MayAdopt(f.stored, f.me, f.now) &&
		(f.stored.Claim.Node == f.me.Node || !f.now.Before(f.stored.Expires.Add(f.adoptAfter))):
		return holdAdopt
	case f.now.Before(f.deadline):
		return holdWait
	}
	return holdBusy
}

// sessionHold is what a step of an open session does about its lease.
type sessionHold uint8

const (
	// sessionKeep: ours and tracked here with that very claim: go on with
	// the tracked hold.
	sessionKeep sessionHold = iota + 1
	// sessionPresumeAborted: no live owner holds it: end it, reason
	// owner_lost, with the adoption CAS itself (docs/design.md §14).
	sessionPresumeAborted
	// sessionElsewhere: a live process elsewhere holds it
	// (*HeldElsewhereError: the caller forwards the step).
	sessionElsewhere
)

// sessionHoldOf reads ownership's answer for an open session. Where a
// receipt is resumed or adopted, a session is presumed aborted: before
// its commit is requested it stores no request a successor could finish
// (its client drives it step by step), so ending it is the one safe
// adoption. That holds for holdResume too — ours in the store but lost
// here (a renewal fenced or failed): the lease may have lapsed while the
// client went on, so the hold cannot be trusted. A step never waits for
// another owner (its facts carry no deadline): holdWait does not arise,
// and reads as holdBusy.
func sessionHoldOf(a holdAction) sessionHold {
	switch a {
	case holdResync:
		return sessionKeep
	case holdGone, holdResume, holdAdopt:
		return sessionPresumeAborted
	}
	return sessionElsewhere
}

// nextStep is what a held, mutable receipt needs next.
type nextStep uint8

const (
	// stepStart: pending: execute it from its stored request — the only
	// step that takes an executor slot (docs/design.md §5.6).
	stepStart nextStep = iota + 1
	// stepReconcile: started: learn or decide its outcome through the
	// retained 2PC record, never executing again (docs/design.md §4).
	stepReconcile
	// stepPayDebt: terminal with visibility debt: resolve its intents and
	// drop its lease.
	stepPayDebt
)

// next decides the step a held receipt in state st needs.
func next(st State) nextStep {
	switch st {
	case Pending:
		return stepStart
	case Terminal:
		return stepPayDebt
	}
	return stepReconcile
}

// settled reports whether a receipt needs nothing more from its owner:
// terminal and free of debt (docs/design.md §4), so its lease and recovery entry
// can go, its decision can be released and, once retention ends, it can
// be cleaned.
func settled(rec *Record) bool { return rec.State == Terminal && rec.Debt == 0 }
