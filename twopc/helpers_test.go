package twopc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// node is one engine on a data dir with tables and a coordinator wired as
// the server wires them; it can crash and reopen.
type node struct {
	disk   *memfs.Disk // a crash keeps exactly what was fsynced
	db     store.Store // engine.DB, or the reference store (testsupport.OnReferenceStore)
	edb    *engine.DB  // nil on the reference store
	mem    *memstore.Store
	tables *table.Tables
	coord  *twopc.Coordinator
	opts   twopc.Options
}

func newNode(t *testing.T, opts twopc.Options) *node {
	t.Helper()
	n := &node{disk: memfs.NewDisk(), opts: opts}
	n.open(t)
	t.Cleanup(func() { n.close() })
	if _, _, err := n.tables.Create(context.Background(), tenant, "t", 4); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) open(t *testing.T) {
	t.Helper()
	if testsupport.OnReferenceStore() {
		if n.mem == nil {
			n.mem = memstore.New() // a reopen keeps the state, as a clean restart
		}
		n.db = n.mem
	} else {
		db, err := engine.Open("/data", engine.Options{FS: n.disk.FS()})
		if err != nil {
			t.Fatal(err)
		}
		n.db, n.edb = db, db
	}
	n.tables, n.coord = table.NewWithCoordinator(n.db, n.opts)
}

func (n *node) close() {
	if n.edb != nil {
		n.edb.Close()
	}
}

// newCoordinator is another coordinator process on the same store.
func (n *node) newCoordinator(st store.Store) *twopc.Coordinator {
	_, c := table.NewWithCoordinator(st, n.opts)
	return c
}

// crashReopen simulates a power loss and recovers the same data dir with a
// fresh table manager and coordinator.
func (n *node) crashReopen(t *testing.T) {
	t.Helper()
	testsupport.SkipOnReferenceStore(t, "a crash that keeps what was fsynced needs engine.DB")
	n.disk.Crash(n.edb, nil)
	n.open(t)
}

func (n *node) plan(t *testing.T, body string) *table.Plan {
	t.Helper()
	b, err := table.DecodeBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.tables.Preflight(context.Background(), tenant, "t", b)
	if err != nil {
		t.Fatalf("preflight %s: %v", body, err)
	}
	return p
}

func (n *node) fast(t *testing.T, body string) {
	t.Helper()
	if _, err := n.tables.ApplyFast(context.Background(), n.plan(t, body)); err != nil {
		t.Fatalf("fast %s: %v", body, err)
	}
}

// doc reads a document through resolve-on-read; "" means not found.
func (n *node) doc(t *testing.T, id string) string {
	t.Helper()
	d, err := n.tables.Get(context.Background(), tenant, "t", id)
	var ce *code.Error
	if errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
		return ""
	}
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return string(d)
}

func txnFor(id string, p *table.Plan) twopc.Txn {
	parts := make([]twopc.Participant, len(p.Shards))
	for i, s := range p.Shards {
		parts[i] = s
	}
	return twopc.Txn{ID: id, Participants: parts, Result: func() ([]byte, error) { return json.Marshal(p.Result()) }}
}

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

// dump renders the whole store (storetest.Dump).
func dump(t *testing.T, s store.Store) string { t.Helper(); return storetest.Dump(t, s) }

// The batches a one-write or chained commit must refuse without writing,
// on the store nodeWithHolder sets up: one that needs document x, which
// transaction H holds open; one whose transform a participant votes no on
// (s is text, not a number); and one that is free of both.
const (
	bodyConflicting = `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":5}]}]}`
	bodyWrongType   = `{"transforms":[{"id":"s","ops":[{"op":"$inc","path":"n","value":5}]}]}`
	bodyFree        = `{"inserts":[{"id":"y","doc":{}}]}`
)

// nodeWithHolder is a node holding documents x and s, with transaction H
// begun on x and left open.
func nodeWithHolder(t *testing.T) *node {
	t.Helper()
	n := newNode(t, twopc.Options{})
	n.fast(t, `{"inserts":[{"id":"x","doc":{"n":1}},{"id":"s","doc":{"n":"text"}}]}`)
	holder := txnFor("H", n.plan(t, `{"transforms":[{"id":"x","ops":[{"op":"$inc","path":"n","value":1}]}]}`))
	if res, err := n.coord.Begin(context.Background(), holder, nil); err != nil || !res.Prepared {
		t.Fatalf("begin H: %+v %v", res, err)
	}
	return n
}

// wroteNothing fails the test unless write reports nothing written
// (ok=false, no error) and left the store exactly as it was.
func wroteNothing(t *testing.T, n *node, what string, write func() (ok bool, err error)) {
	t.Helper()
	before := dump(t, n.db)
	if ok, err := write(); ok || err != nil {
		t.Errorf("%s: ok=%v, %v; want nothing written and no error", what, ok, err)
	}
	if dump(t, n.db) != before {
		t.Errorf("%s: the store changed", what)
	}
}

func assertNoIntentsOrRecords(t *testing.T, st store.Store) {
	t.Helper()
	if k := keysUnder(t, st, []byte(store.NSIntent)); len(k) != 0 {
		t.Fatalf("orphaned intents: %q", k)
	}
	if k := keysUnder(t, st, store.NSTxn.Prefix("rec")); len(k) != 0 {
		t.Fatalf("coordinator records left: %q", k)
	}
}

// workload is a batch over all 4 shards of table "t": per shard one $inc
// (with a $set) of an existing document, one delete of an existing
// document and one insert, plus an upsert transform of a new document.
type workload struct {
	inc, del, ins []string
	up            string
}

var work = func() workload {
	w := workload{inc: idsPerShard("inc", 4), del: idsPerShard("del", 4), ins: idsPerShard("ins", 4), up: "up0"}
	return w
}()

const (
	incOld, incNew = `{"n":10}`, `{"n":15,"tag":"t1"}`
	delOld         = `{"v":"old"}`
	insNew         = `{"v":"new"}`
	upNew          = `{"n":1}`
)

// wantResult is the Result the workload's commit reports.
var wantResult = table.Result{Inserted: 4, Deleted: 4, Transformed: 5}

func idsPerShard(prefix string, n int) []string {
	out := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		if s := table.ShardOf(id, n); out[s] == "" {
			out[s] = id
			found++
		}
	}
	return out
}

func (w workload) seed(t *testing.T, n *node) {
	t.Helper()
	var docs []string
	for _, id := range w.inc {
		docs = append(docs, fmt.Sprintf(`{"id":%q,"doc":%s}`, id, incOld))
	}
	for _, id := range w.del {
		docs = append(docs, fmt.Sprintf(`{"id":%q,"doc":%s}`, id, delOld))
	}
	n.fast(t, `{"inserts":[`+strings.Join(docs, ",")+`]}`)
}

func (w workload) body() string {
	var ins, tr []string
	for _, id := range w.ins {
		ins = append(ins, fmt.Sprintf(`{"id":%q,"doc":%s}`, id, insNew))
	}
	for _, id := range w.inc {
		tr = append(tr, fmt.Sprintf(`{"id":%q,"ops":[{"op":"$inc","path":"n","value":5},{"op":"$set","path":"tag","value":"t1"}]}`, id))
	}
	tr = append(tr, fmt.Sprintf(`{"id":%q,"ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}`, w.up))
	del, _ := json.Marshal(w.del)
	return `{"inserts":[` + strings.Join(ins, ",") + `],"deletes":` + string(del) + `,"transforms":[` + strings.Join(tr, ",") + `]}`
}

// state reports "old" if no document of the workload shows its effect and
// "new" if every one does; a mix fails the test (atomicity).
func (w workload) state(t *testing.T, n *node) string {
	t.Helper()
	type want struct{ id, old, new string }
	var all []want
	for _, id := range w.inc {
		all = append(all, want{id, incOld, incNew})
	}
	for _, id := range w.del {
		all = append(all, want{id, delOld, ""})
	}
	for _, id := range w.ins {
		all = append(all, want{id, "", insNew})
	}
	all = append(all, want{w.up, "", upNew})
	olds, news := 0, 0
	var report []string
	for _, d := range all {
		got := n.doc(t, d.id)
		switch got {
		case d.old:
			olds++
		case d.new:
			news++
		}
		report = append(report, fmt.Sprintf("%s=%q", d.id, got))
	}
	switch {
	case olds == len(all):
		return "old"
	case news == len(all):
		return "new"
	}
	t.Fatalf("not atomic: %d old, %d new of %d: %s", olds, news, len(all), strings.Join(report, " "))
	return ""
}

func outcomeString(o twopc.Outcome) string {
	switch o := o.(type) {
	case nil:
		return "none"
	case twopc.Committed:
		return "committed:" + string(o.Result)
	case twopc.Aborted:
		return "aborted:" + string(o.Code) + ":" + o.Message
	}
	return fmt.Sprintf("%T", o)
}

// stagedOnly hides a shard's StageDirect and AppendDirect, so that BeginCommit takes the
// chain that stages intents in its first link and resolves them in its
// second: the path of participants that cannot commit directly.
type stagedOnly struct{ s *table.Shard }

func (p stagedOnly) ID() string                                   { return p.s.ID() }
func (p stagedOnly) Ref() []byte                                  { return p.s.Ref() }
func (p stagedOnly) Refusal(key []byte) (*code.Error, bool, bool) { return p.s.Refusal(key) }
func (p stagedOnly) Prepare(ctx context.Context, txnID string) (*store.Batch, error) {
	return p.s.Prepare(ctx, txnID)
}
func (p stagedOnly) Resolve(ctx context.Context, txnID string, commit bool) (*store.Batch, error) {
	return p.s.Resolve(ctx, txnID, commit)
}
func (p stagedOnly) ResolveStaged(txnID string, commit bool) (*store.Batch, bool) {
	return p.s.ResolveStaged(txnID, commit)
}
func (p stagedOnly) Prepared(txnID string, v store.Version) { p.s.Prepared(txnID, v) }

// stagedTxnFor is txnFor with every participant stagedOnly.
func stagedTxnFor(id string, p *table.Plan) twopc.Txn {
	txn := txnFor(id, p)
	for i, s := range p.Shards {
		txn.Participants[i] = stagedOnly{s}
	}
	return txn
}

// chainModes are the two chains BeginCommit makes: "staged" (intents in
// the first link, resolved in the second) and "direct" (the documents
// written by the decision link itself, twopc.DirectCommitter).
var chainModes = []string{"staged", "direct"}

// txnForChain is the transaction whose BeginCommit takes chain mode.
func txnForChain(mode, id string, p *table.Plan) twopc.Txn {
	if mode == "staged" {
		return stagedTxnFor(id, p)
	}
	return txnFor(id, p)
}
