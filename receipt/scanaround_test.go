package receipt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/store/memstore"
)

// damagedStore answers a Scan that reaches a damaged key as the engine
// does when a value does not read: an store.ValueError naming the key.
type damagedStore struct {
	store.Store
	damaged map[string]bool
}

// Capabilities implements store.Store: none, as the embedded interface
// alone would not hide them (its Capabilities would be the inner store's,
// around this wrapper).
func (s *damagedStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (s *damagedStore) Scan(ctx context.Context, start, end []byte, limit int) ([]store.Item, error) {
	items, err := s.Store.Scan(ctx, start, end, limit)
	for _, it := range items {
		if s.damaged[string(it.Key)] {
			return nil, &store.ValueError{Key: it.Key, Err: fmt.Errorf("%w: %q", store.ErrCorruption, it.Key)}
		}
	}
	return items, err
}

// TestScanAround_AWalkAnswersEveryKeyOnceAndStepsPastTheDamaged: over
// random stores, damage and page sizes, walking with scanAround's last
// answers every readable key once, in order, and every damaged key once
// as damaged; no call answers more than n keys.
func TestScanAround_AWalkAnswersEveryKeyOnceAndStepsPastTheDamaged(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		inner := memstore.New()
		st := &damagedStore{Store: inner, damaged: map[string]bool{}}
		keys := rng.IntN(40)
		var want, wantBad []string
		for i := range keys {
			k := fmt.Sprintf("k/%03d", i)
			if _, err := inner.Apply(ctx, new(store.Batch).Put([]byte(k), []byte("v"))); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(4) == 0 {
				st.damaged[k] = true
				wantBad = append(wantBad, k)
			} else {
				want = append(want, k)
			}
		}
		n := 1 + rng.IntN(8)
		var got, gotBad []string
		start := []byte("k/")
		for calls := 0; ; calls++ {
			if calls > keys+1 {
				t.Fatalf("round %d: the walk does not end", round)
			}
			items, damaged, last, err := scanAround(ctx, st, start, []byte("k0"), n)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if len(items)+len(damaged) > n {
				t.Fatalf("round %d: %d items and %d damaged, n %d", round, len(items), len(damaged), n)
			}
			for _, it := range items {
				got = append(got, string(it.Key))
			}
			for _, k := range damaged {
				gotBad = append(gotBad, string(k))
			}
			if last == nil {
				break
			}
			start = append(slices.Clone(last), 0)
		}
		if !slices.Equal(got, want) || !slices.Equal(gotBad, wantBad) {
			t.Fatalf("round %d (n %d): read %v damaged %v; want %v and %v", round, n, got, gotBad, want, wantBad)
		}
	}
}
