package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

func TestClampInterval_AtMostAThirdOfTheTTL(t *testing.T) {
	ttl := 9 * time.Second
	cases := []struct{ in, want time.Duration }{
		{0, 3 * time.Second},
		{-time.Second, 3 * time.Second},
		{time.Millisecond, time.Millisecond},
		{2 * time.Second, 2 * time.Second},
		{3 * time.Second, 3 * time.Second},
		{3*time.Second + 1, 3 * time.Second},
		{time.Hour, 3 * time.Second},
	}
	for _, c := range cases {
		if got := lease.ClampInterval(c.in, ttl); got != c.want {
			t.Errorf("ClampInterval(%v, %v) = %v, want %v", c.in, ttl, got, c.want)
		}
	}
	s := lease.NewSupervisor(lease.NewActiveSet(), &lease.Heartbeat{TTL: ttl, Clock: lease.NewSim(t0)}, lease.SupervisorOptions{Interval: time.Minute})
	if s.Interval() != 3*time.Second {
		t.Fatalf("supervisor interval %v, want clamped to 3s", s.Interval())
	}
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%05d", i)
	}
	return out
}

// TestSupervisor_BoundedBatchesCoverTenThousandLeasesFairly: with 10 000
// held leases and BatchMax 256, every lease is renewed within ⌈10000/256⌉ =
// 40 passes, each pass is exactly one Apply, and the round-robin cursor keeps
// covering every lease once per 40 passes in later rounds.
func TestSupervisor_BoundedBatchesCoverTenThousandLeasesFairly(t *testing.T) {
	const n, batch = 10000, 256
	const passesPerRound = (n + batch - 1) / batch // 40
	ctx := context.Background()
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	ttl := 30 * time.Second
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	helds := claimNew(t, db, o, t0.Add(ttl), ids(n)...)
	set := lease.NewActiveSet()
	for _, h := range helds {
		set.Add(h)
	}
	var lost atomic.Int64
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: ttl, Margin: time.Second},
		lease.SupervisorOptions{Interval: 10 * time.Second, BatchMax: batch, OnLost: func(*lease.Held) { lost.Add(1) }})

	// Fresh leases are not due: a pass examines a batch and writes nothing.
	if rep := sup.Pass(ctx); rep.Attempts != 0 || cs.applies.Load() != 0 {
		t.Fatalf("a pass over fresh leases wrote: %+v", rep)
	}
	renewedIn := make(map[string]int, n) // id -> pass of this round that renewed it
	for round := 1; round <= 3; round++ {
		clock.Advance(10 * time.Second) // every lease is due again
		until := clock.Now().Add(ttl)
		clear(renewedIn)
		for p := 1; p <= passesPerRound; p++ {
			applies, writes := cs.applies.Load(), sup.Stats().Writes
			rep := sup.Pass(ctx)
			if got := cs.applies.Load() - applies; got != 1 || sup.Stats().Writes-writes != 1 || rep.Attempts != 1 {
				t.Fatalf("round %d pass %d: %d applies (stats %d), want exactly one", round, p, got, sup.Stats().Writes-writes)
			}
			if rep.Renewed == 0 || rep.Renewed > batch {
				t.Fatalf("round %d pass %d renewed %d", round, p, rep.Renewed)
			}
			for _, h := range helds {
				if _, seen := renewedIn[h.ID]; !seen && h.Until().Equal(until) {
					renewedIn[h.ID] = p
				}
			}
		}
		if len(renewedIn) != n {
			t.Fatalf("round %d: %d of %d leases renewed within %d passes", round, len(renewedIn), n, passesPerRound)
		}
		// Fairness: the cursor continues where the last round ended, so
		// which pass renews a lease rotates between rounds, and no lease
		// waits more than one full round.
		if round > 1 && renewedIn["r00000"] == 1 {
			t.Fatalf("round %d restarted at the smallest id instead of continuing the cursor", round)
		}
		// One more pass finds nothing due.
		if rep := sup.Pass(ctx); rep.Renewed != 0 {
			t.Fatalf("round %d: a lease was renewed twice in one round (%+v)", round, rep)
		}
	}
	for _, h := range helds {
		if h.Status() != lease.Live {
			t.Fatalf("%s is %v", h.ID, h.Status())
		}
	}
	items, err := db.Scan(ctx, store.NSLease.Prefix("ttl"), store.PrefixEnd(store.NSLease.Prefix("ttl")), store.ScanLimitMax)
	if err != nil || len(items) != n {
		t.Fatalf("scan of expiries: %d %v", len(items), err)
	}
	for _, id := range ids(n) {
		if exp, _ := storedExpiry(t, db, id); !exp.Equal(clock.Now().Add(ttl)) {
			t.Fatalf("%s stored expiry %v", id, exp)
		}
	}
	if lost.Load() != 0 {
		t.Fatalf("%d leases reported lost", lost.Load())
	}
}

func TestSupervisor_TickWalksTheWholeSetInCeilLenOverBatchPasses(t *testing.T) {
	const n, batch = 1000, 64
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	ttl := 30 * time.Second
	set := lease.NewActiveSet()
	for _, h := range claimNew(t, db, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(ttl), ids(n)...) {
		set.Add(h)
	}
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: ttl, Margin: time.Second},
		lease.SupervisorOptions{Interval: 10 * time.Second, BatchMax: batch})
	clock.Advance(10 * time.Second)
	sup.Tick(context.Background())
	st := sup.Stats()
	if want := uint64((n + batch - 1) / batch); st.Passes != want || st.Writes != want || cs.applies.Load() != int64(want) {
		t.Fatalf("stats %+v, %d applies; want %d passes and writes", st, cs.applies.Load(), want)
	}
	if st.Renewed != n {
		t.Fatalf("renewed %d of %d", st.Renewed, n)
	}
}

func TestSupervisor_LostLeasesLeaveTheSet(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clock := lease.NewSim(t0)
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	helds := claimNew(t, db, o, t0.Add(3*time.Second), "a", "b")
	set := lease.NewActiveSet()
	set.Add(helds[0])
	set.Add(helds[1])
	var lost []string
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: db, Clock: clock, TTL: 3 * time.Second, Margin: 100 * time.Millisecond},
		lease.SupervisorOptions{Interval: time.Second, OnLost: func(h *lease.Held) { lost = append(lost, h.ID) }})
	// The next incarnation of node-0 adopts "a" at once.
	st, _ := lease.Read(ctx, db, "a")
	b := new(store.Batch)
	lease.ClaimAdopt(b, "a", st, lease.Owner{Node: "node-0", Incarnation: 2}, t0.Add(3*time.Second))
	if _, err := db.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	sup.Tick(ctx)
	if set.Len() != 1 || len(lost) != 1 || lost[0] != "a" || sup.Stats().Fenced != 1 {
		t.Fatalf("set %d, lost %v, stats %+v", set.Len(), lost, sup.Stats())
	}
	if _, ok := set.Get("b"); !ok {
		t.Fatal("the live lease left the set")
	}
}

func TestSupervisor_RunsOnlyWhenTheClockAdvancesAndStops(t *testing.T) {
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	h := claimNew(t, db, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(3*time.Second), "a")[0]
	set := lease.NewActiveSet()
	set.Add(h)
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: 3 * time.Second, Margin: 100 * time.Millisecond},
		lease.SupervisorOptions{Interval: time.Second})
	sup.Start()
	for i := 1; i <= 5; i++ {
		testsupport.Poll(t, "the supervisor to park", testsupport.Patience, func() bool { return clock.Timers() == 1 })
		clock.Advance(time.Second)
		want := clock.Now().Add(3 * time.Second)
		testsupport.Poll(t, "the tick's renewal", testsupport.Patience, func() bool { return h.Until().Equal(want) })
	}
	testsupport.Poll(t, "the supervisor to park", testsupport.Patience, func() bool { return clock.Timers() == 1 })
	if got := cs.applies.Load(); got != 5 {
		t.Fatalf("%d renewal writes for 5 ticks", got)
	}
	sup.Stop()
	sup.Stop() // idempotent
}

func TestActiveSet_RemoveKeepsANewerHoldAndBatchesWrapFairly(t *testing.T) {
	set := lease.NewActiveSet()
	mk := func(id string) *lease.Held {
		return lease.ClaimNew(new(store.Batch), id, lease.Owner{Node: "n", Incarnation: 1}, t0)
	}
	old := mk("x")
	set.Add(old)
	newer := mk("x")
	set.Add(newer)
	set.Remove("x", old)
	if h, ok := set.Get("x"); !ok || h != newer {
		t.Fatal("removing a replaced hold dropped the newer one")
	}
	set.Remove("x", newer)
	if set.Len() != 0 {
		t.Fatal("Remove of the current hold left it in the set")
	}
	for i := 0; i < 10; i++ {
		set.Add(mk(fmt.Sprintf("k%d", i)))
	}
	count := map[string]int{}
	for call := 0; call < 10; call++ { // 10 calls of 3 = 30 visits = 3 full rounds
		b := set.NextBatch(3)
		if len(b) != 3 {
			t.Fatalf("batch of %d", len(b))
		}
		seen := map[string]bool{}
		for _, h := range b {
			if seen[h.ID] {
				t.Fatalf("batch visits %s twice", h.ID)
			}
			seen[h.ID] = true
			count[h.ID]++
		}
	}
	for id, c := range count {
		if c != 3 {
			t.Fatalf("%s visited %d times in 3 rounds: %v", id, c, count)
		}
	}
	// Removing the cursor's item mid-round does not stall the walk.
	b := set.NextBatch(1)
	set.Remove(b[0].ID, nil)
	visited := map[string]bool{}
	for i := 0; i < 9; i++ {
		visited[set.NextBatch(1)[0].ID] = true
	}
	if len(visited) != 9 {
		t.Fatalf("after removing the cursor, 9 calls visited %d distinct holds", len(visited))
	}
}

func TestSupervisor_PublishingClaimIsNeitherRenewedNorDropped(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	set := lease.NewActiveSet()
	pub := new(store.Batch)
	h := lease.ClaimNew(pub, "r1", o, t0.Add(3*time.Second))
	set.Add(h) // before the publishing write, as the receipt layer does
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: 3 * time.Second, Margin: 100 * time.Millisecond},
		lease.SupervisorOptions{Interval: time.Second})
	clock.Advance(time.Second)
	sup.Tick(ctx)
	if h.Status() != lease.Publishing || set.Len() != 1 || cs.applies.Load() != 0 {
		t.Fatalf("tick during publication: status %v, set %d, %d writes", h.Status(), set.Len(), cs.applies.Load())
	}
	if err := h.Resync(ctx, db); err == nil || h.Status() != lease.Publishing {
		t.Fatalf("Resync during publication: %v, status %v", err, h.Status())
	}
	v, err := db.Apply(ctx, pub)
	if err != nil {
		t.Fatal(err)
	}
	h.Confirmed(v, t0.Add(3*time.Second))
	clock.Advance(time.Second)
	sup.Tick(ctx)
	if h.Status() != lease.Live || cs.applies.Load() != 1 || !h.Until().Equal(clock.Now().Add(3*time.Second)) {
		t.Fatalf("after publication: status %v, %d writes, until %v", h.Status(), cs.applies.Load(), h.Until())
	}
}

// TestSupervisor_RenewalBatchesFitTheStore: on a store that takes at most
// 128 ops and 128 conditions per Apply (etcd's default) and refuses more,
// the supervisor renews 300 leases in batches it sizes from the store's
// Limits — one fence condition and one put each — so none is refused.
func TestSupervisor_RenewalBatchesFitTheStore(t *testing.T) {
	const n = 300
	ctx := context.Background()
	st := memstore.NewWithLimits(store.Limits{ApplyOpsMax: 128, ApplyCondsMax: 128, ApplyBytesMax: 3 << 19, ScanItemsMax: 1000})
	cs := &countingStore{Store: st}
	clock := lease.NewSim(t0)
	ttl := 30 * time.Second
	helds := claimNew(t, st, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(ttl), ids(n)...)
	set := lease.NewActiveSet()
	for _, h := range helds {
		set.Add(h)
	}
	var lost atomic.Int64
	sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: ttl, Margin: time.Second},
		lease.SupervisorOptions{Interval: 10 * time.Second, OnLost: func(*lease.Held) { lost.Add(1) }})
	clock.Advance(10 * time.Second)
	renewed := 0
	for range (n + 127) / 128 {
		rep := sup.Pass(ctx)
		if rep.Renewed > 128 {
			t.Fatalf("one pass renewed %d leases: more than one Apply holds", rep.Renewed)
		}
		renewed += rep.Renewed
	}
	if renewed != n || lost.Load() != 0 {
		t.Fatalf("renewed %d of %d, %d lost", renewed, n, lost.Load())
	}
	for _, h := range helds {
		if h.Status() != lease.Live || !h.Until().Equal(clock.Now().Add(ttl)) {
			t.Fatalf("%s: %v until %v", h.ID, h.Status(), h.Until())
		}
	}
}

// TestSupervisor_SessionsAndReceiptsShareBatchesFairly (docs/design.md §14: one
// renewal supervisor for both kinds, neither starving the other): 10 000
// leases of one kind against 10 of the other, both ways. The first bounded
// batch renews all 10 of the few — an equal share each, not a share by
// size — and every tick (⌈10 010/256⌉ passes, one Apply each) renews every
// lease of both kinds exactly once, round after round.
func TestSupervisor_SessionsAndReceiptsShareBatchesFairly(t *testing.T) {
	const many, few, batch = 10000, 10, 256
	for _, tc := range []struct {
		name      string
		many, few string // ID formats: "s…" is a session, anything else a receipt
	}{
		{"10 sessions against 10000 receipts", "r%05d", "s%05d"},
		{"10 receipts against 10000 sessions", "s%05d", "r%05d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t)
			cs := &countingStore{Store: db}
			clock := lease.NewSim(t0)
			ttl := 30 * time.Second
			o := lease.Owner{Node: "node-0", Incarnation: 1}
			named := func(format string, n int) []string {
				out := make([]string, n)
				for i := range out {
					out[i] = fmt.Sprintf(format, i)
				}
				return out
			}
			manyHeld := claimNew(t, db, o, t0.Add(ttl), named(tc.many, many)...)
			fewHeld := claimNew(t, db, o, t0.Add(ttl), named(tc.few, few)...)
			set := lease.NewActiveSet()
			for _, h := range append(append([]*lease.Held(nil), manyHeld...), fewHeld...) {
				set.Add(h)
			}
			fewKind := lease.KindOf(fewHeld[0].ID)
			if fewKind == lease.KindOf(manyHeld[0].ID) || set.LenOf(fewKind) != few {
				t.Fatalf("kinds: %v few (%d), %v many", fewKind, set.LenOf(fewKind), lease.KindOf(manyHeld[0].ID))
			}
			sup := lease.NewSupervisor(set, &lease.Heartbeat{Store: cs, Clock: clock, TTL: ttl, Margin: time.Second},
				lease.SupervisorOptions{Interval: 10 * time.Second, BatchMax: batch})

			clock.Advance(10 * time.Second)
			until := clock.Now().Add(ttl)
			if rep := sup.Pass(ctx); rep.Attempts != 1 || rep.Renewed != batch {
				t.Fatalf("first pass: %+v, want one Apply renewing a full batch", rep)
			}
			for _, h := range fewHeld {
				if !h.Until().Equal(until) {
					t.Fatalf("%s (of the %d) not renewed by the first batch", h.ID, few)
				}
			}
			for tick := 1; tick <= 4; tick++ {
				clock.Advance(10 * time.Second)
				until := clock.Now().Add(ttl)
				applies, renewed := cs.applies.Load(), sup.Stats().Renewed
				sup.Tick(ctx)
				passes := int64((many + few + batch - 1) / batch)
				if got := cs.applies.Load() - applies; got > passes {
					t.Fatalf("tick %d: %d applies, want at most one per pass (%d)", tick, got, passes)
				}
				if got := sup.Stats().Renewed - renewed; got != many+few {
					t.Fatalf("tick %d renewed %d leases, want every one of %d exactly once", tick, got, many+few)
				}
				for _, h := range append(append([]*lease.Held(nil), fewHeld...), manyHeld...) {
					if !h.Until().Equal(until) {
						t.Fatalf("tick %d: %s not renewed", tick, h.ID)
					}
				}
			}
		})
	}
}

// TestActiveSet_NextBatchSharesEvenlyAndGivesUnusedShares: the batch is
// split evenly between the kinds that have leases; what one kind cannot
// fill goes to the other; each kind's cursor wraps on its own.
func TestActiveSet_NextBatchSharesEvenlyAndGivesUnusedShares(t *testing.T) {
	set := lease.NewActiveSet()
	add := func(format string, n int) {
		for i := 0; i < n; i++ {
			set.Add(&lease.Held{ID: fmt.Sprintf(format, i), Kind: lease.KindOf(fmt.Sprintf(format, i))})
		}
	}
	add("r%03d", 100)
	add("s%03d", 100)
	count := func(hs []*lease.Held) (r, s int) {
		for _, h := range hs {
			if h.Kind == lease.KindSession {
				s++
			} else {
				r++
			}
		}
		return
	}
	for i := 0; i < 4; i++ {
		if r, s := count(set.NextBatch(10)); r != 5 || s != 5 {
			t.Fatalf("batch %d: %d receipts, %d sessions, want 5 and 5", i, r, s)
		}
	}
	if r, s := count(set.NextBatch(11)); r+s != 11 || r < 5 || s < 5 {
		t.Fatalf("odd batch: %d receipts, %d sessions", r, s)
	}
	small := lease.NewActiveSet()
	for i := 0; i < 3; i++ {
		small.Add(&lease.Held{ID: fmt.Sprintf("s%d", i), Kind: lease.KindSession})
	}
	for i := 0; i < 50; i++ {
		small.Add(&lease.Held{ID: fmt.Sprintf("r%02d", i), Kind: lease.KindReceipt})
	}
	if r, s := count(small.NextBatch(20)); s != 3 || r != 17 {
		t.Fatalf("with 3 sessions: %d receipts, %d sessions, want 17 and 3", r, s)
	}
	small.Remove("s0", nil)
	if small.LenOf(lease.KindSession) != 2 || small.Len() != 52 {
		t.Fatalf("after a removal: %d sessions, %d in all", small.LenOf(lease.KindSession), small.Len())
	}
}
