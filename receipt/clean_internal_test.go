package receipt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

func storeDump(t *testing.T, s store.Store) map[string]store.Version {
	t.Helper()
	items, err := s.Scan(context.Background(), []byte{0}, nil, store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Version{}
	for _, it := range items {
		out[string(it.Key)] = it.Version
	}
	return out
}

// TestCleaner_StaleIncarnationPassDeletesNothing: a cleaner pass that
// started under the job lease of an older incarnation, after the newer one
// took the job, is fenced on the job key and deletes nothing; the newer
// incarnation's pass deletes the expired receipts.
func TestCleaner_StaleIncarnationPassDeletesNothing(t *testing.T) {
	ctx := context.Background()
	db, clock := internalStore(t)
	opts := Options{Node: "node-0", Clock: clock, Retention: time.Hour, MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.DiscardHandler)}
	a, err := Open(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, _, err := a.Tables().Create(ctx, "p", "t", 0); err != nil {
		t.Fatal(err)
	}
	batch, _ := table.DecodeBatch([]byte(`{"inserts":[{"id":"a","doc":{}}]}`))
	for _, r := range []Request{{Principal: "p", Table: "t", Key: "k1", Batch: batch}, {Principal: "p", Table: "nope", Key: "k2", Batch: batch}} {
		if ans, err := a.Execute(ctx, r); err != nil || !ans.Terminal {
			t.Fatalf("%s: %+v %v", r.Key, ans, err)
		}
	}
	clock.Advance(2 * time.Hour)
	now := clock.Now()

	// A's pass takes the job lease ...
	va, ok, err := lease.AcquireJob(ctx, db, cleanerJob, a.Owner(), now, a.core.opts.LeaseTTL)
	if err != nil || !ok {
		t.Fatalf("A acquires: %v %v", ok, err)
	}
	// ... then a newer incarnation opens and takes it over at once.
	b, err := Open(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	vb, ok, err := lease.AcquireJob(ctx, db, cleanerJob, b.Owner(), now, b.core.opts.LeaseTTL)
	if err != nil || !ok {
		t.Fatalf("B acquires: %v %v", ok, err)
	}
	before := storeDump(t, db)
	n, _, err := a.retain.cleanFrom(ctx, va, now, nil)
	if n != 0 || !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("stale pass: %d %v, want 0 and ErrFenced", n, err)
	}
	if !maps.Equal(before, storeDump(t, db)) {
		t.Fatal("the stale cleaner pass changed the store")
	}
	// A fresh pass of the stale incarnation cannot even take the job.
	if n, err := a.CleanOnce(ctx); n != 0 || err != nil {
		t.Fatalf("stale CleanOnce: %d %v", n, err)
	}
	if n, _, err := b.retain.cleanFrom(ctx, vb, now, nil); n != 2 || err != nil {
		t.Fatalf("current pass: %d %v, want 2", n, err)
	}
	for _, k := range []string{"k1", "k2"} {
		tbl := map[string]string{"k1": "t", "k2": "nope"}[k]
		if _, err := db.Get(ctx, receiptKey(Bind("p", tbl, k))); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s not cleaned: %v", k, err)
		}
	}
}

// internalStore is an engine on a temp dir, closed at cleanup, and a
// simulated clock for the services of an internal test.
func internalStore(t *testing.T) (*engine.DB, *lease.Sim) {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, lease.NewSim(time.Unix(1_700_000_000, 0))
}

// TestCleaner_ATickKeepsUpWithMoreThanOnePassHolds: one tick of the cleaner
// loop walks far more expired entries than one pass may scan
// (CleanScanMax), each pass going on where the last stopped — past any
// receipts pinned by debt — so that retention keeps up with a write rate
// above CleanScanMax per CleanInterval.
func TestCleaner_ATickKeepsUpWithMoreThanOnePassHolds(t *testing.T) {
	ctx := context.Background()
	db, clock := internalStore(t)
	s, err := Open(ctx, db, Options{Node: "node-0", Clock: clock, Retention: time.Hour, MaintainInterval: -1, CleanInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Expiry entries whose receipts are gone (the cheapest to clean): three
	// passes' worth, in batches of one Apply each.
	const n = 3*CleanScanMax + 100
	for i := 0; i < n; i += cleanBatchMax {
		b := new(store.Batch)
		for j := i; j < min(i+cleanBatchMax, n); j++ {
			b.Put(expiryKey(clock.Now().UnixMilli(), Bind("p", "t", fmt.Sprint("k", j))), []byte{1})
		}
		if _, err := db.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Hour)
	left := func() int {
		items, err := db.Scan(ctx, []byte(store.NSExpiry), store.PrefixEnd([]byte(store.NSExpiry)), store.ScanLimitMax)
		if err != nil {
			t.Fatal(err)
		}
		return len(items)
	}
	if _, err := s.CleanOnce(ctx); err != nil || left() != n-CleanScanMax {
		t.Fatalf("one pass left %d entries (%v); want all but CleanScanMax: %d", left(), err, n-CleanScanMax)
	}
	if _, err := s.retain.cleanTick(ctx); err != nil || left() != 0 {
		t.Fatalf("one tick left %d entries, %v; want none", left(), err)
	}
}

// TestCleanOf_OneDecisionForReceiptsAndSessions: the cleaner decides an
// expiry entry by the record it points at, whatever its kind: a gone
// record leaves a stray entry; an unreadable or pinned one (debt, an open
// session) stays with its entry; a record retained until another deadline
// disowns the entry; only a record due by this very entry goes with it.
func TestCleanOf_OneDecisionForReceiptsAndSessions(t *testing.T) {
	const due = int64(1_700_000_000_000)
	broken := fmt.Errorf("test: %w", store.ErrCorruption)
	for _, tc := range []struct {
		design string
		err    error
		pinned bool
		until  int64
		want   cleanAction
	}{
		{"§4 no record: the entry is a stray", store.ErrNotFound, false, 0, cleanEntry},
		{"§2 a record that does not read stays, and so does its entry", broken, false, due, cleanLeave},
		{"§4 debt (or an open session) pins the record and its entry", nil, true, due, cleanLeave},
		{"§4 pinned even when the entry is not its own", nil, true, due + 1, cleanLeave},
		{"§4 retained until another deadline: the entry alone goes", nil, false, due + 1, cleanEntry},
		{"§4 due by this entry: the record goes with it", nil, false, due, cleanRecord},
	} {
		if got := cleanOf(tc.err, tc.pinned, tc.until, due); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.design, got, tc.want)
		}
	}
}
