package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

func init() {
	register(Suite{
		Name: "twopc",
		Rank: 30,
		Doc:  "tables: a batch through table.ApplyFast (fast), through 2PC over 4 shards with prepares and decision chained in one wait (twopc) and as two writes, Begin then Decide (twopc-2w); no receipt",
		Run:  runTwoPC,
	})
}

// Targets of issue 3 (docs/design.md §12).
const (
	targetFastBatches   = 20_000 // fast@64, batches/s
	targetTwoPCWaitsP50 = 2.0    // twopc p50@1 in fsync-serial p50s
)

func runTwoPC(env *Env) error {
	var results []*Result
	for _, name := range []string{"fast", "twopc", "twopc-2w"} {
		for _, c := range env.Opts.Concurrency {
			r, err := twopcCase(env, name, c)
			if err != nil {
				env.reportAll(results)
				return err
			}
			results = append(results, &r)
		}
	}
	idx := indexResults(results)
	for _, r := range results {
		r.Set("fsync_waits_p50", round(env.fsyncWaits(r.P50us), 2))
		r.Set("docs_per_batch", env.Opts.BatchDocs)
	}
	if r := idx.get("fast", 64); r != nil {
		rateTarget(r, "fast@64 batches", targetFastBatches)
	}
	if r := idx.get("twopc", 1); r != nil && env.Floors() != nil {
		w := env.fsyncWaits(r.P50us)
		r.Targets = append(r.Targets, Target{
			Want:  fmt.Sprintf("twopc p50@1 <= %.0f sequential fsync waits (x %s p50)", targetTwoPCWaitsP50, floorSerial),
			Got:   fmt.Sprintf("%.2f waits (%.0f / %.0f µs)", w, r.P50us, env.Floors().Serial.P50us),
			Met:   w <= targetTwoPCWaitsP50,
			Score: atMost(w, targetTwoPCWaitsP50),
		})
	}
	env.reportAll(results)
	return nil
}

// twopcCase measures one batch shape on a fresh 4-shard table: through the
// fast path (one atomic Apply) or through retained 2PC — BeginCommit's
// chain (record + four prepares, then decision + resolution, one wait), or
// the same two writes as Begin then DecideOrLearn, each waited for.
// Decisions are not released: that happens off the response path.
func twopcCase(env *Env, name string, concurrency int) (Result, error) {
	dir, cleanup, err := env.DataDir(name)
	if err != nil {
		return Result{}, err
	}
	defer cleanup()
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger})
	if err != nil {
		return Result{}, err
	}
	tables, coord := table.NewWithCoordinator(db, twopc.Options{})
	if _, _, err := tables.Create(env.Ctx, benchPrincipal, benchTable, benchShards); err != nil {
		db.Close()
		return Result{}, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	op := func(ctx context.Context, w int, i uint64) error {
		plan, err := tables.Preflight(ctx, benchPrincipal, benchTable, wl.batch(w, i))
		if err != nil {
			return err
		}
		_, err = tables.ApplyFast(ctx, plan)
		return err
	}
	if name == "twopc" || name == "twopc-2w" {
		op = func(ctx context.Context, w int, i uint64) error {
			plan, err := tables.Preflight(ctx, benchPrincipal, benchTable, wl.batch(w, i))
			if err != nil {
				return err
			}
			parts := make([]twopc.Participant, len(plan.Shards))
			for k, s := range plan.Shards {
				parts[k] = s
			}
			result := func() ([]byte, error) { return json.Marshal(plan.Result()) }
			id := wl.key(w, i)
			if name == "twopc" {
				_, ok, err := coord.BeginCommit(ctx, twopc.Txn{ID: id, Participants: parts, Result: result}, nil, nil)
				if err == nil && !ok {
					err = fmt.Errorf("begin-commit %s: not chained", id)
				}
				return err
			}
			res, err := coord.Begin(ctx, twopc.Txn{ID: id, Participants: parts, Result: result}, nil)
			if err != nil {
				return err
			}
			if !res.Prepared {
				return fmt.Errorf("begin %s: not prepared (refused %v, decided %v)", id, res.Refused, res.Decided)
			}
			body, _ := result()
			_, ours, err := coord.DecideOrLearn(ctx, id, parts, twopc.Committed{Result: body}, nil)
			if err == nil && !ours {
				err = fmt.Errorf("decide %s: another writer decided first", id)
			}
			return err
		}
	}
	m, err := env.Loop(Loop{Case: name, Concurrency: concurrency, Fsyncs: func() uint64 { return db.Stats().WAL.Fsyncs }}, op)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	return m.Result(name, concurrency), nil
}
