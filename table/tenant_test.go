package table_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// A principal is a tenant (docs/design.md §8): its tables are its own. Two tenants
// creating a table of the same name get two tables; neither can see, read,
// write, list or drop the other's.
func TestTenants_SameNameIsAnotherTableAndInvisibleToOthers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	a, _, err := f.tables.Create(ctx, "alice", "orders", 2)
	if err != nil {
		t.Fatal(err)
	}
	b, created, err := f.tables.Create(ctx, "bob", "orders", 4)
	if err != nil || !created || b.ID == a.ID || b.Shards != 4 {
		t.Fatalf("bob's orders: %+v created=%v %v; want a table of his own", b, created, err)
	}
	write := func(tenant, body string) {
		t.Helper()
		p, err := f.tables.Preflight(ctx, tenant, "orders", decode(t, body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.tables.ApplyFast(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	write("alice", `{"inserts":[{"id":"x","doc":{"by":"alice"}}]}`)
	write("bob", `{"inserts":[{"id":"x","doc":{"by":"bob"}}]}`)
	for tenant, want := range map[string]string{"alice": `{"by":"alice"}`, "bob": `{"by":"bob"}`} {
		if got, err := f.tables.Get(ctx, tenant, "orders", "x"); err != nil || string(got) != want {
			t.Fatalf("%s reads %s, %v; want %s", tenant, got, err, want)
		}
	}
	// Carol has no table at all: every route says so.
	_, err = f.tables.Meta(ctx, "carol", "orders")
	wantCode(t, err, code.TableNotFound)
	_, err = f.tables.Get(ctx, "carol", "orders", "x")
	wantCode(t, err, code.TableNotFound)
	_, err = f.tables.Preflight(ctx, "carol", "orders", decode(t, `{"deletes":["x"]}`))
	wantCode(t, err, code.TableNotFound)
	wantCode(t, f.tables.Drop(ctx, "carol", "orders"), code.TableNotFound)
	if list, _, _ := f.tables.List(ctx, "carol", "", 0); len(list) != 0 {
		t.Fatalf("carol lists %+v", list)
	}
	// Bob dropping his orders leaves Alice's.
	if err := f.tables.Drop(ctx, "bob", "orders"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.tables.Get(ctx, "alice", "orders", "x"); err != nil || string(got) != `{"by":"alice"}` {
		t.Fatalf("after bob's drop alice reads %s, %v", got, err)
	}
	if list, _, _ := f.tables.List(ctx, "alice", "", 0); len(list) != 1 || list[0].Name != "orders" {
		t.Fatalf("alice lists %+v", list)
	}
}

// Tenants are hex-encoded in keys: no principal name can reach into
// another's key range, whatever bytes it holds.
func TestTenants_NoNameReachesAnotherTenantsRange(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	for _, tenant := range []string{"a", "a/b", "ab", "a\x00", "", "a/"} {
		if _, _, err := f.tables.Create(ctx, tenant, "t", 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{"a", "a/b", "ab", "a\x00", "", "a/"} {
		list, _, err := f.tables.List(ctx, tenant, "", 0)
		if err != nil || len(list) != 1 || list[0].Tenant != tenant {
			t.Fatalf("tenant %q lists %+v, %v; want its one table", tenant, list, err)
		}
	}
}

func TestList_PagesInNameOrder(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	for i := range 7 {
		if _, _, err := f.tables.Create(ctx, tenant, fmt.Sprintf("t%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.tables.Create(ctx, "other", "t9", 1); err != nil {
		t.Fatal(err)
	}
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		list, next, err := f.tables.List(ctx, tenant, after, 3)
		if err != nil || len(list) > 3 || pages > 3 {
			t.Fatalf("page %d: %d tables, %v", pages, len(list), err)
		}
		for _, m := range list {
			names = append(names, m.Name)
		}
		if next == "" {
			break
		}
		after = next
	}
	if fmt.Sprint(names) != "[t0 t1 t2 t3 t4 t5 t6]" {
		t.Fatalf("pages gave %v", names)
	}
}

// Tables created before tables had tenants go to one owner, documents and
// all, in place; the move is idempotent.
func TestMigrateLegacy_GivesOldTablesToTheOwner(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, twopc.Options{})
	// A table as the earlier version stored it: meta/v1/table/<name>, no
	// tenant, documents under its id.
	m := table.Meta{Name: "legacy", ID: "00112233aabbccdd", Shards: 1, Created: 1}
	val, _ := cbor.Marshal(m)
	doc := store.NSTable.Key(m.ID, "0", "d")
	if _, err := f.db.Apply(ctx, new(store.Batch).Put(store.NSMeta.Key("table", "legacy"), val).Put(doc, []byte(`{"v":1}`))); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.tables.MigrateLegacy(ctx, "anonymous"); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.tables.Get(ctx, "anonymous", "legacy", "d"); err != nil || string(got) != `{"v":1}` {
		t.Fatalf("the owner reads %s, %v", got, err)
	}
	_, err := f.tables.Meta(ctx, "someone-else", "legacy")
	wantCode(t, err, code.TableNotFound)
	if _, err := f.db.Get(ctx, store.NSMeta.Key("table", "legacy")); err == nil {
		t.Fatal("the legacy key survived the move")
	}
}
