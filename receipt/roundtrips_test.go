package receipt_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/engine/memstore"
	"github.com/idemdb/idem/receipt"
)

// remoteStore is a store as the keyed path sees etcd: it reads several
// keys in one call (engine.MultiGetter) and chains nothing, and it counts
// its calls — each one a round trip on etcd.
type remoteStore struct {
	engine.Store
	applies, reads atomic.Int64
}

func newRemoteStore() *remoteStore { return &remoteStore{Store: memstore.New()} }

func (r *remoteStore) Apply(ctx context.Context, b *engine.Batch) (engine.Version, error) {
	r.applies.Add(1)
	return r.Store.Apply(ctx, b)
}

func (r *remoteStore) Get(ctx context.Context, key []byte) (engine.Item, error) {
	r.reads.Add(1)
	return r.Store.Get(ctx, key)
}

func (r *remoteStore) Scan(ctx context.Context, start, end []byte, limit int) ([]engine.Item, error) {
	r.reads.Add(1)
	return r.Store.Scan(ctx, start, end, limit)
}

func (r *remoteStore) GetMany(ctx context.Context, keys ...[]byte) ([]engine.Item, error) {
	r.reads.Add(1)
	return engine.GetAll(ctx, r.Store, keys...)
}

// trips are a remoteStore's calls so far: writes and reads.
func (r *remoteStore) trips() (applies, reads int64) { return r.applies.Load(), r.reads.Load() }

// insertBatch inserts doc "doc-<tag>": a batch whose Prepare reads nothing.
func insertBatch(t *testing.T, tag string) *receipt.Request {
	r := req(alice, "t", tag, mustBatch(t, fmt.Sprintf(`{"inserts":[{"id":"doc-%s","doc":{"n":1}}]}`, tag)))
	return &r
}

// TestRoundTrips_KeyedRequestIsTwoOnARemoteStore: once a node has read a
// table's metadata, a keyed request for a new key is two round trips on
// a store where every call is one (create+Begin, then the decision), and
// a retry of it is one failed create and one read, answering the same
// envelope.
func TestRoundTrips_KeyedRequestIsTwoOnARemoteStore(t *testing.T) {
	e := newEnv(t)
	store := newRemoteStore()
	svc := e.openOn(store, receipt.Options{Node: "node-a"})
	createTable(t, svc, "t")
	first := mustExecute(t, svc, *insertBatch(t, "k0")) // reads the table's metadata: cached from now on
	if !first.Terminal || first.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("first request: %+v", first.Envelope)
	}
	const requests = 20
	for i := 1; i <= requests; i++ {
		w0, r0 := store.trips()
		ans := mustExecute(t, svc, *insertBatch(t, fmt.Sprintf("k%d", i)))
		w1, r1 := store.trips()
		if !ans.Terminal || ans.Outcome != receipt.OutcomeCommitted || ans.Replayed {
			t.Fatalf("request %d: %+v", i, ans.Envelope)
		}
		if w1-w0 != 2 || r1-r0 != 0 {
			t.Fatalf("request %d took %d writes and %d reads, want 2 writes and no read", i, w1-w0, r1-r0)
		}
	}
	w0, r0 := store.trips()
	again := mustExecute(t, svc, *insertBatch(t, "k1"))
	w1, r1 := store.trips()
	if !again.Terminal || !again.Replayed || again.Outcome != receipt.OutcomeCommitted {
		t.Fatalf("retry: %+v", again.Envelope)
	}
	if w1-w0 != 1 || r1-r0 != 1 {
		t.Fatalf("a retry took %d writes and %d reads, want one failed create and one read", w1-w0, r1-r0)
	}
	if got := svc.Stats().Executed; got != requests+1 {
		t.Fatalf("executed %d batches, want %d: a retry ran again", got, requests+1)
	}
}
