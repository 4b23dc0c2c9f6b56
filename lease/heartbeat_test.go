package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

func TestHeartbeat_RenewsManyLeasesWithOneApply(t *testing.T) {
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	var ids []string
	for i := 0; i < 50; i++ {
		ids = append(ids, fmt.Sprintf("r%03d", i))
	}
	helds := claimNew(t, db, o, t0.Add(6*time.Second), ids...)
	hb := &lease.Heartbeat{Store: cs, Clock: clock, TTL: 6 * time.Second, Margin: time.Second}
	clock.Advance(2 * time.Second)
	rep := hb.Renew(context.Background(), helds)
	if rep.Renewed != 50 || rep.Attempts != 1 || rep.Fenced != 0 || rep.Uncertain != 0 || cs.applies.Load() != 1 {
		t.Fatalf("report %+v with %d applies, want 50 renewed by exactly one Apply", rep, cs.applies.Load())
	}
	want := t0.Add(8 * time.Second)
	for _, h := range helds {
		if h.Status() != lease.Live || !h.Until().Equal(want) {
			t.Fatalf("%s: %v until %v, want live until %v", h.ID, h.Status(), h.Until(), want)
		}
		if exp, _ := storedExpiry(t, db, h.ID); !exp.Equal(want) {
			t.Fatalf("%s: stored expiry %v, want %v", h.ID, exp, want)
		}
	}
}

func TestHeartbeat_TransientFailureIsRetriedWhileTheLeaseIsConfirmed(t *testing.T) {
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	h := claimNew(t, db, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(6*time.Second), "r1")[0]
	hb := &lease.Heartbeat{Store: cs, Clock: clock, TTL: 6 * time.Second, Margin: time.Second}
	cs.failApply.Store(2)
	done := goRenew(hb, []*lease.Held{h})
	for i := 0; i < 2; i++ {
		testsupport.Poll(t, "the retry to park on the clock", testsupport.Patience, func() bool { return clock.Timers() == 1 })
		if h.Status() != lease.Live {
			t.Fatalf("status %v during a transient failure, want live", h.Status())
		}
		clock.Advance(lease.RenewBackoffMax)
	}
	rep := <-done
	if rep.Renewed != 1 || rep.Transient != 2 || rep.Attempts != 3 || rep.Uncertain != 0 {
		t.Fatalf("report %+v, want renewed after 2 transient failures", rep)
	}
	if h.Status() != lease.Live || !h.Until().Equal(clock.Now().Add(6*time.Second)) {
		t.Fatalf("held %v until %v", h.Status(), h.Until())
	}
}

func TestHeartbeat_DeadlineExhaustionMarksUncertainNeverLost(t *testing.T) {
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	h := claimNew(t, db, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(time.Second), "r1")[0]
	hb := &lease.Heartbeat{Store: cs, Clock: clock, TTL: time.Second, Margin: 200 * time.Millisecond}
	cs.failForever.Store(true)
	done := goRenew(hb, []*lease.Held{h})
	var rep lease.RenewReport
	for finished := false; !finished; {
		testsupport.Poll(t, "Renew to park or return", testsupport.Patience, func() bool { return clock.Timers() == 1 || len(done) == 1 })
		select {
		case rep = <-done:
			finished = true
		default:
			if !clock.Now().Before(t0.Add(800 * time.Millisecond)) {
				t.Fatalf("Renew still retrying at %v, past the confirmed deadline", clock.Now())
			}
			clock.Advance(50 * time.Millisecond)
		}
	}
	if rep.Uncertain != 1 || rep.Renewed != 0 || rep.Fenced != 0 {
		t.Fatalf("report %+v, want uncertain", rep)
	}
	if h.Status() != lease.Uncertain {
		t.Fatalf("status %v, want uncertain (only fencing means lost)", h.Status())
	}
	if exp, _ := storedExpiry(t, db, "r1"); !exp.Equal(t0.Add(time.Second)) {
		t.Fatalf("stored expiry moved to %v", exp)
	}
	// Nobody adopted: once the store heals the same claim renews again.
	cs.failForever.Store(false)
	if rep := hb.Renew(context.Background(), []*lease.Held{h}); rep.Renewed != 1 || h.Status() != lease.Live {
		t.Fatalf("after healing: %+v, status %v", rep, h.Status())
	}
}

func TestHeartbeat_FencedLeaseIsLostAndTheRestStillRenew(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	helds := claimNew(t, db, o, t0.Add(time.Second), "a", "b", "c")
	// node-1 adopts "b" after expiry.
	clock.Advance(2 * time.Second)
	st, err := lease.Read(ctx, db, "b")
	if err != nil || !lease.MayAdopt(st, lease.Owner{Node: "node-1", Incarnation: 1}, clock.Now()) {
		t.Fatalf("node-1 may not adopt: %+v %v", st, err)
	}
	ad := new(store.Batch)
	lease.ClaimAdopt(ad, "b", st, lease.Owner{Node: "node-1", Incarnation: 1}, clock.Now().Add(time.Second))
	if _, err := db.Apply(ctx, ad); err != nil {
		t.Fatal(err)
	}
	_, adoptedVer := storedExpiry(t, db, "b")
	hb := &lease.Heartbeat{Store: cs, Clock: clock, TTL: time.Second, Margin: 100 * time.Millisecond}
	rep := hb.Renew(ctx, helds)
	if rep.Fenced != 1 || rep.Renewed != 2 || rep.Attempts != 2 || rep.Transient != 0 {
		t.Fatalf("report %+v, want 1 fenced, 2 renewed in 2 attempts", rep)
	}
	if helds[1].Status() != lease.Lost || helds[0].Status() != lease.Live || helds[2].Status() != lease.Live {
		t.Fatalf("statuses %v %v %v", helds[0].Status(), helds[1].Status(), helds[2].Status())
	}
	if _, v := storedExpiry(t, db, "b"); v != adoptedVer {
		t.Fatal("the stale owner's renewal rewrote the adopter's expiry")
	}
	// A lost lease is never renewed again.
	before := cs.applies.Load()
	if rep := hb.Renew(ctx, helds[1:2]); rep.Attempts != 0 || cs.applies.Load() != before {
		t.Fatalf("renewal of a lost lease wrote: %+v", rep)
	}
	if err := hb.Ensure(ctx, helds[1], 0); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("Ensure on a lost lease = %v, want ErrFenced", err)
	}
}

func TestHeartbeat_UnconfirmedClaimIsResyncedBeforeRenewal(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clock := lease.NewSim(t0)
	o := lease.Owner{Node: "node-0", Incarnation: 1}
	hb := &lease.Heartbeat{Store: db, Clock: clock, TTL: time.Second, Margin: 100 * time.Millisecond}

	// The ambiguous publication did land: Resync adopts its version.
	b := new(store.Batch)
	landed := lease.ClaimNew(b, "landed", o, t0.Add(time.Second))
	if _, err := db.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	landed.Unconfirm()
	// The ambiguous publication did not land: the lease is lost.
	missing := lease.ClaimNew(new(store.Batch), "missing", o, t0.Add(time.Second))
	missing.Unconfirm()

	rep := hb.Renew(ctx, []*lease.Held{landed, missing})
	if rep.Renewed != 1 || rep.Fenced != 1 {
		t.Fatalf("report %+v, want 1 renewed, 1 fenced", rep)
	}
	if landed.Status() != lease.Live || missing.Status() != lease.Lost {
		t.Fatalf("landed %v, missing %v", landed.Status(), missing.Status())
	}
	if _, err := db.Get(ctx, lease.ExpiryKey("missing")); err == nil {
		t.Fatal("renewal created a lease that was never published")
	}
}

func TestHeartbeat_EnsureWritesOnlyWhenLessThanNeedRemains(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := &countingStore{Store: db}
	clock := lease.NewSim(t0)
	h := claimNew(t, db, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(6*time.Second), "r1")[0]
	hb := &lease.Heartbeat{Store: cs, Clock: clock, TTL: 6 * time.Second, Margin: time.Second}
	clock.Advance(4 * time.Second) // 2s left
	if err := hb.Ensure(ctx, h, 2*time.Second); err != nil || cs.applies.Load() != 0 {
		t.Fatalf("Ensure with enough left: %v, %d applies", err, cs.applies.Load())
	}
	if err := hb.Ensure(ctx, h, 3*time.Second); err != nil || cs.applies.Load() != 1 {
		t.Fatalf("Ensure with too little left: %v, %d applies", err, cs.applies.Load())
	}
	if !h.Until().Equal(clock.Now().Add(6 * time.Second)) {
		t.Fatalf("until %v", h.Until())
	}
}

// TestRenew_AnInvalidBatchIsNotRetried: a renewal the store refuses as
// invalid (more leases than its Limits take in one Apply) can never land,
// so Renew reports it at once instead of backing off and retrying until
// the leases run out; the leases are left unconfirmed, not lost.
func TestRenew_AnInvalidBatchIsNotRetried(t *testing.T) {
	st := memstore.NewWithLimits(store.Limits{ApplyOpsMax: 128, ApplyCondsMax: 128, ApplyBytesMax: 3 << 19, ScanItemsMax: 1000})
	ttl := 30 * time.Second
	helds := claimNew(t, st, lease.Owner{Node: "node-0", Incarnation: 1}, t0.Add(ttl), ids(200)...)
	hb := &lease.Heartbeat{Store: st, Clock: lease.NewSim(t0), TTL: ttl, Margin: time.Second}
	rep := hb.Renew(context.Background(), helds)
	if !errors.Is(rep.Err, store.ErrInvalidBatch) || rep.Attempts != 1 || rep.Transient != 0 || rep.Renewed != 0 {
		t.Fatalf("report %+v, want one attempt ending in ErrInvalidBatch", rep)
	}
	for _, h := range helds {
		if h.Status() == lease.Lost || h.Status() == lease.Live {
			t.Fatalf("%s is %v after a refused renewal", h.ID, h.Status())
		}
	}
}
