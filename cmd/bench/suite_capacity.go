package main

import (
	"context"
	"fmt"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

func init() {
	register(Suite{
		Name:     "capacity",
		Rank:     65,
		Optional: true,
		Doc: "opt-in, minutes: fills one store with -capacity retained terminal receipts (as reopen does, 300-byte envelopes) in " +
			"capacityStages steps, each checkpointed (terminal envelopes go to the value log, as idemd's do), measuring keyed@64 " +
			"and the heap after each; then reopens it: RAM and disk per receipt, reopen time, the keyed curve",
		Run: runCapacity,
	})
}

// Targets of issue 20.
const (
	targetCapacityBytesPerReceipt = 100 // RAM per retained receipt
	targetCapacityReopenPer10M    = 3.0 // seconds
	// capacityStages is how many equal steps the fill takes; keyed
	// throughput is measured before the first and after each.
	capacityStages = 4
	// capacityKeyedConc is the keyed measurement's concurrency.
	capacityKeyedConc = 64
	// capacityDocBatches bounds the batches of documents the keyed
	// measurements cycle through, per worker.
	capacityDocBatches = 16
	// receiptsPerDay is a day of keyed requests at 1 k/s: what the RAM
	// per receipt is projected to.
	receiptsPerDay = 86_400_000
)

func runCapacity(env *Env) error {
	n := env.Opts.Capacity
	name := fmt.Sprintf("capacity-%s-receipts", countLabel(n))
	st, err := openStack(env, "capacity", receipt.Options{})
	if err != nil {
		return err
	}
	defer st.cleanup()
	tmpl, err := newReceiptTemplate()
	if err != nil {
		st.close()
		return err
	}
	// Completed within the last 12 hours, retained a day: none expires
	// while the suite runs, so the cleaner leaves them all.
	tmpl.spread = 12 * time.Hour
	fill, err := fillCapacity(env, st, tmpl, name, n)
	if err != nil {
		st.close()
		return err
	}
	// What the last measurement wrote goes to the value log too: the
	// reopen loads retained receipts, not a log tail.
	if err := st.db.Checkpoint(); err != nil {
		st.close()
		return err
	}
	vs := st.db.Stats().ValueLog
	st.svc.Close()
	if err := st.db.Close(); err != nil {
		return err
	}
	re, err := reopenCapacity(env, st.dir, tmpl, n, name)
	if err != nil {
		return err
	}
	env.Report(capacityResult(name, n, fill, re, vs, dirBytes(st.dir)))
	return nil
}

// capacityFill is what the staged fill measured: keyed@64 before the
// first stage and after each, the heap over the empty store's at the
// same points, and the time the fill itself took.
type capacityFill struct {
	curve, heaps []float64
	seconds      float64
}

// fillCapacity fills the store with n receipts in capacityStages steps,
// each folded and checkpointed as a running idemd's cleaner and
// checkpointer would, measuring keyed throughput and the heap around them.
func fillCapacity(env *Env, st *stack, tmpl *receiptTemplate, name string, n int) (capacityFill, error) {
	var fill capacityFill
	wl := newWorkload(env.Opts.BatchDocs)
	base := liveHeap()
	for stage := 0; ; stage++ {
		rate, err := capacityKeyed(env, st, wl, name, stage)
		if err != nil {
			return fill, err
		}
		fill.curve = append(fill.curve, round(rate, 0))
		fill.heaps = append(fill.heaps, round(float64(liveHeap())-float64(base), 0))
		if stage == capacityStages {
			return fill, nil
		}
		lo, hi := n*stage/capacityStages, n*(stage+1)/capacityStages
		start := time.Now()
		if err := putReceiptRange(env, st.db, tmpl, lo, hi, name); err != nil {
			return fill, err
		}
		if err := foldExpiry(env, st.svc, name); err != nil {
			return fill, err
		}
		env.Progress("%s/%s checkpoint after %d receipts", env.Suite(), name, hi)
		err = st.db.Checkpoint()
		env.ProgressDone()
		if err != nil {
			return fill, err
		}
		fill.seconds += time.Since(start).Seconds()
	}
}

// capacityKeyed measures keyed@64 on the store as it stands: new keys,
// but documents from a fixed set, so the heap measures the receipts, not
// documents piling up.
func capacityKeyed(env *Env, st *stack, wl *workload, name string, stage int) (float64, error) {
	tag := fmt.Sprintf("cap%d", stage)
	m, err := env.Loop(Loop{Case: name + "/keyed-" + tag, Concurrency: capacityKeyedConc, Fsyncs: st.fsyncs},
		func(ctx context.Context, w int, i uint64) error {
			ans, err := st.svc.Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable,
				Key: tag + wl.key(w, i), Batch: wl.batch(w, i%capacityDocBatches)})
			if err != nil {
				return err
			}
			return checkCommitted(ans, false)
		})
	if err != nil {
		return 0, err
	}
	return m.Result("keyed", capacityKeyedConc).OpsPerSec, nil
}

// capacityReopen is what reopening the filled store cost.
type capacityReopen struct {
	seconds float64
	heap    float64 // live heap after the open over before it
	stats   engine.Stats
}

// reopenCapacity opens the filled store as idemd would, but reading its
// checkpoint files rather than mapping them (idemd's -map-checkpoints):
// the RAM it reports is the heap's, and a mapped image is not on the
// heap. It checks that the first and last receipts replay from the value
// log.
func reopenCapacity(env *Env, dir string, tmpl *receiptTemplate, n int, name string) (capacityReopen, error) {
	env.Progress("%s/%s reopening", env.Suite(), name)
	before := liveHeap()
	start := time.Now()
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger, ColdValue: receipt.ColdValue, CollectorOffAtOpen: true})
	if err != nil {
		env.ProgressDone()
		return capacityReopen{}, fmt.Errorf("reopen: %w", err)
	}
	svc, err := receipt.Open(env.Ctx, db, receipt.Options{Logger: discardLogger})
	re := capacityReopen{seconds: time.Since(start).Seconds()}
	env.ProgressDone()
	if err != nil {
		db.Close()
		return re, fmt.Errorf("reopen: receipt.Open: %w", err)
	}
	re.heap = float64(liveHeap()) - float64(before)
	re.stats = db.Stats()
	err = checkEnds(env, svc, tmpl, n, "receipt after reopen", replays)
	svc.Close()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return re, err
}

// capacityResult is the suite's one row and its two issue-20 targets.
func capacityResult(name string, n int, fill capacityFill, re capacityReopen, vs engine.ValueLogStats, disk int64) Result {
	// The store holds the fill and what the keyed measurements added.
	retained := float64(re.stats.Keys) // keys, not receipts: an upper bound on receipts
	perReceipt := re.heap / float64(n)
	reopen := re.seconds
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: reopen, OpsPerSec: float64(n) / reopen, NoFloorRatio: true}
	r.Set("bytes_per_receipt", round(perReceipt, 1))
	r.Set("disk_bytes_per_receipt", round(float64(disk)/float64(n), 1))
	r.Set("reopen_seconds", round(reopen, 3))
	r.Set("reopen_replayed_entries", re.stats.Recovery.ReplayedEntries)
	r.Set("fill_seconds", round(fill.seconds, 1))
	r.Set("keys", retained)
	r.Set("projected_ram_day_1k_gib", round(perReceipt*receiptsPerDay/(1<<30), 2))
	r.Set("keyed_curve", fill.curve)
	r.Set("heap_curve", fill.heaps)
	r.Set("vlog_bytes", vs.Bytes)
	r.Set("vlog_live_bytes", vs.Live)
	r.Set("vlog_segments", vs.Segments)
	limit := targetCapacityReopenPer10M * float64(n) / 10e6
	r.Targets = append(r.Targets,
		Target{
			Want:  fmt.Sprintf("RAM per retained receipt <= %d B", targetCapacityBytesPerReceipt),
			Got:   fmt.Sprintf("%.1f B (a day at 1 k/s: %.1f GiB)", perReceipt, perReceipt*receiptsPerDay/(1<<30)),
			Met:   perReceipt <= targetCapacityBytesPerReceipt,
			Score: atMost(perReceipt, targetCapacityBytesPerReceipt),
		},
		Target{
			Want:  fmt.Sprintf("reopen %d receipts <= %.1fs (%.0fs per 10M)", n, limit, targetCapacityReopenPer10M),
			Got:   fmt.Sprintf("%.2fs", reopen),
			Met:   reopen <= limit,
			Score: atMost(reopen, limit),
		})
	return r
}

// putReceiptRange writes receipts [lo, hi) as putReceipts does.
func putReceiptRange(env *Env, db *engine.DB, t *receiptTemplate, lo, hi int, name string) error {
	fill := func(b *store.Batch, from, to int) error {
		for i := from; i < to; i++ {
			id, rec := t.record(i)
			val, err := receipt.EncodeRecord(rec)
			if err != nil {
				return err
			}
			b.Put(store.NSReceipt.Key(id), val).
				Put(store.NSExpiry.Key(fmt.Sprintf("%020d", rec.RetainUntil), id), nil)
		}
		return nil
	}
	return applyInBatches(env, db, lo, hi, func() batchFiller { return fill }, func(done int) {
		env.Progress("%s/%s filling: %d of %d", env.Suite(), name, done, hi-lo)
	})
}

// foldExpiry runs cleaner passes until one folds nothing: what a cleaner
// that keeps up leaves of a fill's expiry entries (receipt/expfold.go;
// a tick folds up to 64 × 4 096 entries a minute, far above 1 k req/s).
func foldExpiry(env *Env, svc *receipt.Service, name string) error {
	began := svc.Stats().Folded
	for {
		before := svc.Stats().Folded
		if _, err := svc.CleanOnce(env.Ctx); err != nil {
			return fmt.Errorf("fold: %w", err)
		}
		if svc.Stats().Folded == before {
			env.ProgressDone()
			return nil
		}
		env.Progress("%s/%s folding expiry entries: %d", env.Suite(), name, svc.Stats().Folded-began)
	}
}

// countLabel is 20M, 500k or 1234.
func countLabel(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
