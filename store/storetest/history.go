package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/idemdb/idem/store"
)

// The randomized history: batches of random conditions and writes over a
// small key space, so that conditions fail and keys are rewritten often.
// Each answer is checked against a model (a map), and every so often a
// full Scan must equal it. Versions cannot be predicted (engine.DB's are
// log indexes), so the model takes each new version from the store and
// checks only that it is greater than the last.
const (
	historySeed     = 1
	historyOps      = 2000
	historyKeys     = 8
	historyScanEach = 50 // batches between full comparisons
)

type modelItem struct {
	value   []byte
	version store.Version
}

func checkHistory(t *testing.T, s store.Store, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	model := map[string]modelItem{}
	var last store.Version
	key := func() []byte { return []byte(fmt.Sprintf("k%d", rng.IntN(historyKeys))) }
	for i := 0; i < ops; i++ {
		b := new(store.Batch)
		for range rng.IntN(3) {
			kk := key()
			switch rng.IntN(4) {
			case 0:
				b.Absent(kk)
			case 1:
				b.Present(kk)
			case 2: // usually the current version, so that it holds
				b.AtVersion(kk, model[string(kk)].version)
			default:
				b.AtVersion(kk, store.Version(rng.IntN(int(last)+2)))
			}
		}
		for range 1 + rng.IntN(4) {
			if rng.IntN(3) == 0 {
				b.Delete(key())
			} else {
				b.Put(key(), []byte(fmt.Sprintf("v%d", i)))
			}
		}
		failed, found := firstFailing(b, model)
		v, err := s.Apply(ctx, b)
		var ce *store.ConditionError
		switch {
		case failed != nil:
			if !errors.As(err, &ce) || !bytes.Equal(ce.Cond.Key, failed.Key) || ce.Cond.Kind != failed.Kind || ce.Found != found {
				t.Fatalf("batch %d: %v, want condition %s on %q failing at %d", i, err, failed.Kind, failed.Key, found)
			}
		case err != nil:
			t.Fatalf("batch %d: %v", i, err)
		case v < last || v == last && changes(b, model):
			// A batch that changes nothing (deletes of absent keys) may
			// answer the last version (store.Version), never an older one.
			t.Fatalf("batch %d: version %d after %d", i, v, last)
		default:
			last = v
			for _, op := range b.Ops {
				if op.Delete {
					delete(model, string(op.Key))
				} else {
					model[string(op.Key)] = modelItem{op.Value, v}
				}
			}
		}
		if i%historyScanEach == 0 || i == ops-1 {
			compareAll(t, s, model, i)
		}
	}
}

// changes reports whether b, applied to the model, changes anything: the
// last op on some key is a put, or a delete of a present key.
func changes(b *store.Batch, model map[string]modelItem) bool {
	seen := map[string]bool{}
	for i := len(b.Ops) - 1; i >= 0; i-- {
		op := b.Ops[i]
		if seen[string(op.Key)] {
			continue
		}
		seen[string(op.Key)] = true
		if _, present := model[string(op.Key)]; !op.Delete || present {
			return true
		}
	}
	return false
}

// firstFailing returns the first condition of b the model refuses, and the
// version it found. The model decides conditions by its own switch, not
// store.Condition.HoldsAt, so that it cannot share a mistake with the
// stores it checks.
func firstFailing(b *store.Batch, model map[string]modelItem) (*store.Condition, store.Version) {
	for i, c := range b.Conds {
		found := model[string(c.Key)].version
		ok := false
		switch c.Kind {
		case store.MustBeAbsent:
			ok = found == 0
		case store.MustBePresent:
			ok = found != 0
		case store.MustBeAtVersion:
			ok = found != 0 && found == c.Version
		}
		if !ok {
			return &b.Conds[i], found
		}
	}
	return nil, 0
}

// compareAll checks a full Scan and every Get against the model.
func compareAll(t *testing.T, s store.Store, model map[string]modelItem, step int) {
	t.Helper()
	items, err := s.Scan(ctx, nil, nil, s.Limits().ScanItemsMax)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(items) != len(keys) {
		t.Fatalf("step %d: scan has %d items, model %d", step, len(items), len(keys))
	}
	for i, it := range items {
		m := model[keys[i]]
		if string(it.Key) != keys[i] || !bytes.Equal(it.Value, m.value) || it.Version != m.version {
			t.Fatalf("step %d: scan item %d {%q %q %d}, model {%q %q %d}", step, i, it.Key, it.Value, it.Version, keys[i], m.value, m.version)
		}
	}
}

// The concurrent history: casWorkers goroutines each increment one shared
// counter casRounds times by read, then Apply conditioned on the version
// read, retrying on a failed condition. Atomic conditions mean no
// increment is lost: the counter ends at casWorkers × casRounds, and every
// successful Apply saw a distinct version.
const (
	casWorkers = 8
	casRounds  = 25
	// casAttemptsMax bounds one increment's retries: with casWorkers
	// contenders an attempt fails at most casWorkers-1 times in a row per
	// round of the others, so this is generous, never reached by a correct
	// store, and stops a broken one instead of spinning.
	casAttemptsMax = 10000
)

func checkConcurrentCAS(t *testing.T, s store.Store) {
	counter := []byte("counter")
	mustApply(t, s, new(store.Batch).Put(counter, []byte{0, 0}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[store.Version]bool{}
	errs := make(chan error, casWorkers)
	for range casWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range casRounds {
				if err := increment(s, counter, &mu, seen); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	it := mustGet(t, s, "counter")
	if n := int(it.Value[0])<<8 | int(it.Value[1]); n != casWorkers*casRounds {
		t.Fatalf("counter %d, want %d: increments were lost or doubled", n, casWorkers*casRounds)
	}
	if len(seen) != casWorkers*casRounds {
		t.Fatalf("%d distinct versions for %d increments", len(seen), casWorkers*casRounds)
	}
}

func increment(s store.Store, counter []byte, mu *sync.Mutex, seen map[store.Version]bool) error {
	for range casAttemptsMax {
		it, err := s.Get(ctx, counter)
		if err != nil {
			return err
		}
		n := int(it.Value[0])<<8 | int(it.Value[1]) + 1
		v, err := s.Apply(ctx, new(store.Batch).AtVersion(counter, it.Version).Put(counter, []byte{byte(n >> 8), byte(n)}))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return err
		}
		mu.Lock()
		dup := seen[v]
		seen[v] = true
		mu.Unlock()
		if dup {
			return fmt.Errorf("version %d returned twice", v)
		}
		return nil
	}
	return fmt.Errorf("increment: %d attempts failed their condition", casAttemptsMax)
}
