package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
)

// recovery:restart-growing (issue 38): a store filled through the receipt
// layer as idemd fills it — keyed batches, the engine's own background
// checkpoints, deltas and merges, no explicit checkpoint call — then
// closed as it stands and opened again. Unlike the reopen cases, which
// open a fresh checkpoint, the open here meets what a real process
// leaves: a chain of base and deltas and up to two intervals of log.

const (
	// growingBatchDocs: one document per keyed batch, the receipt being
	// what the store accumulates.
	growingBatchDocs = 1
	// Aims of issue 38: at most 1 s to open at 1 M receipts and 4 s at
	// 10 M, with the value log on; linear between. Below 1 M the bound
	// stays 1 s: an open replays up to two checkpoint intervals of log
	// whatever the store holds, so a small store is no quicker to bound.
	targetRestartGrowing1M  = 1.0
	targetRestartGrowing10M = 4.0
)

// restartGrowingLimit is the aim in seconds for n receipts.
func restartGrowingLimit(n int) float64 {
	if n <= 1_000_000 {
		return targetRestartGrowing1M
	}
	return targetRestartGrowing1M + (targetRestartGrowing10M-targetRestartGrowing1M)*float64(n-1_000_000)/9e6
}

// restartGrowing fills -receipts receipts, closes without a checkpoint and
// times engine.Open + receipt.Open, as idemd's restart does.
func restartGrowing(env *Env) error {
	n := env.Opts.Receipts
	name := "restart-growing-" + reopenCaseName(n)[len("reopen-"):]
	st, err := openStack(env, "restart-growing", receipt.Options{})
	if err != nil {
		return err
	}
	defer st.cleanup()
	fillStart := time.Now()
	wl := newWorkload(growingBatchDocs)
	err = precreate(env.Ctx, n, func(ctx context.Context, i uint64) error {
		if i%100_000 == 0 {
			env.Progress("%s/%s filling: %d of %d", env.Suite(), name, i, n)
		}
		ans, err := st.svc.Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable, Key: wl.key(0, i), Batch: wl.batch(0, i)})
		if err != nil {
			return err
		}
		return checkCommitted(ans, false)
	})
	env.ProgressDone()
	fill := time.Since(fillStart).Seconds()
	built := st.db.Stats()
	st.svc.Close()
	if cerr := st.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: fill: %w", name, err)
	}
	walBytes := dirBytes(filepath.Join(st.dir, "wal"))
	ro, err := timeRestart(env, st.dir, name, wl.key(0, 0), wl.key(0, uint64(n-1)))
	if err != nil {
		return err
	}
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: ro.open, OpsPerSec: float64(n) / ro.open, NoFloorRatio: true}
	r.Set("open_seconds", round(ro.open, 4))
	r.Set("engine_open_seconds", round(ro.engineOpen, 4))
	r.Set("fill_seconds", round(fill, 1))
	r.Set("fill_per_sec", round(float64(n)/fill, 0))
	r.Set("checkpoints", built.Checkpoints.Completed)
	r.Set("deltas", built.Checkpoints.Deltas)
	r.Set("merges", built.Checkpoints.Merges)
	r.Set("log_bytes_at_restart", walBytes)
	r.Set("replayed_bytes", ro.stats.Recovery.ReplayedBytes)
	r.Set("checkpoint_bytes", checkpointBytes(st.dir))
	r.Set("disk_bytes", dirBytes(st.dir))
	limit := restartGrowingLimit(n)
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("open %d receipts left by a running store <= %.2fs (1s up to 1M, 4s at 10M)", n, limit),
		Got:   fmt.Sprintf("%.3fs (%.2fx the bound)", ro.open, ro.open/limit),
		Met:   ro.open <= limit,
		Score: atMost(ro.open, limit),
	})
	env.Report(r)
	return nil
}

// timeRestart opens dir as idemd's restart does — its checkpoint files
// mapped (-map-checkpoints, on by default) — and checks that the first and
// last keys replay their committed answers.
func timeRestart(env *Env, dir, name, firstKey, lastKey string) (reopened, error) {
	var ro reopened
	env.Progress("%s/%s reopening", env.Suite(), name)
	defer env.ProgressDone()
	start := time.Now()
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger, ColdValue: receipt.ColdValue, CollectorOffAtOpen: true, MapCheckpoints: true})
	if err != nil {
		return ro, fmt.Errorf("%s: reopen: %w", name, err)
	}
	ro.engineOpen = time.Since(start).Seconds()
	svc, err := receipt.Open(env.Ctx, db, receipt.Options{Logger: discardLogger})
	ro.open = time.Since(start).Seconds()
	if err == nil {
		for _, key := range []string{firstKey, lastKey} {
			v, lerr := svc.Lookup(env.Ctx, benchPrincipal, benchTable, key)
			if lerr == nil && !replays(v) {
				lerr = fmt.Errorf("key %s: state %v", key, v.State)
			}
			if lerr != nil && err == nil {
				err = lerr
			}
		}
		svc.Close()
	}
	ro.stats = db.Stats()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ro, fmt.Errorf("%s: %w", name, err)
	}
	return ro, nil
}
