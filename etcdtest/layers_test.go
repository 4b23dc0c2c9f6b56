package etcdtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
)

// The receipt layer — and tables, 2PC, leases, renewal and the cleaner
// under it — runs on etcd unchanged. These are the lifecycle's defining
// cases (commit, replay, mismatch, a successor, adoption across nodes
// after lease expiry, the cleaner at etcd's limits), on the real store.

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// node opens a receipt service on store as node, on clock, with the
// background loops off: the tests drive maintenance by hand.
func node(t *testing.T, st store.Store, name string, clock lease.Clock, o receipt.Options) *receipt.Service {
	t.Helper()
	o.Node, o.Clock, o.Logger = name, clock, quiet
	o.MaintainInterval, o.CleanInterval = -1, -1
	svc, err := receipt.Open(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func incBatch(t *testing.T, tag string) *table.Batch {
	t.Helper()
	b, err := table.DecodeBatch([]byte(fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"tag":%q}}],"transforms":[{"id":"ctr","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`, tag, tag)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const incResult = `{"inserted":1,"deleted":0,"transformed":1}`

func keyed(t *testing.T, tbl, key string) receipt.Request {
	return receipt.Request{Principal: "alice", Table: tbl, Key: key, Batch: incBatch(t, key)}
}

func execute(t *testing.T, svc *receipt.Service, r receipt.Request) receipt.Answer {
	t.Helper()
	a, err := svc.Execute(ctx, r)
	if err != nil {
		t.Fatalf("Execute %s: %v", r.Key, err)
	}
	return a
}

func wantCommitted(t *testing.T, a receipt.Answer, key string, replayed bool) {
	t.Helper()
	if !a.Terminal || a.Replayed != replayed || a.Status != 201 || a.Outcome != receipt.OutcomeCommitted ||
		a.TxnID != receipt.Bind("alice", "t", key) || string(a.Result) != incResult {
		t.Fatalf("answer %+v (result %s), want committed (replayed=%v)", a, a.Result, replayed)
	}
}

func counter(t *testing.T, svc *receipt.Service) int {
	t.Helper()
	raw, err := svc.Tables().Get(ctx, "alice", "t", "ctr")
	var ce *code.Error
	if errors.As(err, &ce) && ce.Code == code.DocumentNotFound {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ N int }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.N
}

func createTable(t *testing.T, svc *receipt.Service) {
	t.Helper()
	if _, _, err := svc.Tables().Create(ctx, "alice", "t", 0); err != nil {
		t.Fatal(err)
	}
}

func TestLayers_TheLifecycleRunsOnEtcd(t *testing.T) {
	st := newStore(t, sharedCluster(t), etcdtest.Prefix(t))
	clock := lease.NewSim(t0)
	a := node(t, st, "node-0", clock, receipt.Options{})
	createTable(t, a)
	first := execute(t, a, keyed(t, "t", "k"))
	wantCommitted(t, first, "k", false)
	wantCommitted(t, execute(t, a, keyed(t, "t", "k")), "k", true)
	other := keyed(t, "t", "k")
	other.Batch = incBatch(t, "other")
	if m := execute(t, a, other); m.Status != 422 || m.Code != "idempotency_key_mismatch" {
		t.Fatalf("same key, other batch: %+v, want 422 idempotency_key_mismatch", m.Envelope)
	}
	a.Close()

	b := node(t, st, "node-0", clock, receipt.Options{})
	if b.Owner().Incarnation <= 1 {
		t.Fatalf("successor incarnation %d, want > 1", b.Owner().Incarnation)
	}
	again := execute(t, b, keyed(t, "t", "k"))
	wantCommitted(t, again, "k", true)
	if !bytes.Equal(again.Result, first.Result) || again.Message != first.Message {
		t.Fatalf("replay %+v, first %+v", again.Envelope, first.Envelope)
	}
	if _, err := b.MaintainOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, b); got != 1 {
		t.Fatalf("counter %d, want 1", got)
	}
}

// TestLayers_AnotherNodeAdoptsAfterLeaseExpiry: node-0 dies after Begin,
// before its decision; node-1, on its own etcd client, may not adopt
// while node-0's lease lives, then adopts and finishes the receipt with
// nobody retrying. The batch applied once, and a retry replays.
func TestLayers_AnotherNodeAdoptsAfterLeaseExpiry(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	clock := lease.NewSim(t0)
	a := node(t, newStore(t, c, prefix), "node-0", clock, receipt.WithTestKnobs(receipt.Options{}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, a)
	disarm := testsupport.Arm(t, fault.ReceiptDecideBefore, `return("crash")`)
	if _, err := a.Execute(ctx, keyed(t, "t", "k")); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Execute: %v, want the injected crash", err)
	}
	disarm()
	a.Close()

	b := node(t, newStore(t, c, prefix), "node-1", clock, receipt.Options{})
	if ms, err := b.MaintainOnce(ctx); err != nil || ms.Adopted != 0 || ms.Deferred == 0 {
		t.Fatalf("maintenance before expiry: %+v %v, want deferred", ms, err)
	}
	clock.Advance(11 * time.Second) // past the default 10 s TTL
	if ms, err := b.MaintainOnce(ctx); err != nil || ms.Adopted != 1 || ms.Terminal != 1 {
		t.Fatalf("maintenance after expiry: %+v %v, want 1 adopted and terminal", ms, err)
	}
	if st := b.Stats(); st.Executed != 0 || st.Adopted != 1 {
		t.Fatalf("node-1 stats %+v: it must finish node-0's work, not execute again", st)
	}
	wantCommitted(t, execute(t, b, keyed(t, "t", "k")), "k", true)
	if got := counter(t, b); got != 1 {
		t.Fatalf("counter %d, want 1", got)
	}
}

// TestLayers_ConcurrentNodesOneKeyApplyOnce: two nodes race the same key
// from many goroutines; every answer is the one committed answer.
//
// The nodes run on the real clock: a request that finds the receipt
// started by the other node polls it (awaitOwner) every WaitPoll, and on a
// simulated clock that nobody advances that poll never wakes (the test
// hung about once in 30 runs, when a read fell between the other node's
// create and its terminal write).
func TestLayers_ConcurrentNodesOneKeyApplyOnce(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	clock := lease.Real{}
	nodes := []*receipt.Service{
		node(t, newStore(t, c, prefix), "node-0", clock, receipt.Options{}),
		node(t, newStore(t, c, prefix), "node-1", clock, receipt.Options{}),
	}
	createTable(t, nodes[0])
	const perNode = 8
	answers := make(chan receipt.Answer, 2*perNode)
	var wg sync.WaitGroup
	for _, svc := range nodes {
		for range perNode {
			wg.Go(func() {
				r := keyed(t, "t", "k")
				r.Wait = 10 * time.Second
				a, err := svc.Execute(ctx, r)
				if err != nil {
					t.Errorf("Execute: %v", err)
					return
				}
				answers <- a
			})
		}
	}
	wg.Wait()
	close(answers)
	fresh := 0
	for a := range answers {
		if !a.Terminal || a.Status != 201 || string(a.Result) != incResult || a.TxnID != receipt.Bind("alice", "t", "k") {
			t.Fatalf("answer %+v, want the committed answer", a.Envelope)
		}
		if !a.Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d answers were fresh executions, want 1", fresh)
	}
	if got := counter(t, nodes[1]); got != 1 {
		t.Fatalf("counter %d, want 1", got)
	}
}

// TestLayers_TheCleanerAndReleaseFitEtcdLimits: 300 receipts (more than
// two Txns' worth at 128 ops) are released, cleaned after retention, and
// their table dropped, every batch within etcd's own limits — the store
// sends them, and etcd, not a model of it, would refuse one too big.
func TestLayers_TheCleanerAndReleaseFitEtcdLimits(t *testing.T) {
	const receipts = 300
	sto := newStore(t, sharedCluster(t), etcdtest.Prefix(t))
	clock := lease.NewSim(t0)
	// Two writes apart: decisions retained for maintenance to release.
	svc := node(t, sto, "node-0", clock, receipt.WithTestKnobs(receipt.Options{Retention: time.Minute}, testknobs.Receipt{SeparateDecide: true}))
	createTable(t, svc)
	for i := range receipts {
		key := fmt.Sprintf("k%03d", i)
		wantCommitted(t, execute(t, svc, keyed(t, "t", key)), key, false)
	}
	if _, err := svc.MaintainOnce(ctx); err != nil {
		t.Fatalf("maintenance (releases decisions): %v", err)
	}
	if svc.Stats().Released == 0 {
		t.Fatal("maintenance released no decision")
	}
	clock.Advance(2 * time.Minute)
	cleaned := 0
	for range receipts {
		n, err := svc.CleanOnce(ctx)
		if err != nil {
			t.Fatalf("clean: %v", err)
		}
		if n == 0 {
			break
		}
		cleaned += n
	}
	if cleaned != receipts {
		t.Fatalf("cleaned %d receipts, want %d", cleaned, receipts)
	}
	// Each left its tombstone: the key is refused, read in the lookup's
	// one round trip (receipt, tombstone, table metadata).
	if a := execute(t, svc, keyed(t, "t", "k000")); a.Code != code.KeyExpired || a.Original == nil || a.Original.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("an expired key on etcd: %+v", a)
	}
	// Once their protection ends, the tombstones go too, in Txns that fit.
	clock.Advance(receipt.TombstoneRetentionDefault)
	if _, err := svc.CleanOnce(ctx); err != nil {
		t.Fatalf("clean tombstones: %v", err)
	}
	if got := svc.Stats().TombsCleaned; got != receipts {
		t.Fatalf("cleaned %d tombstones, want %d", got, receipts)
	}
	if err := svc.Tables().Drop(ctx, "alice", "t"); err != nil {
		t.Fatalf("drop a table of %d documents: %v", receipts+1, err)
	}
	left, err := sto.Scan(ctx, nil, nil, sto.Limits().ScanItemsMax)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range left {
		if !bytes.HasPrefix(it.Key, []byte("lease/")) {
			t.Fatalf("left behind: %q", it.Key)
		}
	}
	if st := sto.Stats(); st.Txns == 0 {
		t.Fatal("no Txn reached etcd")
	}
}

// TestLayers_AKeyedRequestIsOneRoundTripOnEtcd: a node's first request
// on a table reads the receipt, its tombstone and the table's metadata in
// one read (etcdstore.GetMany), then writes once (the write that commits
// publishes the terminal receipt: receipt/create_terminal.go); from then
// on a new key is the one write alone (receipt/createfirst.go: created
// before any lookup, planned from the cached metadata). A retry on the
// node that answered the key is one read; on another, the one create that
// fails and brings the receipt back (Else reads the value), unless it says
// it is a retry (Repeatability-First-Sent): then one read.
func TestLayers_AKeyedRequestIsOneRoundTripOnEtcd(t *testing.T) {
	st := newStore(t, sharedCluster(t), etcdtest.Prefix(t))
	clock := lease.NewSim(t0)
	svc := node(t, st, "node-0", clock, receipt.Options{})
	other := node(t, st, "node-1", clock, receipt.Options{})
	createTable(t, svc)
	b, err := table.DecodeBatch([]byte(`{"inserts":[{"id":"a","doc":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := func(key string) receipt.Request {
		return receipt.Request{Principal: "alice", Table: "t", Key: key, Batch: b}
	}
	said := req("k1") // a key node-1 never saw
	said.FirstSent = clock.Now().Add(-2 * receipt.RetryHintAfter)
	for _, step := range []struct {
		what        string
		on          *receipt.Service
		req         receipt.Request
		replayed    bool
		txns, reads uint64
	}{
		{"the table's first new key", svc, req("k1"), false, 1, 1},
		{"a new key", svc, req("k2"), false, 1, 0},
		{"a retry", svc, req("k2"), true, 0, 1},
		{"another node's first new key", other, req("k3"), false, 1, 1},
		{"a retry on another node", other, req("k2"), true, 1, 0},
		{"a retry that says so", other, said, true, 0, 1},
	} {
		before := st.Stats()
		if a := execute(t, step.on, step.req); a.Replayed != step.replayed || a.Outcome != receipt.OutcomeCommitted {
			t.Fatalf("%s: %+v", step.what, a.Envelope)
		}
		after := st.Stats()
		if txns, reads := after.Txns-before.Txns, after.Ranges-before.Ranges; txns != step.txns || reads != step.reads {
			t.Fatalf("%s: %d Txns and %d reads, want %d and %d", step.what, txns, reads, step.txns, step.reads)
		}
	}
}

// TestLayers_TheMetadataReadWithTheReceiptIsNeverStale: node-b drops and
// re-creates the table node-a writes to; node-a's next new keys — planned
// from its cached copy of the metadata, then again from a fresh read — are
// refused while there is no table and land in the new one afterwards.
func TestLayers_TheMetadataReadWithTheReceiptIsNeverStale(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	clock := lease.NewSim(t0)
	a := node(t, newStore(t, c, prefix), "node-a", clock, receipt.Options{})
	b := node(t, newStore(t, c, prefix), "node-b", clock, receipt.Options{})
	createTable(t, a)
	wantCommitted(t, execute(t, a, keyed(t, "t", "k1")), "k1", false)
	if err := b.Tables().Drop(ctx, "alice", "t"); err != nil {
		t.Fatal(err)
	}
	if gone := execute(t, a, keyed(t, "t", "k2")); gone.Code != "table_not_found" || gone.Outcome != receipt.OutcomeNotApplied {
		t.Fatalf("after another node's drop: %+v, want table_not_found not_applied", gone.Envelope)
	}
	createTable(t, b)
	wantCommitted(t, execute(t, a, keyed(t, "t", "k3")), "k3", false)
	if got := counter(t, b); got != 1 {
		t.Fatalf("the new table's counter %d, want 1", got)
	}
	if a.Stats().Replanned == 0 {
		t.Fatal("node-a never planned from its cached metadata")
	}
}
