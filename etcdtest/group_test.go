package etcdtest_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/etcdtest"
	"github.com/idemdb/idem/store"
	etcdstore "github.com/idemdb/idem/store/etcd"
)

// TestGroup_ConcurrentAppliesShareTxnsAndKeepTheirOwnOutcomes: with one
// Txn in flight at a time (GroupInFlightMax 1), concurrent Applies ride
// in groups of nested sub-Txns, and each keeps its own outcome: every
// create-if-absent of a fresh key succeeds at the version etcd holds; of
// the creates racing for one key exactly one wins and every other learns
// that very key's failed condition; CAS increments of shared counters add
// up to the successful sets (a group never takes a key twice, so no two
// sub-Txns compare one counter at the same revision). The fresh creates
// are wide (groupWideOps puts), so that a group must also keep within
// etcd's op budget, which a nested level shares with its parent: etcd
// refuses no group (Stats.Split stays 0).
func TestGroup_ConcurrentAppliesShareTxnsAndKeepTheirOwnOutcomes(t *testing.T) {
	c := sharedCluster(t)
	s := newStoreWith(t, c.Client(t), etcdstore.Options{Prefix: etcdtest.Prefix(t), GroupInFlightMax: 1})
	const workers, counters = 16, 3
	// Under the race detector (go-race's longest package) half the rounds:
	// each is 16 concurrent groups of wide batches and contended sets, the
	// same mix, six times instead of twelve.
	rounds := 12
	if raceEnabled {
		rounds = 6
	}
	const groupWideOps = 124 // with its own put, 125 of etcd's 128: a group of 4 such must not form
	for i := range counters {
		if _, err := s.Apply(ctx, new(store.Batch).Put(fmt.Appendf(nil, "ctr/%d", i), []byte("0"))); err != nil {
			t.Fatal(err)
		}
	}
	var sets atomic.Int64
	winners := make([]atomic.Int64, rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				own := fmt.Appendf(nil, "own/%02d/%02d", w, r)
				b := new(store.Batch).Absent(own).Put(own, own)
				for i := range groupWideOps {
					b.Put(fmt.Appendf(nil, "%s/%03d", own, i), nil)
				}
				v, err := s.Apply(ctx, b)
				if err != nil {
					t.Errorf("fresh %s: %v", own, err)
					return
				}
				if it, err := s.Get(ctx, own); err != nil || it.Version != v {
					t.Errorf("fresh %s: Apply said version %d, etcd holds %+v %v", own, v, it, err)
					return
				}
				race := fmt.Appendf(nil, "race/%02d", r)
				_, err = s.Apply(ctx, new(store.Batch).Absent(race).Put(race, own))
				var ce *store.ConditionError
				switch {
				case err == nil:
					winners[r].Add(1)
				case errors.As(err, &ce) && string(ce.Cond.Key) == string(race) && ce.Found != 0:
				default:
					t.Errorf("racing for %s: %v", race, err)
					return
				}
				ctr := fmt.Appendf(nil, "ctr/%d", (w+r)%counters)
				it, err := s.Get(ctx, ctr)
				if err != nil {
					t.Error(err)
					return
				}
				var n int
				fmt.Sscan(string(it.Value), &n)
				_, err = s.Apply(ctx, new(store.Batch).AtVersion(ctr, it.Version).Put(ctr, fmt.Append(nil, n+1)))
				switch {
				case err == nil:
					sets.Add(1)
				case errors.Is(err, store.ErrConditionFailed):
				default:
					t.Errorf("CAS %s: %v", ctr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for r := range winners {
		if n := winners[r].Load(); n != 1 {
			t.Errorf("race/%02d: %d winners, want 1", r, n)
		}
	}
	total := 0
	for i := range counters {
		it, err := s.Get(ctx, fmt.Appendf(nil, "ctr/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		fmt.Sscan(string(it.Value), &n)
		total += n
	}
	if int64(total) != sets.Load() {
		t.Fatalf("counters sum to %d after %d successful sets", total, sets.Load())
	}
	st := s.Stats()
	t.Logf("%d Txns, %d of them groups carrying %d Applies; %d sets", st.Txns, st.Groups, st.Grouped, sets.Load())
	if st.Groups == 0 || st.Grouped <= st.Groups {
		t.Fatalf("no Applies were grouped: %+v", st)
	}
	if st.Split != 0 {
		t.Fatalf("etcd refused %d groups (their Applies were sent again alone): %+v", st.Split, st)
	}
}
