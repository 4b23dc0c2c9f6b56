package table_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// TestTables_CreateIsIdempotentAndListed proves a second Create of the same
// name returns the existing table with created=false, and List reports every
// table in name order with its shard count.
func TestTables_CreateIsIdempotentAndListed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	m1, created, err := f.tables.Create(ctx, tenant, "b", 8)
	if err != nil || !created || m1.Shards != 8 || m1.Name != "b" || m1.ID == "" {
		t.Fatalf("create: %+v %v %v", m1, created, err)
	}
	m2, created, err := f.tables.Create(ctx, tenant, "b", 2)
	if err != nil || created {
		t.Fatalf("second create: created=%v %v", created, err)
	}
	if m2.ID != m1.ID || m2.Shards != 8 || m2.Version != m1.Version {
		t.Fatalf("second create returned %+v, want the existing %+v", m2, m1)
	}
	if m, _, err := f.tables.Create(ctx, tenant, "a", 0); err != nil || m.Shards != table.DefaultShards {
		t.Fatalf("default shards: %+v %v", m, err)
	}
	list, next, err := f.tables.List(ctx, tenant, "", 0)
	if err != nil || next != "" {
		t.Fatal(next, err)
	}
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" || list[1].Shards != 8 {
		t.Fatalf("list = %+v", list)
	}
	for _, bad := range []struct {
		name   string
		shards int
	}{{"", 1}, {"a.b", 1}, {"a/b", 1}, {string(make([]byte, table.TableNameBytesMax+1)), 1}, {"ok", -1}, {"ok", table.ShardsMax + 1}} {
		_, _, err := f.tables.Create(ctx, tenant, bad.name, bad.shards)
		wantCode(t, err, code.InvalidRequest)
	}
}

// TestTables_DropHidesTableAndRecreateStartsEmpty proves a dropped table is
// gone (table_not_found for meta, reads, batches and a second drop), its
// documents are purged, and a table created again under the same name gets a
// new ID and none of the old documents.
func TestTables_DropHidesTableAndRecreateStartsEmpty(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	old := f.create(t, "t", 4)
	f.mustFast(t, "t", `{"inserts":[{"id":"a","doc":{"v":1}},{"id":"b","doc":{"v":2}},{"id":"c","doc":{"v":3}}]}`)
	stale := f.plan(t, "t", `{"inserts":[{"id":"x","doc":{}}]}`)
	if err := f.tables.Drop(ctx, tenant, "t"); err != nil {
		t.Fatal(err)
	}
	_, err := f.tables.Meta(ctx, tenant, "t")
	wantCode(t, err, code.TableNotFound)
	_, err = f.tables.Get(ctx, tenant, "t", "a")
	wantCode(t, err, code.TableNotFound)
	wantCode(t, f.tables.Drop(ctx, tenant, "t"), code.TableNotFound)
	_, err = f.tables.Preflight(ctx, tenant, "t", decode(t, `{"deletes":["a"]}`))
	wantCode(t, err, code.TableNotFound)
	// A plan made before the drop cannot write into the dropped table.
	_, err = f.tables.ApplyFast(ctx, stale)
	wantCode(t, err, code.TableNotFound)
	if list, _, _ := f.tables.List(ctx, tenant, "", 0); len(list) != 0 {
		t.Fatalf("list after drop = %+v", list)
	}
	assertPurged(t, f.db, old.ID)

	m, created, err := f.tables.Create(ctx, tenant, "t", 4)
	if err != nil || !created || m.ID == old.ID {
		t.Fatalf("recreate: %+v %v %v", m, created, err)
	}
	for _, id := range []string{"a", "b", "c", "x"} {
		if got := f.doc(t, "t", id); got != "" {
			t.Fatalf("recreated table shows %s = %s", id, got)
		}
	}
	if r := f.mustFast(t, "t", `{"deletes":["a","b"]}`); r.Deleted != 0 {
		t.Fatalf("deleted %d old documents in the new table", r.Deleted)
	}
}

// assertPurged checks that nothing of table id remains: no documents, no
// intents, no dropped marker.
func assertPurged(t *testing.T, st store.Store, id string) {
	t.Helper()
	for _, p := range [][]byte{store.NSTable.Prefix(id), store.NSIntent.Prefix(id), store.NSMeta.Prefix("dropped")} {
		if k := keysUnder(t, st, p); len(k) != 0 {
			t.Fatalf("left after purge of %s: %q", id, k)
		}
	}
}

// TestTables_PurgeFinishesAnInterruptedDrop proves that when a drop stopped
// after its durable "dropped" mark (simulated by writing exactly the drop's
// first Apply, then crashing), the table is already invisible, and Purge
// after a restart removes every document and intent of the old ID.
func TestTables_PurgeFinishesAnInterruptedDrop(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	m := f.create(t, "t", 4)
	// Enough documents for several bounded purge batches.
	for i := 0; i < 600; i += 200 {
		body := `{"inserts":[`
		for j := i; j < i+200; j++ {
			if j > i {
				body += ","
			}
			body += fmt.Sprintf(`{"id":"d%d","doc":{"n":%d}}`, j, j)
		}
		f.mustFast(t, "t", body+`]}`)
	}
	// An open 2PC intent on the table as well.
	plan := f.plan(t, "t", `{"inserts":[{"id":"i1","doc":{}}],"deletes":["d1"]}`)
	if res, err := f.coord.Begin(ctx, txnOf("tx", plan), nil); err != nil || !res.Prepared {
		t.Fatalf("begin: %+v %v", res, err)
	}
	if k := keysUnder(t, f.db, store.NSIntent.Prefix(m.ID)); len(k) != 2 {
		t.Fatalf("intents = %q", k)
	}
	// The drop's first write, as Drop makes it, then a crash.
	meta, err := f.db.Get(ctx, store.NSMeta.Key("tenant", hex.EncodeToString([]byte(tenant)), "t"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Apply(ctx, new(store.Batch).
		AtVersion(meta.Key, meta.Version).
		Delete(meta.Key).
		Put(store.NSMeta.Key("dropped", m.ID), []byte("t"))); err != nil {
		t.Fatal(err)
	}
	f.crashReopen(t)
	_, err = f.tables.Meta(ctx, tenant, "t")
	wantCode(t, err, code.TableNotFound)
	if k := keysUnder(t, f.db, store.NSTable.Prefix(m.ID)); len(k) != 600 {
		t.Fatalf("%d documents before purge, want 600", len(k))
	}
	if err := f.tables.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	assertPurged(t, f.db, m.ID)
	// Purge with nothing to do is a no-op.
	if err := f.tables.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	// The transaction on the dropped table still recovers, leaving nothing.
	if _, err := f.coord.Recover(ctx, twopc.RecoverOptions{Undecided: twopc.CommitPrepared}); err != nil {
		t.Fatal(err)
	}
	assertPurged(t, f.db, m.ID)
	if k := keysUnder(t, f.db, store.NSTxn.Prefix("rec")); len(k) != 0 {
		t.Fatalf("records left: %q", k)
	}
}

// scanHookStore runs hook before every Scan.
type scanHookStore struct {
	store.Store
	hook func()
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *scanHookStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s *scanHookStore) Scan(ctx context.Context, start, end []byte, limit int) ([]store.Item, error) {
	s.hook()
	return s.Store.Scan(ctx, start, end, limit)
}

// TestTables_DropLeavesNothingWhenResolutionRacesThePurge proves that a
// committed transaction whose intents are resolved while the table is being
// purged (at any step of the purge) cannot leave documents of the dropped
// table behind.
func TestTables_DropLeavesNothingWhenResolutionRacesThePurge(t *testing.T) {
	ctx := context.Background()
	for k := 1; ; k++ {
		f := newFixture(t, twopc.WithTestKnobs(twopc.Options{}, testknobs.TwoPC{DeferResolution: true}))
		m := f.create(t, "t", 4)
		f.mustFast(t, "t", `{"inserts":[{"id":"old","doc":{}}]}`)
		plan := f.plan(t, "t", `{"inserts":[{"id":"a","doc":{}},{"id":"b","doc":{}},{"id":"c","doc":{}}],"deletes":["old"]}`)
		txn := txnOf("tx", plan)
		if res, err := f.coord.Begin(ctx, txn, nil); err != nil || !res.Prepared {
			t.Fatalf("begin: %+v %v", res, err)
		}
		if _, _, err := f.coord.DecideOrLearn(ctx, "tx", nil, twopc.Committed{}, nil); err != nil {
			t.Fatal(err)
		}
		scans, fired := 0, false
		hooked := table.New(&scanHookStore{Store: f.db, hook: func() {
			if scans++; scans == k {
				fired = true
				if _, err := f.coord.Resolve(ctx, "tx"); err != nil {
					t.Errorf("resolve: %v", err)
				}
			}
		}}, nil)
		if err := hooked.Drop(ctx, tenant, "t"); err != nil {
			t.Fatal(err)
		}
		if !fired {
			break // resolution ran after every step of the purge
		}
		if k > 50 {
			t.Fatal("purge did not end")
		}
		if _, err := f.coord.Resolve(ctx, "tx"); err != nil {
			t.Fatal(err)
		}
		for _, p := range [][]byte{store.NSTable.Prefix(m.ID), store.NSIntent.Prefix(m.ID)} {
			if left := keysUnder(t, f.db, p); len(left) != 0 {
				t.Fatalf("resolution before purge scan %d left %q", k, left)
			}
		}
	}
}

// TestTables_ConcurrentCreateHasOneCreatorAndNoErrors proves that racing
// creates of one name all succeed: exactly one reports created=true, and
// every caller gets the same table.
func TestTables_ConcurrentCreateHasOneCreatorAndNoErrors(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	const racers = 4
	for i := range 30 {
		name := fmt.Sprintf("t%d", i)
		var metas [racers]table.Meta
		var created [racers]bool
		var errs [racers]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				<-start
				metas[r], created[r], errs[r] = f.tables.Create(ctx, tenant, name, 2)
			})
		}
		close(start)
		wg.Wait()
		creators := 0
		for r := range racers {
			if errs[r] != nil {
				t.Fatalf("%s: racer %d: %v", name, r, errs[r])
			}
			if created[r] {
				creators++
			}
			if metas[r].ID != metas[0].ID || metas[r].Version != metas[0].Version {
				t.Fatalf("%s: racers got different tables %+v / %+v", name, metas[r], metas[0])
			}
		}
		if creators != 1 {
			t.Fatalf("%s: %d creators", name, creators)
		}
	}
}
