package etcdtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// pairedStore holds each of the next two Applies (of either node: the
// pairing is shared) until both have arrived, so that two creates are
// both staged before etcd sees either; at most pairWaitMax, after which
// the lone one goes on and the test fails on what it counts.
type pairedStore struct {
	store.Store
	pair *atomic.Pointer[pairing]
}

type pairing struct {
	held atomic.Int32
	both chan struct{} // closed by the second arrival
}

const pairWaitMax = 10 * time.Second

func (s *pairedStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	if p := s.pair.Load(); p != nil {
		switch p.held.Add(1) {
		case 1:
			select {
			case <-p.both:
			case <-time.After(pairWaitMax):
			}
		case 2:
			close(p.both)
		}
	}
	return s.Store.Apply(ctx, b)
}

// TestOnceRace_TwoNodesOneKeyOnEtcd: two nodes, each on its own client,
// send the same keyed request at once, both staged before either write
// reaches etcd (docs/etcd.md, "One write per keyed request"). Each round,
// etcd applies one write; the other fails on the receipt's absence — named
// although the shared counter it increments changed too — and its Else
// read brings the winner's receipt back: it replays the winner's envelope.
// One Txn each, one increment per round.
func TestOnceRace_TwoNodesOneKeyOnEtcd(t *testing.T) {
	c := sharedCluster(t)
	prefix := etcdtest.Prefix(t)
	clock := lease.NewSim(t0)
	stores := []*etcdstore.Store{newStore(t, c, prefix), newStore(t, c, prefix)}
	var pair atomic.Pointer[pairing]
	wrapped := []*pairedStore{{Store: stores[0], pair: &pair}, {Store: stores[1], pair: &pair}}
	nodes := []*receipt.Service{node(t, wrapped[0], "node-a", clock, receipt.Options{}), node(t, wrapped[1], "node-b", clock, receipt.Options{})}
	createTable(t, nodes[0])
	for _, svc := range nodes { // each caches the table's metadata
		wantCommitted(t, execute(t, svc, keyed(t, "t", "warm-"+svc.Owner().Node)), "warm-"+svc.Owner().Node, false)
	}
	const rounds = 5
	for r := range rounds {
		key := fmt.Sprintf("k%d", r)
		pair.Store(&pairing{both: make(chan struct{})})
		txns0 := stores[0].Stats().Txns + stores[1].Stats().Txns
		var answers [2]receipt.Answer
		var errs [2]error
		var wg sync.WaitGroup
		for i, svc := range nodes {
			r := keyed(t, "t", key)
			wg.Go(func() { answers[i], errs[i] = svc.Execute(ctx, r) })
		}
		wg.Wait()
		pair.Store(nil)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, node %d: %v", r, i, err)
			}
		}
		if txns := stores[0].Stats().Txns + stores[1].Stats().Txns - txns0; txns != 2 {
			t.Fatalf("round %d: %d Txns, want one per node", r, txns)
		}
		win, lose := answers[0], answers[1]
		if win.Replayed {
			win, lose = lose, win
		}
		wantCommitted(t, win, key, false)
		wantCommitted(t, lose, key, true)
		if string(lose.Result) != string(win.Result) || lose.TxnID != win.TxnID {
			t.Fatalf("round %d: the loser answered %+v, the winner %+v", r, lose.Envelope, win.Envelope)
		}
	}
	if got := nodes[0].Stats().Executed + nodes[1].Stats().Executed; got != 2+rounds {
		t.Fatalf("executed %d batches, want the two warm-ups and one a round", got)
	}
	if got := counter(t, nodes[0]); got != 2+rounds {
		t.Fatalf("counter %d, want %d: one increment per round and warm-up", got, 2+rounds)
	}
}
