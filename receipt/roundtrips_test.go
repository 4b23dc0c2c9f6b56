package receipt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// remoteStore is a store as the keyed path sees etcd: it reads several
// keys in one call (store.MultiGetter) and chains nothing, and it counts
// its calls — each one a round trip on etcd.
type remoteStore struct {
	store.Store
	applies, reads atomic.Int64
	gate           func() // if set, called by every Apply before it applies
}

// Capabilities implements store.Store: GetMany, as etcd's; no chains.
func (r *remoteStore) Capabilities() store.Capabilities { return store.Capabilities{MultiGet: r} }

func newRemoteStore() *remoteStore { return &remoteStore{Store: memstore.New()} }

// Apply is one round trip; a failed absence comes back with the value
// found, as etcdstore's Else branch reads it (store.ConditionError.Value).
func (r *remoteStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	r.applies.Add(1)
	if r.gate != nil {
		r.gate()
	}
	v, err := r.Store.Apply(ctx, b)
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Cond.Kind == store.MustBeAbsent {
		if it, gerr := r.Store.Get(ctx, ce.Cond.Key); gerr == nil && it.Version == ce.Found {
			ce.Value = it.Value
		}
	}
	return v, err
}

func (r *remoteStore) Get(ctx context.Context, key []byte) (store.Item, error) {
	r.reads.Add(1)
	return r.Store.Get(ctx, key)
}

func (r *remoteStore) Scan(ctx context.Context, start, end []byte, limit int) ([]store.Item, error) {
	r.reads.Add(1)
	return r.Store.Scan(ctx, start, end, limit)
}

func (r *remoteStore) GetMany(ctx context.Context, keys ...[]byte) ([]store.Item, error) {
	r.reads.Add(1)
	return store.GetAll(ctx, r.Store, keys...)
}

// trips are a remoteStore's calls so far: writes and reads.
func (r *remoteStore) trips() (applies, reads int64) { return r.applies.Load(), r.reads.Load() }

// insertBatch inserts doc "doc-<tag>": a batch whose Prepare reads nothing.
func insertBatch(t *testing.T, tag string) *receipt.Request {
	r := req(alice, "t", tag, mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"n":1}}]}`, tag)))
	return &r
}

// TestRoundTrips_KeyedRequestIsOneOnARemoteStore: once a node has read a
// table's metadata, a keyed request for a new key whose transaction
// commits directly is one round trip on a store where every call is one:
// the write that commits it publishes its terminal receipt (issue 39).
// Asked for the two writes apart (twoWrites), it is two: create+Begin,
// then the decision. A retry is one either way: a read on the node that
// answered the key (recentKeys), and elsewhere the failed create, which
// brings back the receipt it found; both answer the same envelope and run
// nothing again.
func TestRoundTrips_KeyedRequestIsOneOnARemoteStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      receipt.Options
		writes int64
	}{{"one write", receipt.Options{}, 1}, {"two writes", twoWrites(receipt.Options{}), 2}} {
		t.Run(c.name, func(t *testing.T) { keyedRoundTrips(t, c.o, c.writes) })
	}
}

// keyedRoundTrips is TestRoundTrips_KeyedRequestIsOneOnARemoteStore on
// services opened with o, a new key taking writes round trips.
func keyedRoundTrips(t *testing.T, o receipt.Options, writes int64) {
	e := newEnv(t)
	st := newRemoteStore()
	o.Node = "node-a"
	a := e.openOn(st, o)
	o.Node = "node-b"
	b := e.openOn(st, o)
	createTable(t, a, "t")
	for _, svc := range []*receipt.Service{a, b} { // each reads the table's metadata: cached from now on
		if first := mustExecute(t, svc, *insertBatch(t, "first-"+svc.Owner().Node)); first.Outcome != receipt.OutcomeCommitted {
			t.Fatalf("first request: %+v", first.Envelope)
		}
	}
	const requests = 20
	for i := 1; i <= requests; i++ {
		w0, r0 := st.trips()
		ans := mustExecute(t, a, *insertBatch(t, fmt.Sprintf("k%d", i)))
		w1, r1 := st.trips()
		if !ans.Terminal || ans.Outcome != receipt.OutcomeCommitted || ans.Replayed {
			t.Fatalf("request %d: %+v", i, ans.Envelope)
		}
		if w1-w0 != writes || r1-r0 != 0 {
			t.Fatalf("request %d took %d writes and %d reads, want %d writes and no read", i, w1-w0, r1-r0, writes)
		}
	}
	for _, retry := range []struct {
		svc           *receipt.Service
		writes, reads int64
	}{{a, 0, 1}, {b, 1, 0}} {
		w0, r0 := st.trips()
		again := mustExecute(t, retry.svc, *insertBatch(t, "k1"))
		w1, r1 := st.trips()
		if !again.Terminal || !again.Replayed || again.Outcome != receipt.OutcomeCommitted {
			t.Fatalf("retry on %s: %+v", retry.svc.Owner().Node, again.Envelope)
		}
		if w1-w0 != retry.writes || r1-r0 != retry.reads {
			t.Fatalf("a retry on %s took %d writes and %d reads, want %d and %d",
				retry.svc.Owner().Node, w1-w0, r1-r0, retry.writes, retry.reads)
		}
	}
	if got := a.Stats().Executed + b.Stats().Executed; got != requests+2 {
		t.Fatalf("executed %d batches, want %d: a retry ran again", got, requests+2)
	}
}

// TestRoundTrips_ARetryThatSaysSoReadsFirst: on a node that never saw
// the key, a request that says it was first sent a while ago
// (Repeatability-First-Sent) is taken for a retry and looked up with one
// read, no Txn; another batch under the key is answered by the one create
// that finds its receipt: a mismatch stays a mismatch, and nothing runs.
func TestRoundTrips_ARetryThatSaysSoReadsFirst(t *testing.T) {
	e := newEnv(t)
	st := newRemoteStore()
	a := e.openOn(st, receipt.Options{Node: "node-a"})
	b := e.openOn(st, receipt.Options{Node: "node-b"})
	createTable(t, a, "t")
	mustExecute(t, a, *insertBatch(t, "k1"))
	mustExecute(t, b, *insertBatch(t, "k2")) // b caches the table's metadata

	retry := *insertBatch(t, "k1")
	retry.FirstSent = e.clock.Now().Add(-2 * receipt.RetryHintAfter)
	w0, r0 := st.trips()
	if ans := mustExecute(t, b, retry); !ans.Replayed {
		t.Fatalf("retry: %+v", ans.Envelope)
	}
	if w1, r1 := st.trips(); w1-w0 != 0 || r1-r0 != 1 {
		t.Fatalf("a retry that says so took %d writes and %d reads, want one read", w1-w0, r1-r0)
	}

	other := *insertBatch(t, "k2")
	other.Batch = mustBatch(t, `{"inserts":[{"id":"doc-other","doc":{"n":2}}]}`)
	w0, r0 = st.trips()
	if ans := mustExecute(t, a, other); ans.Code != "idempotency_key_mismatch" {
		t.Fatalf("another batch under a used key: %+v, want idempotency_key_mismatch", ans.Envelope)
	}
	if w1, r1 := st.trips(); w1-w0 != 1 || r1-r0 != 0 {
		t.Fatalf("a mismatch took %d writes and %d reads, want the one failed create", w1-w0, r1-r0)
	}
	if docExists(t, a, "t", "doc-other") || a.Stats().Executed+b.Stats().Executed != 2 {
		t.Fatal("a mismatched batch ran")
	}
}

// TestRoundTrips_ARetryMeetingAnotherHereReplays: a retry on a node that
// never saw its key creates first; a second retry of it arriving while
// the first one's create is in flight here looks the key up instead of
// answering in progress (a local flight of a create sent first proves
// nothing): both replay.
func TestRoundTrips_ARetryMeetingAnotherHereReplays(t *testing.T) {
	e := newEnv(t)
	st := newRemoteStore()
	a := e.openOn(st, receipt.Options{Node: "node-a"})
	b := e.openOn(st, receipt.Options{Node: "node-b"})
	createTable(t, a, "t")
	mustExecute(t, a, *insertBatch(t, "k1"))
	mustExecute(t, b, *insertBatch(t, "warm")) // b caches the table's metadata

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	st.gate = func() { once.Do(func() { close(entered); <-release }) }
	first := make(chan receipt.Answer, 1)
	go func() {
		ans, err := b.Execute(ctx, *insertBatch(t, "k1"))
		if err != nil {
			t.Error(err)
		}
		first <- ans
	}()
	<-entered // the first retry's create is in flight
	second := mustExecute(t, b, *insertBatch(t, "k1"))
	close(release)
	for i, ans := range []receipt.Answer{second, <-first} {
		if !ans.Replayed || ans.Outcome != receipt.OutcomeCommitted {
			t.Fatalf("retry %d: %+v, want the replay", i, ans.Envelope)
		}
	}
	if got := b.Stats().Executed; got != 1 {
		t.Fatalf("node b executed %d batches, want only its own", got)
	}
}

// TestRoundTrips_ReleasingDecisionsReadsReceiptsManyAtOnce: maintenance
// checks the receipts of the decisions it releases store.GetManyMax to a
// read, not one read each, which on etcd would cost every keyed request a
// background round trip.
func TestRoundTrips_ReleasingDecisionsReadsReceiptsManyAtOnce(t *testing.T) {
	e := newEnv(t)
	sto := newRemoteStore()
	svc := e.openOn(sto, twoWrites(receipt.Options{Node: "node-a"})) // decisions retained to release
	createTable(t, svc, "t")
	const receipts = 64
	for i := range receipts {
		mustExecute(t, svc, *insertBatch(t, fmt.Sprintf("k%d", i)))
	}
	_, r0 := sto.trips()
	st, err := svc.MaintainOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, r1 := sto.trips()
	if st.Released != receipts {
		t.Fatalf("released %d decisions, want %d", st.Released, receipts)
	}
	// The receipts' reads, and a handful of the pass's own scans.
	const passScansMax = 8
	if want := int64(receipts/store.GetManyMax + passScansMax); r1-r0 > want {
		t.Fatalf("the pass read %d times for %d releases, want at most %d", r1-r0, receipts, want)
	}
}
