package table_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
	"github.com/idemdb/idem/store/storetest"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
	"github.com/idemdb/idem/vfs/memfs"
)

// tenant owns the tables these tests create.
const tenant = "p1"

// fixture is one engine with a table manager and a 2PC coordinator wired as
// the server wires them (resolve-on-read through the coordinator).
type fixture struct {
	disk   *memfs.Disk // a crash keeps exactly what was fsynced
	db     store.Store // engine.DB, or the reference store (testsupport.OnReferenceStore)
	edb    *engine.DB  // nil on the reference store
	mem    *memstore.Store
	tables *table.Tables
	coord  *twopc.Coordinator
	opts   twopc.Options
}

func newFixture(t *testing.T, opts twopc.Options) *fixture {
	t.Helper()
	f := &fixture{disk: memfs.NewDisk(), opts: opts}
	f.open(t)
	t.Cleanup(func() {
		if f.edb != nil {
			f.edb.Close()
		}
	})
	return f
}

func (f *fixture) open(t *testing.T) {
	t.Helper()
	if testsupport.OnReferenceStore() {
		if f.mem == nil {
			f.mem = memstore.New() // a reopen keeps the state, as a clean restart
		}
		f.db = f.mem
	} else {
		db, err := engine.Open("/data", engine.Options{FS: f.disk.FS()})
		if err != nil {
			t.Fatal(err)
		}
		f.db, f.edb = db, db
	}
	f.wire(f.db)
}

// wire builds tables and coordinator on store (the DB or a wrapper of it).
func (f *fixture) wire(st store.Store) {
	f.tables, f.coord = table.NewWithCoordinator(st, f.opts)
}

// crashReopen simulates a power loss and recovers the same data dir.
func (f *fixture) crashReopen(t *testing.T) {
	t.Helper()
	testsupport.SkipOnReferenceStore(t, "a crash that keeps what was fsynced needs engine.DB")
	f.disk.Crash(f.edb, nil)
	f.open(t)
}

func (f *fixture) create(t *testing.T, name string, shards int) table.Meta {
	t.Helper()
	m, _, err := f.tables.Create(context.Background(), tenant, name, shards)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decode(t *testing.T, body string) *table.Batch {
	t.Helper()
	b, err := table.DecodeBatch([]byte(body))
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return b
}

func (f *fixture) plan(t *testing.T, tbl, body string) *table.Plan {
	t.Helper()
	p, err := f.tables.Preflight(context.Background(), tenant, tbl, decode(t, body))
	if err != nil {
		t.Fatalf("preflight %s: %v", body, err)
	}
	return p
}

// fast runs body through preflight and the fast path.
func (f *fixture) fast(t *testing.T, tbl, body string) (table.Result, error) {
	t.Helper()
	return f.tables.ApplyFast(context.Background(), f.plan(t, tbl, body))
}

func (f *fixture) mustFast(t *testing.T, tbl, body string) table.Result {
	t.Helper()
	r, err := f.fast(t, tbl, body)
	if err != nil {
		t.Fatalf("fast %s: %v", body, err)
	}
	return r
}

// doc reads a document; "" means document_not_found.
func (f *fixture) doc(t *testing.T, tbl, id string) string {
	t.Helper()
	d, err := f.tables.Get(context.Background(), tenant, tbl, id)
	var ce *code.Error
	if errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
		return ""
	}
	if err != nil {
		t.Fatalf("get %s/%s: %v", tbl, id, err)
	}
	return string(d)
}

// dump renders the whole store (storetest.Dump).
func dump(t *testing.T, s store.Store) string { t.Helper(); return storetest.Dump(t, s) }

// keysUnder lists the keys with the given prefix.
func keysUnder(t *testing.T, st store.Store, prefix []byte) []string {
	t.Helper()
	items, err := st.Scan(context.Background(), prefix, store.PrefixEnd(prefix), store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Key)
	}
	return out
}

// wantCode asserts err is a *code.Error with code c and returns it.
func wantCode(t *testing.T, err error, c code.Code) *code.Error {
	t.Helper()
	var ce *code.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T), want *code.Error %s", err, err, c)
	}
	if ce.Code != c {
		t.Fatalf("got code %s (%s), want %s", ce.Code, ce.Message, c)
	}
	return ce
}

func participantsOf(p *table.Plan) []twopc.Participant {
	out := make([]twopc.Participant, len(p.Shards))
	for i, s := range p.Shards {
		out[i] = s
	}
	return out
}

func txnOf(id string, p *table.Plan) twopc.Txn {
	return twopc.Txn{ID: id, Participants: participantsOf(p), Result: func() ([]byte, error) { return json.Marshal(p.Result()) }}
}
