package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

func TestAcquireJob_OneOwnerAtATimeAndStalePassesAreFenced(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	a1 := lease.Owner{Node: "node-0", Incarnation: 1}
	a2 := lease.Owner{Node: "node-0", Incarnation: 2}
	b := lease.Owner{Node: "node-1", Incarnation: 1}
	ttl := 10 * time.Second

	v1, ok, err := lease.AcquireJob(ctx, db, "cleaner", a1, t0, ttl)
	if err != nil || !ok || v1 == 0 {
		t.Fatalf("first acquire: %d %v %v", v1, ok, err)
	}
	// Another node waits for expiry.
	if _, ok, err := lease.AcquireJob(ctx, db, "cleaner", b, t0.Add(ttl-time.Nanosecond), ttl); ok || err != nil {
		t.Fatalf("another node took a live job lease: %v %v", ok, err)
	}
	// The owner renews it; renewal changes the fencing version.
	v1b, ok, err := lease.AcquireJob(ctx, db, "cleaner", a1, t0.Add(time.Second), ttl)
	if err != nil || !ok || v1b <= v1 {
		t.Fatalf("renewal: %d %v %v", v1b, ok, err)
	}
	// A newer incarnation of the same node takes it at once.
	v2, ok, err := lease.AcquireJob(ctx, db, "cleaner", a2, t0.Add(2*time.Second), ttl)
	if err != nil || !ok {
		t.Fatalf("newer incarnation: %v %v", ok, err)
	}
	// The older incarnation cannot take it back while it is live ...
	if _, ok, _ := lease.AcquireJob(ctx, db, "cleaner", a1, t0.Add(3*time.Second), ttl); ok {
		t.Fatal("an older incarnation took the job from a newer one")
	}
	// ... and a write fenced on its old version fails.
	stale := new(store.Batch).AtVersion(lease.JobKey("cleaner"), v1b).Put([]byte("meta/v1/probe"), []byte("x"))
	_, err = db.Apply(ctx, stale)
	if key, ok := store.FailedKey(err); !ok || string(key) != string(lease.JobKey("cleaner")) {
		t.Fatalf("stale job write: %v, want a failed condition on the job key", err)
	}
	fresh := new(store.Batch).AtVersion(lease.JobKey("cleaner"), v2).Put([]byte("meta/v1/probe"), []byte("x"))
	if _, err := db.Apply(ctx, fresh); err != nil {
		t.Fatalf("current job write: %v", err)
	}
	// After expiry anyone may take it.
	if _, ok, err := lease.AcquireJob(ctx, db, "cleaner", b, t0.Add(2*time.Second+ttl), ttl); !ok || err != nil {
		t.Fatalf("after expiry: %v %v", ok, err)
	}
	// Jobs are independent.
	if _, ok, err := lease.AcquireJob(ctx, db, "other", a1, t0, ttl); !ok || err != nil {
		t.Fatalf("another job: %v %v", ok, err)
	}
	if _, err := db.Get(ctx, lease.JobKey("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("job key of an unused job exists")
	}
}
