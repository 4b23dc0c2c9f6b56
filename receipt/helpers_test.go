package receipt_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/vfs/memfs"
	"github.com/idemdb/idem/wal/waltest"
)

var (
	ctx    = context.Background()
	t0     = time.Unix(1_700_000_000, 0)
	quiet  = slog.New(slog.DiscardHandler)
	ttl    = 6 * time.Second
	renewI = time.Second
)

// env is one data dir shared by the services of a test, with one simulated
// clock. Services and the engine are closed at cleanup.
type env struct {
	t     testing.TB
	disk  *memfs.Disk // a crash keeps exactly what was fsynced
	db    *engine.DB
	clock *lease.Sim
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, disk: memfs.NewDisk(), clock: lease.NewSim(t0)}
	e.openDB()
	t.Cleanup(func() { e.db.Close() })
	return e
}

func (e *env) openDB() {
	e.t.Helper()
	// As idemd runs it: terminal receipts and tombstones go to the value
	// log at checkpoints.
	db, err := engine.Open("/data", engine.Options{Logger: quiet, FS: e.disk.FS(), ColdValue: receipt.ColdValue})
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
}

// crash simulates a power loss of the engine and reopens the data dir.
func (e *env) crash() {
	e.t.Helper()
	e.crashKeeping(nil)
	e.openDB()
}

// crashKeeping cuts the power, tear deciding what survives of unsynced
// appends; it returns how many bytes were unsynced. The caller reopens.
func (e *env) crashKeeping(tear memfs.Tear) int {
	return waltest.Total(e.disk.Crash(e.db, tear))
}

// defaults fills the options every test uses: the simulated clock, a short
// lease, loops driven by hand.
func (e *env) defaults(o receipt.Options) receipt.Options {
	if o.Clock == nil {
		o.Clock = e.clock
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = ttl
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = renewI
	}
	if o.MaintainInterval == 0 {
		o.MaintainInterval = -1
	}
	if o.CleanInterval == 0 {
		o.CleanInterval = -1
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	return o
}

// open starts a service on the env's engine.
func (e *env) open(o receipt.Options) *receipt.Service { return e.openOn(e.db, o) }

// openOn starts a service on store (e.g. a fault-injecting wrapper).
func (e *env) openOn(st store.Store, o receipt.Options) *receipt.Service {
	e.t.Helper()
	svc, err := receipt.Open(ctx, st, e.defaults(o))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(svc.Close)
	return svc
}

// alice is the principal most tests send as; her tables are the ones
// createTable creates and counter reads.
const alice = "alice"

func createTable(t testing.TB, svc *receipt.Service, name string) {
	t.Helper()
	createTableFor(t, svc, alice, name)
}

func createTableFor(t testing.TB, svc *receipt.Service, principal, name string) {
	t.Helper()
	if _, _, err := svc.Tables().Create(ctx, principal, name, 0); err != nil {
		t.Fatal(err)
	}
}

func mustBatch(t testing.TB, s string) *table.Batch {
	t.Helper()
	b, err := table.DecodeBatch([]byte(s))
	if err != nil {
		t.Fatalf("batch %s: %v", s, err)
	}
	return b
}

// incBatch inserts doc "doc-<tag>" and increments counter doc ctr by one.
func incBatch(t *testing.T, tag, ctr string) *table.Batch {
	return mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"tag":%q}}],"transforms":[{"id":%q,"ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, tag, tag, ctr))
}

// incResult is the committed result of incBatch.
const incResult = `{"inserted":1,"deleted":0,"transformed":1}`

func req(principal, tbl, key string, b *table.Batch) receipt.Request {
	return receipt.Request{Principal: principal, Table: tbl, Key: key, Batch: b}
}

// counter reads the $inc counter of doc id (0 if the doc does not exist).
func counter(t *testing.T, svc *receipt.Service, tbl, id string) int {
	t.Helper()
	return counterOf(t, svc, alice, tbl, id)
}

// counterOf reads the counter in principal's table.
func counterOf(t *testing.T, svc *receipt.Service, principal, tbl, id string) int {
	t.Helper()
	raw, err := svc.Tables().Get(ctx, principal, tbl, id)
	if err != nil {
		var ce *code.Error
		if errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
			return 0
		}
		t.Fatalf("read %s/%s: %v", tbl, id, err)
	}
	var doc struct{ N int }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("doc %s: %s: %v", id, raw, err)
	}
	return doc.N
}

func docExists(t *testing.T, svc *receipt.Service, tbl, id string) bool {
	t.Helper()
	_, err := svc.Tables().Get(ctx, alice, tbl, id)
	return err == nil
}

func mustExecute(t testing.TB, svc *receipt.Service, r receipt.Request) receipt.Answer {
	t.Helper()
	a, err := svc.Execute(ctx, r)
	if err != nil {
		t.Fatalf("Execute %s: %v", r.Key, err)
	}
	return a
}

// wantCommitted checks a committed terminal answer of incBatch.
func wantCommitted(t *testing.T, a receipt.Answer, txnID string, replayed bool) {
	t.Helper()
	if !a.Terminal || a.Replayed != replayed || a.Status != 201 || a.Outcome != receipt.OutcomeCommitted ||
		a.Code != "" || a.TxnID != txnID || string(a.Result) != incResult || a.RetryWith != "none" {
		t.Fatalf("answer %+v (result %s), want committed %s (replayed=%v)", a, a.Result, txnID, replayed)
	}
}

// sameEnvelope compares every field of two envelopes.
func sameEnvelope(a, b receipt.Envelope) bool {
	return a.Status == b.Status && a.Outcome == b.Outcome && a.Code == b.Code && a.Message == b.Message &&
		a.Retryable == b.Retryable && a.RetryWith == b.RetryWith && a.TxnID == b.TxnID && bytes.Equal(a.Result, b.Result)
}

func wantSameEnvelope(t *testing.T, got, want receipt.Envelope) {
	t.Helper()
	if !sameEnvelope(got, want) {
		t.Fatalf("envelope\n got %+v (result %s)\nwant %+v (result %s)", got, got.Result, want, want.Result)
	}
}

// record reads and decodes a receipt.
func record(t *testing.T, st store.Store, id string) (*receipt.Record, store.Version) {
	t.Helper()
	it, err := st.Get(ctx, store.NSReceipt.Key(id))
	if err != nil {
		t.Fatalf("receipt %s: %v", id, err)
	}
	r, err := receipt.DecodeRecord(it.Value)
	if err != nil {
		t.Fatal(err)
	}
	return r, it.Version
}

func receiptExists(t *testing.T, st store.Store, id string) bool {
	t.Helper()
	_, err := st.Get(ctx, store.NSReceipt.Key(id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func decisionKey(id string) []byte { return store.NSTxn.Key("dec", id) }

// dump returns every key and version in the store.
func dump(t *testing.T, st store.Store) map[string]store.Version {
	t.Helper()
	items, err := st.Scan(ctx, []byte{0}, nil, store.ScanLimitMax)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]store.Version, len(items))
	for _, it := range items {
		out[string(it.Key)] = it.Version
	}
	return out
}

// parked waits until exactly n goroutines wait on the simulated clock.
func (e *env) parked(n int) {
	e.t.Helper()
	testsupport.Poll(e.t, fmt.Sprintf("%d timers on the simulated clock", n), testsupport.Patience, func() bool { return e.clock.Timers() == n })
}

// step advances the clock by d and waits until the n goroutines that live
// on the clock are parked again (their work for this step is done).
func (e *env) step(d time.Duration, n int) {
	e.t.Helper()
	e.parked(n)
	e.clock.Advance(d)
	e.parked(n)
}

// pauseMaintenance starts a maintenance pass of svc parked on the
// receipt/maintain-before failpoint and waits until it is; unpause lets it
// go, and done receives its error.
func pauseMaintenance(t *testing.T, svc *receipt.Service) (unpause func(), done <-chan error) {
	t.Helper()
	unpause = testsupport.Arm(t, fault.ReceiptMaintainBefore, "pause")
	maint := make(chan error, 1)
	go func() {
		_, err := svc.MaintainOnce(ctx)
		maint <- err
	}()
	testsupport.Poll(t, "maintenance to park on its failpoint", testsupport.Patience, func() bool {
		return stackHas("receipt.(*Service).MaintainOnce(", "failpoint.(*Failpoint).Pause(")
	})
	return unpause, maint
}

// stackHas reports whether some goroutine's stack contains every fragment.
func stackHas(fragments ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		ok := true
		for _, f := range fragments {
			if !strings.Contains(g, f) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// result of an asynchronous Execute.
type result struct {
	a   receipt.Answer
	err error
}

// twoNodes opens node-0 on a hookStore (its writes can be held at a gate,
// and it makes two of them: twoWrites) and node-1 on the bare engine,
// sharing one store with table "t".
func twoNodes(t *testing.T) (e *env, hs *hookStore, n0, n1 *receipt.Service) {
	t.Helper()
	e = newEnv(t)
	hs = &hookStore{Store: e.db}
	n0 = e.openOn(hs, twoWrites(receipt.Options{Node: "node-0"})) // its tests hold it between its two writes
	n1 = e.open(receipt.Options{Node: "node-1"})
	createTable(t, n0, "t")
	return e, hs, n0, n1
}

func goExecute(svc *receipt.Service, r receipt.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		a, err := svc.Execute(ctx, r)
		ch <- result{a, err}
	}()
	return ch
}

// voteNo arms hs so that every write conditioned on tenant's table tbl
// being the version it was planned at — a Begin's, or a chain's — finds
// the table changed: a real conflict, not contention (Shard.Contended), so
// the participant votes no and the receipt stores the abort
// (table_not_found). An intent left in the way no longer does: contention
// is answered pending, nothing stored (start.go contended). hs.clear()
// disarms it.
func voteNo(hs *hookStore, tenant, tbl string) {
	meta := store.NSMeta.Key("tenant", hex.EncodeToString([]byte(tenant)), tbl)
	hs.onApply(func(_ context.Context, b *store.Batch) (store.Version, error, bool) {
		for _, c := range b.Conds {
			if c.Kind == store.MustBeAtVersion && bytes.Equal(c.Key, meta) {
				return 0, &store.ConditionError{Cond: c}, true
			}
		}
		return 0, nil, false
	})
}

// wantVotedNo fails unless ans is the stored abort of a voteNo.
func wantVotedNo(t *testing.T, ans receipt.Answer, id string) {
	t.Helper()
	if !ans.Terminal || ans.Status != 404 || ans.Outcome != receipt.OutcomeAborted || ans.Code != "table_not_found" ||
		ans.RetryWith != "new_key" || ans.Message == "" || ans.TxnID != id {
		t.Fatalf("answer %+v, want the stored abort of a participant's no", ans)
	}
}

// hookStore wraps a Store; tests install hooks to fail or block calls.
type hookStore struct {
	store.Store
	applyHook atomic.Pointer[func(context.Context, *store.Batch) (store.Version, error, bool)]
	getHook   atomic.Pointer[func([]byte) error]
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *hookStore) Capabilities() store.Capabilities { return store.Capabilities{} }

// onApply installs h: when it returns handled=true its result replaces the
// call (it may delegate itself).
func (s *hookStore) onApply(h func(ctx context.Context, b *store.Batch) (store.Version, error, bool)) {
	s.applyHook.Store(&h)
}

// onGet installs h: a non-nil error replaces the Get.
func (s *hookStore) onGet(h func(key []byte) error) { s.getHook.Store(&h) }

func (s *hookStore) clear() {
	s.applyHook.Store(nil)
	s.getHook.Store(nil)
}

func (s *hookStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if h := s.applyHook.Load(); h != nil {
		if v, err, handled := (*h)(ctx, b); handled {
			return v, err
		}
	}
	return s.Store.Apply(ctx, b)
}

func (s *hookStore) Get(ctx context.Context, key []byte) (store.Item, error) {
	if h := s.getHook.Load(); h != nil {
		if err := (*h)(key); err != nil {
			return store.Item{}, err
		}
	}
	return s.Store.Get(ctx, key)
}

// putsKey reports whether b writes key.
func putsKey(b *store.Batch, key []byte) bool {
	for _, op := range b.Ops {
		if !op.Delete && bytes.Equal(op.Key, key) {
			return true
		}
	}
	return false
}

// gate blocks the first Apply that writes key until opened.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	rel     sync.Once
}

// block installs on s a gate for the first Apply writing key; it opens at
// the test's end at the latest.
func (s *hookStore) block(t *testing.T, key []byte) *gate {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.open)
	s.onApply(func(ctx context.Context, b *store.Batch) (store.Version, error, bool) {
		if !putsKey(b, key) {
			return 0, nil, false
		}
		first := false
		g.once.Do(func() { first = true })
		if !first {
			return 0, nil, false
		}
		close(g.entered)
		<-g.release
		v, err := s.Store.Apply(ctx, b)
		return v, err, true
	})
	return g
}

func (g *gate) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the gated write")
	}
}

func (g *gate) open() { g.rel.Do(func() { close(g.release) }) }

var errTransient = errors.New("test: transient store error")

// view returns the receipt's state through the service.
func view(t *testing.T, svc *receipt.Service, principal, tbl, key string) receipt.View {
	t.Helper()
	v, err := svc.Lookup(ctx, principal, tbl, key)
	if err != nil {
		t.Fatalf("Lookup %s: %v", key, err)
	}
	return v
}

func awaitResult(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for Execute")
	}
	return result{}
}

// occupyExecutor starts a keyed request (alice/t/busy, incrementing ctr)
// that takes the only executor slot of svc (opened on hs with ExecutorMax
// 1, and twoWrites) and holds it at its decision write until the returned
// gate opens.
func occupyExecutor(t *testing.T, svc *receipt.Service, hs *hookStore, ctr string) (*gate, <-chan result) {
	t.Helper()
	g := hs.block(t, decisionKey(receipt.Bind("alice", "t", "busy")))
	busy := goExecute(svc, req("alice", "t", "busy", incBatch(t, "busy", ctr)))
	g.wait(t)
	return g, busy
}

// oneTenant is the InflightPerPrincipalMax of the tests in which one
// principal fills a one-slot executor and sends more: its default (a
// quarter of the slots, at least one) would refuse the second request at
// the principal's quota before it could find the executor full.
const oneTenant = 8
