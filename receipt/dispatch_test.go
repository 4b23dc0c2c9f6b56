package receipt

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

// The decision cores of the keyed flow, as data: every row names the rule
// of docs/design.md it proves.

var (
	dt0 = time.Unix(1_700_000_000, 0)
	me  = lease.Owner{Node: "node-1", Incarnation: 5}
)

func TestDispatch_EveryLookupOutcomeHasItsAction(t *testing.T) {
	for _, tc := range []struct {
		design string
		f      found
		want   action
	}{
		{"§5.3 absent: create it", found{}, actCreate},
		{"§5.3 terminal, same fingerprint: replay", found{exists: true, sameRequest: true, state: Terminal}, actReplay},
		{"§5.3 any state, different fingerprint: mismatch (terminal)", found{exists: true, state: Terminal}, actMismatch},
		{"§5.3 any state, different fingerprint: mismatch (pending)", found{exists: true, state: Pending}, actMismatch},
		{"§5.3 any state, different fingerprint: mismatch (started)", found{exists: true, state: Started}, actMismatch},
		{"§5.3 pending, same request: wait, adopt or continue", found{exists: true, sameRequest: true, state: Pending}, actTakeOver},
		{"§5.3 started, same request: wait, adopt or continue", found{exists: true, sameRequest: true, state: Started}, actTakeOver},
		{"§3 fail-stop: absent on a store that refuses writes: unavailable, not applied", found{refuses: true}, actUnavailable},
		{"§3 fail-stop: replay needs no write", found{exists: true, sameRequest: true, state: Terminal, refuses: true}, actReplay},
		{"§3 fail-stop: a mismatch needs no write", found{exists: true, state: Started, refuses: true}, actMismatch},
		{"§3 fail-stop: pending cannot advance: unavailable, pending", found{exists: true, sameRequest: true, state: Pending, refuses: true}, actUnavailablePending},
		{"§3 fail-stop: started cannot advance: unavailable, pending", found{exists: true, sameRequest: true, state: Started, refuses: true}, actUnavailablePending},
		{"tombstone: a cleaned key is refused, never created again", found{expired: true}, actExpired},
		{"tombstone: the refusal needs no write", found{expired: true, refuses: true}, actExpired},
	} {
		if got := dispatch(tc.f); got != tc.want {
			t.Errorf("%s: dispatch(%+v) = %d, want %d", tc.design, tc.f, got, tc.want)
		}
	}
}

// TestDispatch_InvariantsHoldOverEveryInput walks the whole input space
// (it is small) and checks the rules that no row may break.
func TestDispatch_InvariantsHoldOverEveryInput(t *testing.T) {
	for _, exists := range []bool{false, true} {
		for _, same := range []bool{false, true} {
			for _, st := range []State{Pending, Started, Terminal} {
				for _, refuses := range []bool{false, true} {
					for _, expired := range []bool{false, true} {
						f := found{exists: exists, sameRequest: same, state: st, refuses: refuses, expired: expired}
						if !exists {
							f.sameRequest, f.state = false, 0 // nothing was read
						} else {
							f.expired = false // the tombstone is read only for an absent receipt
						}
						a := dispatch(f)
						where := fmt.Sprintf("dispatch(%+v) = %d", f, a)
						switch {
						case a == actCreate && (exists || refuses):
							t.Errorf("§5.3 only an absent receipt is created, on a store that takes writes: %s", where)
						case a == actReplay && !(exists && same && st == Terminal):
							t.Errorf("§5.3 only a terminal receipt of the same request replays: %s", where)
						case exists && !same && a != actMismatch:
							t.Errorf("§5.3 another request's receipt is a mismatch in any state: %s", where)
						case a == actTakeOver && (refuses || st == Terminal):
							t.Errorf("§4 only a mutable receipt is advanced, on a store that takes writes: %s", where)
						case refuses && (a == actCreate || a == actTakeOver):
							t.Errorf("§3 a store that refuses writes is not written: %s", where)
						case f.expired && a != actExpired:
							t.Errorf("a key its tombstone protects never executes again: %s", where)
						}
					}
				}
			}
		}
	}
}

func TestOwnership_LeaseDecidesWhoTries(t *testing.T) {
	claim := func(node string, inc, epoch uint64) lease.Claim {
		return lease.Claim{Node: node, Incarnation: inc, Epoch: epoch}
	}
	stored := func(c lease.Claim, expires time.Time) lease.State {
		return lease.State{Claim: c, ClaimVersion: 7, Expires: expires, ExpiryVersion: 8}
	}
	live, expired := dt0.Add(time.Second), dt0.Add(-time.Second)
	mine := claim("node-1", 5, 2)
	other := claim("node-0", 3, 1)
	for _, tc := range []struct {
		design string
		f      leaseFacts
		want   holdAction
	}{
		{"§7 no claim: the receipt became immutable meanwhile: look again",
			leaseFacts{stored: lease.State{}}, holdGone},
		{"§7 ours and tracked: resync the fencing token",
			leaseFacts{stored: stored(mine, live), tracked: true, trackedClaim: mine}, holdResync},
		{"§7 ours, tracked but lost: resume from the store",
			leaseFacts{stored: stored(mine, live), tracked: true, trackedClaim: mine, trackedLost: true}, holdResume},
		{"§7 ours, tracked with an older claim: resume the stored one",
			leaseFacts{stored: stored(mine, live), tracked: true, trackedClaim: claim("node-1", 5, 1)}, holdResume},
		{"§7 ours, not tracked (after an ambiguous answer): resume",
			leaseFacts{stored: stored(mine, live)}, holdResume},
		{"§7 ours even when expired by our clock: resume, CAS decides",
			leaseFacts{stored: stored(mine, expired)}, holdResume},
		{"§7 an older incarnation of this node: adopt at once",
			leaseFacts{stored: stored(claim("node-1", 4, 1), live)}, holdAdopt},
		{"§5.3 another owner's lease expired: adopt",
			leaseFacts{stored: stored(other, expired)}, holdAdopt},
		{"§5.3 another owner's lease expires exactly now: adopt",
			leaseFacts{stored: stored(other, dt0)}, holdAdopt},
		{"§5.3 another live owner, Prefer: wait: wait",
			leaseFacts{stored: stored(other, live), deadline: dt0.Add(time.Second)}, holdWait},
		{"§5.3 another live owner, no wait: in progress",
			leaseFacts{stored: stored(other, live)}, holdBusy},
		{"§5.3 another live owner, wait used up: in progress",
			leaseFacts{stored: stored(other, live), deadline: dt0}, holdBusy},
		{"§7 a newer incarnation of this node, live: not ours",
			leaseFacts{stored: stored(claim("node-1", 6, 1), live)}, holdBusy},
		{"§7 safety is CAS, not clocks: anyone may try an expired lease",
			leaseFacts{stored: stored(claim("node-1", 6, 1), expired)}, holdAdopt},
	} {
		tc.f.me, tc.f.now = me, dt0
		if got := ownership(tc.f); got != tc.want {
			t.Errorf("%s: ownership = %d, want %d", tc.design, got, tc.want)
		}
	}
}

func TestNext_StateDecidesTheStep(t *testing.T) {
	for _, tc := range []struct {
		design string
		st     State
		want   nextStep
	}{
		{"§4 pending: whoever owns it executes it (from the stored request)", Pending, stepStart},
		{"§4 started: reconciled, never executed again", Started, stepReconcile},
		{"§4 terminal with debt: pay it", Terminal, stepPayDebt},
	} {
		if got := next(tc.st); got != tc.want {
			t.Errorf("%s: next(%v) = %d, want %d", tc.design, tc.st, got, tc.want)
		}
	}
}

func TestSettled_OnlyTerminalWithoutDebt(t *testing.T) {
	for _, tc := range []struct {
		design string
		rec    Record
		want   bool
	}{
		{"§4 terminal, no debt: immutable, cleanable after retention", Record{State: Terminal}, true},
		{"§4 visibility debt pins a terminal receipt", Record{State: Terminal, Debt: VisibilityDebt}, false},
		{"§4 execution debt: started", Record{State: Started}, false},
		{"§4 execution debt: pending", Record{State: Pending}, false},
	} {
		if got := settled(&tc.rec); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", tc.design, got, tc.want)
		}
	}
}

// TestSessionHold_OwnershipDecidesEverySessionStep: a session step reads
// ownership's answer (sessionHoldOf) and comes to what session_hold.go
// decided inline before it went through ownership, over every lease it
// can meet — an untracked one read from the store (nobody, ours, an older
// or newer incarnation, another node; live, expiring now, expired), and a
// tracked one named by the session record (confirmed, lost, unwritten).
func TestSessionHold_OwnershipDecidesEverySessionStep(t *testing.T) {
	live, expired := dt0.Add(time.Second), dt0.Add(-time.Second)
	claims := []lease.Claim{{}, {Node: "node-1", Incarnation: 5, Epoch: 2}, {Node: "node-1", Incarnation: 4, Epoch: 1},
		{Node: "node-1", Incarnation: 6, Epoch: 1}, {Node: "node-0", Incarnation: 3, Epoch: 1}}
	for _, c := range claims {
		for _, exp := range []time.Time{live, dt0, expired} {
			st := lease.State{Claim: c, Expires: exp}
			if c != (lease.Claim{}) {
				st.ClaimVersion, st.ExpiryVersion = 7, 8
			}
			// The rule as it was written inline: ours by the store but not
			// tracked here, adoptable, or unclaimed is presumed aborted.
			want := sessionElsewhere
			if (st.ClaimVersion != 0 && st.Claim.Of(me)) || lease.MayAdopt(st, me, dt0) || st.ClaimVersion == 0 {
				want = sessionPresumeAborted
			}
			if got := sessionHoldOf(ownership(leaseFacts{stored: st, me: me, now: dt0})); got != want {
				t.Errorf("untracked %+v: %d, want %d", st, got, want)
			}
		}
	}
	mine := lease.Claim{Node: me.Node, Incarnation: me.Incarnation, Epoch: 2}
	for _, cv := range []store.Version{0, 9} {
		for _, lost := range []bool{false, true} {
			f := leaseFacts{stored: lease.State{Claim: mine, ClaimVersion: cv}, me: me, now: dt0,
				tracked: true, trackedClaim: mine, trackedLost: lost}
			want := sessionHold(0) // not kept: the store decides
			if !lost && cv != 0 {
				want = sessionKeep
			}
			if got := sessionHoldOf(ownership(f)); (got == sessionKeep) != (want == sessionKeep) {
				t.Errorf("tracked, claim version %d, lost %v: %d, want kept=%v", cv, lost, got, want == sessionKeep)
			}
		}
	}
	for a := holdGone; a <= holdBusy; a++ {
		if h := sessionHoldOf(a); h < sessionKeep || h > sessionElsewhere {
			t.Errorf("holdAction %d reads as no session hold (%d)", a, h)
		}
	}
}
