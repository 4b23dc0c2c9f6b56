package receipt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// keepsLease advances the clock in 1s steps, steps times, while a
// foreground execution of id is blocked between Begin and Decide, and
// checks at every step that the owner's lease stays live, its stored expiry
// never goes back and never lapses, and that node-1 can neither adopt by
// the lease rules nor through maintenance. At step failAt one renewal Apply
// fails transiently. Two goroutines live on the clock: both supervisors.
func keepsLease(t *testing.T, e *env, a, n1 *receipt.Service, id string, steps, failAt int) {
	t.Helper()
	held, ok := a.Active().Get(id)
	if !ok || held.Status() != lease.Live {
		t.Fatalf("no live hold on the executing receipt")
	}
	st0, err := lease.Read(ctx, e.db, id)
	if err != nil {
		t.Fatal(err)
	}
	prev, stalls := st0.Expires, 0
	hits := fault.Hits(fault.LeaseRenewBefore)
	renewed := a.Supervisor().Stats().Renewed
	for i := 1; i <= steps; i++ {
		var disarm func()
		if i == failAt {
			disarm = testsupport.Arm(t, fault.LeaseRenewBefore, `1*return("eio")`)
		}
		e.step(time.Second, 2)
		if disarm != nil && fault.Hits(fault.LeaseRenewBefore) > hits {
			disarm()
		}
		now := e.clock.Now()
		st, err := lease.Read(ctx, e.db, id)
		if err != nil {
			t.Fatal(err)
		}
		switch s := held.Status(); {
		case s != lease.Live:
			t.Fatalf("step %d: the held lease is %v", i, s)
		case st.Claim != held.Claim() || st.ClaimVersion != st0.ClaimVersion:
			t.Fatalf("step %d: the claim changed: %+v", i, st)
		case st.Expires.Before(prev):
			t.Fatalf("step %d: expiry went back from %v to %v", i, prev, st.Expires)
		case !st.Expires.After(now):
			t.Fatalf("step %d: the lease lapsed at %v (now %v)", i, st.Expires, now)
		case lease.MayAdopt(st, n1.Owner(), now):
			t.Fatalf("step %d: node-1 may adopt", i)
		}
		if st.Expires.Equal(prev) {
			stalls++
		}
		prev = st.Expires
		if ms, err := n1.MaintainOnce(ctx); err != nil || ms.Adopted != 0 {
			t.Fatalf("step %d: node-1 maintenance %+v %v", i, ms, err)
		}
	}
	if elapsed := e.clock.Now().Sub(t0); elapsed <= 2*ttl {
		t.Fatalf("only %v elapsed, want more than two lease periods", elapsed)
	}
	if got := fault.Hits(fault.LeaseRenewBefore) - hits; failAt > 0 && got != 1 {
		t.Fatalf("the transient renewal failure fired %d times, want 1", got)
	}
	if stalls > 1 {
		t.Fatalf("expiry stood still for %d steps, want at most the one with the failure", stalls)
	}
	if got := a.Supervisor().Stats().Renewed - renewed; got < uint64(steps-1) {
		t.Fatalf("%d renewals in %d steps", got, steps)
	}
}

// TestHeartbeat_ForegroundExecutionOutlivesTwoLeasePeriods: an execution
// blocked between Begin and Decide for more than two lease TTLs keeps its
// lease through the supervisor — across one transient lease-store failure —
// so no other node can adopt, and it then completes committed.
func TestHeartbeat_ForegroundExecutionOutlivesTwoLeasePeriods(t *testing.T) {
	e, hs, a, n1 := twoNodes(t)
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")

	g := hs.block(t, decisionKey(id)) // the decision write waits here
	ch := goExecute(a, r)
	g.wait(t)
	keepsLease(t, e, a, n1, id, 15, 4)
	g.open()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantCommitted(t, res.a, id, false)
	if got := counter(t, a, "t", "ctr"); got != 1 {
		t.Fatalf("counter %d", got)
	}
	if a.Active().Len() != 0 || n1.Stats().Adopted != 0 {
		t.Fatalf("active %d, node-1 adopted %d", a.Active().Len(), n1.Stats().Adopted)
	}
}

// TestHeartbeat_PausedAtDecideFailpointKeepsLease is the same property with
// the execution parked on the receipt/decide-before failpoint armed with
// `pause`: once released, the paused Execute itself commits.
func TestHeartbeat_PausedAtDecideFailpointKeepsLease(t *testing.T) {
	e := newEnv(t)
	a := e.open(receipt.WithTestKnobs(receipt.Options{Node: "node-0"}, testknobs.Receipt{SeparateDecide: true}))
	n1 := e.open(receipt.Options{Node: "node-1"})
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")

	unpause := testsupport.Arm(t, fault.ReceiptDecideBefore, "pause")
	ch := goExecute(a, r)
	testsupport.Poll(t, "Execute to park on the decide failpoint", testsupport.Patience, func() bool {
		return stackHas("receipt.(*flow).decide(", "failpoint.(*Failpoint).Pause(")
	})
	keepsLease(t, e, a, n1, id, 13, 5)
	unpause()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatalf("Execute released from pause: %v", res.err)
	}
	wantCommitted(t, res.a, id, false)
	wantCommitted(t, mustExecute(t, a, r), id, true)
	if got := counter(t, a, "t", "ctr"); got != 1 || a.Stats().Executed != 1 {
		t.Fatalf("counter %d, executed %d", got, a.Stats().Executed)
	}
}

// TestSupervisor_RenewsIndependentlyOfBlockedMaintenance: with a recovery
// pass blocked at its start (receipt/maintain-before armed with `pause`),
// the supervisor still lands two separate renewals of a pending receipt's
// lease.
func TestSupervisor_RenewsIndependentlyOfBlockedMaintenance(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{Node: "node-0", ExecutorMax: 1, InflightPerPrincipalMax: oneTenant}))
	createTable(t, a, "t")
	g, busy := occupyExecutor(t, a, hs, "ctr-busy")

	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	if ans := mustExecute(t, a, r); ans.Code != "overloaded" || ans.State != receipt.Pending {
		t.Fatalf("with a full executor: %+v, want a pending receipt", ans)
	}
	if a.Active().Len() != 2 {
		t.Fatalf("active set %d, want the started and the pending receipt", a.Active().Len())
	}

	unpause, maint := pauseMaintenance(t, a)

	st0, _ := lease.Read(ctx, e.db, id)
	renewed0 := a.Supervisor().Stats().Renewed
	e.step(time.Second, 1)
	st1, _ := lease.Read(ctx, e.db, id)
	e.step(time.Second, 1)
	st2, _ := lease.Read(ctx, e.db, id)
	if !(st0.ExpiryVersion < st1.ExpiryVersion && st1.ExpiryVersion < st2.ExpiryVersion) ||
		!(st0.Expires.Before(st1.Expires) && st1.Expires.Before(st2.Expires)) {
		t.Fatalf("expiry versions %d %d %d, expiries %v %v %v: want two separate renewals",
			st0.ExpiryVersion, st1.ExpiryVersion, st2.ExpiryVersion, st0.Expires, st1.Expires, st2.Expires)
	}
	if got := a.Supervisor().Stats().Renewed - renewed0; got < 2 {
		t.Fatalf("supervisor renewed %d", got)
	}
	select {
	case err := <-maint:
		t.Fatalf("maintenance finished while paused: %v", err)
	default:
	}
	if !stackHas("receipt.(*Service).MaintainOnce(", "failpoint.(*Failpoint).Pause(") || a.Stats().RecoveryPasses != 0 {
		t.Fatal("maintenance is no longer blocked")
	}

	unpause()
	if err := <-maint; err != nil && !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("paused maintenance: %v", err)
	}
	g.open()
	if res := awaitResult(t, busy); res.err != nil {
		t.Fatal(res.err)
	}
	ms, err := a.MaintainOnce(ctx)
	if err != nil || ms.Terminal != 1 {
		t.Fatalf("maintenance: %+v %v", ms, err)
	}
	wantCommitted(t, mustExecute(t, a, r), id, true)
	if counter(t, a, "t", "ctr") != 1 || counter(t, a, "t", "ctr-busy") != 1 {
		t.Fatal("a batch did not apply exactly once")
	}
}

// TestSupervisor_NewClaimIsNotDroppedWhilePublishing: a supervisor tick that
// lands while a receipt's creating write is still in flight must not drop
// the new hold from the active set (docs/design.md §7: no published mutable receipt
// is ever missing from the set), so the lease keeps being renewed while the
// execution continues.
func TestSupervisor_NewClaimIsNotDroppedWhilePublishing(t *testing.T) {
	e, hs, a, n1 := twoNodes(t)
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")

	create := hs.block(t, lease.ClaimKey(id)) // the receipt's creating write
	ch := goExecute(a, r)
	create.wait(t)
	if _, ok := a.Active().Get(id); !ok {
		t.Fatal("the receipt is not in the active set before its publishing write")
	}
	e.step(time.Second, 2) // a supervisor tick during the write
	e.step(time.Second, 2)
	decideGate := hs.block(t, decisionKey(id))
	create.open()
	decideGate.wait(t)
	if h, ok := a.Active().Get(id); !ok || h.Status() != lease.Live {
		t.Fatalf("after publication the hold is gone or not live (present=%v)", ok)
	}
	keepsLease(t, e, a, n1, id, 14, 0)
	decideGate.open()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantCommitted(t, res.a, id, false)
}

// TestForeground_SlowStartedWriteRenewsBeforeDecision: the lease deadline
// of a new receipt is captured before its started write; when that write
// takes most of the lease, the execution renews (fenced) before its
// externally visible decision.
func TestForeground_SlowStartedWriteRenewsBeforeDecision(t *testing.T) {
	e := newEnv(t)
	hs := &hookStore{Store: e.db}
	a := e.openOn(hs, twoWrites(receipt.Options{Node: "node-0"})) // TTL 6s, margin 1.2s; held between its two writes
	createTable(t, a, "t")
	r := req("alice", "t", "k1", incBatch(t, "k1", "ctr"))
	id := receipt.Bind("alice", "t", "k1")
	create := hs.block(t, lease.ClaimKey(id))
	ch := goExecute(a, r)
	create.wait(t)
	for i := 0; i < 5; i++ { // the started write takes 5s of the 6s lease
		e.step(time.Second, 1)
	}
	decideGate := hs.block(t, decisionKey(id))
	create.open()
	decideGate.wait(t)
	st, err := lease.Read(ctx, e.db, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clock.Now().Add(ttl); !st.Expires.Equal(want) {
		t.Fatalf("at the decision the lease runs until %v, want renewed to %v (captured deadline was %v)", st.Expires, want, t0.Add(ttl))
	}
	decideGate.open()
	res := awaitResult(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantCommitted(t, res.a, id, false)
}
