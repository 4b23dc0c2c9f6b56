package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// TestConcurrency_CASHasOneWinnerPerVersion: 32 goroutines increment
// counters on 4 overlapping keys with compare-and-set batches (read the
// versions, Apply with AtVersion conditions, put counter+1 on each key).
// Exactly one batch wins per (key, version): each key's successes form one
// chain in which every winner observed the previous winner's version, and
// the final counter equals the number of successes. Readers running through
// the storm (Scan, Snapshot, Get) never see part of a batch or a counter
// going backwards, and a reopen shows the same final state.
func TestConcurrency_CASHasOneWinnerPerVersion(t *testing.T) {
	const (
		writers    = 32
		keys       = 4
		winsEach   = 20
		attemptMax = 20000
		readers    = 3
	)
	seed := seedFor(t)
	dir := t.TempDir()
	opts := quiet(Options{CheckpointLogBytes: 4 << 10, WAL: wal.Options{SegmentBytes: 8 << 10}})
	db := openT(t, dir, opts)
	ctx := context.Background()
	ckey := func(i int) string { return "ctr/" + strconv.Itoa(i) }

	type win struct {
		observed, version store.Version
		batch             string
	}
	var mu sync.Mutex
	wins := map[string][]win{}

	stop := make(chan struct{})
	var views atomic.Int64
	var rwg sync.WaitGroup
	for r := 0; r < readers; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			last := map[string]casValue{}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var items []store.Item
				switch n % 3 {
				case 0:
					var err error
					if items, err = db.Scan(ctx, []byte("ctr/"), store.PrefixEnd([]byte("ctr/")), 100); err != nil {
						t.Errorf("scan: %v", err)
						return
					}
				case 1:
					db.Snapshot().Ascend([]byte("ctr/"), func(it store.Item) bool { items = append(items, it); return true })
				case 2:
					for i := 0; i < keys; i++ {
						if it, err := db.Get(ctx, []byte(ckey(i))); err == nil {
							items = append(items, it)
						}
					}
				}
				if err := checkCASView(items, last, n%3 != 2); err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				views.Add(1)
				runtime.Gosched()
			}
		}()
	}

	var wwg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			won := 0
			for attempt := 0; won < winsEach; attempt++ {
				if attempt == attemptMax {
					t.Errorf("writer %d: %d wins after %d attempts", w, won, attempt)
					return
				}
				picked := rng.Perm(keys)[:1+rng.IntN(2)]
				sort.Ints(picked)
				var ks []string
				for _, i := range picked {
					ks = append(ks, ckey(i))
				}
				id := fmt.Sprintf("w%d.%d", w, attempt)
				b := new(store.Batch)
				obs := make([]store.Version, len(ks))
				for i, k := range ks {
					var cur casValue
					if it, err := db.Get(ctx, []byte(k)); err == nil {
						if cur, err = parseCAS(it); err != nil {
							t.Error(err)
							return
						}
					} else if !errors.Is(err, store.ErrNotFound) {
						t.Errorf("get: %v", err)
						return
					}
					obs[i] = cur.version
					b.AtVersion([]byte(k), cur.version)
					b.Put([]byte(k), []byte(fmt.Sprintf("%d|%s|%s", cur.count+1, id, strings.Join(ks, ","))))
				}
				v, err := db.Apply(ctx, b)
				switch {
				case errors.Is(err, store.ErrConditionFailed):
					runtime.Gosched()
					continue
				case err != nil:
					t.Errorf("writer %d: %v", w, err)
					return
				}
				won++
				mu.Lock()
				for i, k := range ks {
					wins[k] = append(wins[k], win{observed: obs[i], version: v, batch: id})
				}
				mu.Unlock()
			}
		}()
	}
	wwg.Wait()
	close(stop)
	rwg.Wait()

	final := scanAll(t, db)
	total := 0
	for i := 0; i < keys; i++ {
		k := ckey(i)
		ws := wins[k]
		total += len(ws)
		sort.Slice(ws, func(a, b int) bool { return ws[a].version < ws[b].version })
		var prev store.Version
		for j, w := range ws {
			if w.observed != prev {
				t.Errorf("%s: win %d (batch %s at %d) observed version %d, but the previous winner wrote %d", k, j, w.batch, w.version, w.observed, prev)
			}
			prev = w.version
		}
		it, ok := final[k]
		if len(ws) == 0 {
			if ok {
				t.Errorf("%s exists without a winner", k)
			}
			continue
		}
		cur, err := parseCAS(it)
		if !ok || err != nil || cur.count != len(ws) || it.Version != prev {
			t.Errorf("%s = %q@%d (%v), want counter %d at version %d", k, it.Value, it.Version, err, len(ws), prev)
		}
	}
	if err := checkCASView(mapItems(final), map[string]casValue{}, true); err != nil {
		t.Errorf("final state: %v", err)
	}
	t.Logf("%d winning batches, %d key increments, %d reader views, WAL %+v", writers*winsEach, total, views.Load(), db.Stats().WAL)
	if total < writers*winsEach {
		t.Errorf("%d key increments for %d winning batches", total, writers*winsEach)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir, opts)
	defer db.Close()
	sameState(t, "after reopen", scanAll(t, db), final)
}

type casValue struct {
	count   int
	batch   string
	keys    []string
	version store.Version
}

func parseCAS(it store.Item) (casValue, error) {
	f := strings.Split(string(it.Value), "|")
	if len(f) != 3 {
		return casValue{}, fmt.Errorf("%s: malformed value %q", it.Key, it.Value)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return casValue{}, fmt.Errorf("%s: malformed value %q", it.Key, it.Value)
	}
	return casValue{count: n, batch: f[1], keys: strings.Split(f[2], ","), version: it.Version}, nil
}

func mapItems(m map[string]store.Item) []store.Item {
	var out []store.Item
	for _, it := range m {
		out = append(out, it)
	}
	return out
}

// checkCASView checks one read of the counters: no counter or version went
// backwards since the reader's last view, and, when the view is consistent
// (one read, not several Gets), each batch's keys are all visible at its
// version or later, and a key at a batch's exact version shows that batch.
func checkCASView(items []store.Item, last map[string]casValue, consistent bool) error {
	view := map[string]casValue{}
	for _, it := range items {
		cv, err := parseCAS(it)
		if err != nil {
			return err
		}
		k := string(it.Key)
		if p, ok := last[k]; ok && (cv.version < p.version || cv.count < p.count) {
			return fmt.Errorf("%s went back from %d@%d to %d@%d", k, p.count, p.version, cv.count, cv.version)
		}
		last[k] = cv
		view[k] = cv
	}
	if !consistent {
		return nil
	}
	for k, cv := range view {
		for _, other := range cv.keys {
			if other == k {
				continue
			}
			o, ok := view[other]
			switch {
			case !ok || o.version < cv.version:
				return fmt.Errorf("partial batch %s: %s at %d, but %s at %d (present %v)", cv.batch, k, cv.version, other, o.version, ok)
			case o.version == cv.version && o.batch != cv.batch:
				return fmt.Errorf("%s and %s both at version %d from batches %s and %s", k, other, cv.version, cv.batch, o.batch)
			}
		}
	}
	return nil
}
