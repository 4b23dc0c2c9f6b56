package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

// receipts:keyed-floor (issue 18): the engine's cost of a keyed request's
// durable effect. Keyed requests are run once on a store that records, per
// request, every write it makes — the receipt, its lease, recovery and
// retention entries, the documents, the decision, the terminal envelope
// (and, on a path that stages them, the coordinator record and the
// intents with their resolution) — and the
// floor then applies each request's writes, pre-built, as one Apply on a
// fresh store: the same log bytes and tree writes, with no parsing,
// encoding, lookup, receipt logic or 2PC bookkeeping. keyed over this
// floor is what the rest of Idem costs.
const (
	caseKeyedFloor = "keyed-floor"
	// keyedFloorRequestsMax bounds the requests recorded for the floor;
	// a floor run longer than they last applies them again from the first
	// (rewriting keys that exist by then, as a busy store does).
	keyedFloorRequestsMax = 200_000
	// keyedFloorRecordWorkers is the concurrency of the recording run.
	keyedFloorRecordWorkers = 64
)

// recordKey carries a request's recorder in its context.
type recordKey struct{}

// recorded is one request's writes, in order, copied.
type recorded struct {
	mu  sync.Mutex
	ops []store.Op
}

func (r *recorded) add(b *store.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range b.Ops {
		r.ops = append(r.ops, store.Op{Key: append([]byte(nil), op.Key...), Value: append([]byte(nil), op.Value...), Delete: op.Delete})
	}
}

// recordingStore is engine.DB with every write of a recorded request kept:
// a Chainer still (ApplyChain is overridden, not hidden), so the keyed path
// recorded is the one measured.
type recordingStore struct{ *engine.DB }

// Capabilities implements store.Store: the engine's, with chains recorded.
func (s recordingStore) Capabilities() store.Capabilities {
	return store.Capabilities{Chain: s, HotScan: s.DB, Latest: s.DB}
}

func (s recordingStore) Apply(ctx context.Context, b *store.Batch) (store.Version, error) {
	v, err := s.DB.Apply(ctx, b)
	if r, ok := ctx.Value(recordKey{}).(*recorded); ok && err == nil {
		r.add(b)
	}
	return v, err
}

func (s recordingStore) ApplyChain(ctx context.Context, links ...*store.Batch) ([]store.Version, error) {
	vs, err := s.DB.ApplyChain(ctx, links...)
	if r, ok := ctx.Value(recordKey{}).(*recorded); ok && err == nil {
		for _, b := range links {
			r.add(b)
		}
	}
	return vs, err
}

// recordKeyed runs n keyed requests on a recording store and returns each
// one's writes as one batch, and the store's writes before the first
// request (its table), which the floor's store starts from.
func recordKeyed(env *Env, n int) (reqs []*store.Batch, setup []*store.Batch, err error) {
	dir, cleanup, err := env.DataDir(caseKeyedFloor + "-record")
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger})
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	var start recorded
	sctx := context.WithValue(env.Ctx, recordKey{}, &start)
	svc, err := receipt.Open(sctx, recordingStore{db}, receipt.Options{Logger: discardLogger, MaintainInterval: -1, CleanInterval: -1})
	if err != nil {
		return nil, nil, err
	}
	defer svc.Close()
	if _, _, err := svc.Tables().Create(sctx, benchPrincipal, benchTable, benchShards); err != nil {
		return nil, nil, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	out := make([]*store.Batch, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, keyedFloorRecordWorkers)
	for w := range keyedFloorRecordWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || env.Ctx.Err() != nil {
					return
				}
				var r recorded
				ctx := context.WithValue(env.Ctx, recordKey{}, &r)
				ans, err := svc.Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable,
					Key: wl.key(w, uint64(i)), Batch: wl.batch(w, uint64(i))})
				if err == nil {
					err = checkCommitted(ans, false)
				}
				if err != nil {
					errs <- err
					return
				}
				out[i] = &store.Batch{Ops: r.ops}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, fmt.Errorf("%s: recording: %w", caseKeyedFloor, err)
	}
	return out, []*store.Batch{{Ops: start.ops}}, nil
}

// keyedFloorCase applies the recorded requests' writes, one Apply each, on
// a fresh store at each concurrency.
func keyedFloorCase(env *Env, concs []int) ([]*Result, error) {
	n := min(keyedFloorRequestsMax, max(1000, int(env.Opts.Duration.Seconds()*20_000)))
	reqs, setup, err := recordKeyed(env, n)
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, c := range concs {
		dir, cleanup, err := env.DataDir(caseKeyedFloor)
		if err != nil {
			return out, err
		}
		db, err := engine.Open(dir, engine.Options{Logger: discardLogger})
		if err != nil {
			cleanup()
			return out, err
		}
		for _, b := range setup {
			if _, err := db.Apply(env.Ctx, b); err != nil {
				db.Close()
				cleanup()
				return out, err
			}
		}
		var next atomic.Uint64
		m, err := env.Loop(Loop{Case: caseKeyedFloor, Concurrency: c, Fsyncs: func() uint64 { return db.Stats().WAL.Fsyncs },
			FsyncNanos: func() int64 { return db.Stats().WAL.FsyncDuration.Sum }},
			func(ctx context.Context, _ int, _ uint64) error {
				_, err := db.Apply(ctx, reqs[(next.Add(1)-1)%uint64(len(reqs))])
				return err
			})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		cleanup()
		if err != nil {
			return out, err
		}
		r := m.Result(caseKeyedFloor, c)
		r.Set("recorded_requests", len(reqs))
		r.Set("ops_per_request", round(float64(len(reqs[0].Ops)), 1))
		out = append(out, &r)
	}
	return out, nil
}

// Issue 18's aim for the floor: library keyed@64 at least half of it.
const targetKeyedOverFloor = 0.5

// keyedFloorRatios sets keyed/keyed-floor at each concurrency and the aim
// at 64.
func keyedFloorRatios(results []*Result) {
	keyedOver(results, caseKeyedFloor, "keyed_over_floor_rate", targetKeyedOverFloor)
}

// Issue 18's aim against Idem's own key-less path: library keyed@64 at
// least three quarters of fast@64, the same batches with no receipt.
const targetKeyedOverFast = 0.75

// keyedFastRatios sets keyed/fast at each concurrency and the aim at 64.
func keyedFastRatios(results []*Result) {
	keyedOver(results, "fast", "keyed_over_fast_rate", targetKeyedOverFast)
}

// keyedOver sets keyed's rate over the case other's, as field, at each
// concurrency both ran, and judges the one at 64 by aim.
func keyedOver(results []*Result, other, field string, aim float64) {
	idx := indexResults(results)
	for _, r := range results {
		if r.Case != "keyed" {
			continue
		}
		o := idx.get(other, r.Concurrency)
		if o == nil || o.OpsPerSec <= 0 {
			continue
		}
		ratio := r.OpsPerSec / o.OpsPerSec
		r.Set(field, round(ratio, 3))
		if r.Concurrency == 64 {
			r.Targets = append(r.Targets, Target{
				Want:  fmt.Sprintf("keyed@64 >= %.2f x %s@64 (issue 18)", aim, other),
				Got:   fmt.Sprintf("%.3f x (%.0f / %.0f req/s)", ratio, r.OpsPerSec, o.OpsPerSec),
				Met:   ratio >= aim,
				Score: atLeast(ratio, aim),
			})
		}
	}
}
