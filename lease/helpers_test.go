package lease_test

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
)

var t0 = time.Unix(1_700_000_000, 0)

// openDB opens a fresh engine in a temp dir, closed at cleanup.
func openDB(t *testing.T) *engine.DB {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// countingStore counts Applies and can fail them: failApply, while > 0, makes
// each Apply fail transiently without writing and counts down; failForever
// fails every Apply.
type countingStore struct {
	store.Store
	applies     atomic.Int64
	failApply   atomic.Int64
	failForever atomic.Bool
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *countingStore) Capabilities() store.Capabilities { return store.Capabilities{} }

var errTransient = errors.New("test: transient store failure")

func (s *countingStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	s.applies.Add(1)
	if s.failForever.Load() {
		return 0, errTransient
	}
	for {
		n := s.failApply.Load()
		if n <= 0 {
			break
		}
		if s.failApply.CompareAndSwap(n, n-1) {
			return 0, errTransient
		}
	}
	return s.Store.Apply(ctx, b)
}

// claimNew publishes new leases for ids owned by o until `until`, in as few
// Applies as the engine's batch bounds allow, and confirms them.
func claimNew(t *testing.T, st store.Store, o lease.Owner, until time.Time, ids ...string) []*lease.Held {
	t.Helper()
	// A claim is at most 3 ops and 3 conditions: size from the store.
	perBatch := min(4096, st.Limits().Fit(3, 3, 0, 0))
	var out []*lease.Held
	for len(ids) > 0 {
		n := min(len(ids), perBatch)
		b := new(store.Batch)
		hs := make([]*lease.Held, 0, n)
		for _, id := range ids[:n] {
			hs = append(hs, lease.ClaimNew(b, id, o, until))
		}
		v, err := st.Apply(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			h.Confirmed(v, until)
		}
		out = append(out, hs...)
		ids = ids[n:]
	}
	return out
}

// storedExpiry reads a lease's expiry key.
func storedExpiry(t *testing.T, st store.Store, id string) (time.Time, store.Version) {
	t.Helper()
	it, err := st.Get(context.Background(), lease.ExpiryKey(id))
	if err != nil {
		t.Fatalf("expiry of %s: %v", id, err)
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(it.Value))), it.Version
}

// goRenew runs hb.Renew on its own goroutine.
func goRenew(hb *lease.Heartbeat, helds []*lease.Held) <-chan lease.RenewReport {
	ch := make(chan lease.RenewReport, 1)
	go func() { ch <- hb.Renew(context.Background(), helds) }()
	return ch
}
