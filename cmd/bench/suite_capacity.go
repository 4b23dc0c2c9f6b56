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
	wl := newWorkload(env.Opts.BatchDocs)
	keyed := func(stage int) (float64, error) {
		tag := fmt.Sprintf("cap%d", stage)
		m, err := env.Loop(Loop{Case: name + "/keyed-" + tag, Concurrency: capacityKeyedConc, Fsyncs: st.fsyncs},
			func(ctx context.Context, w int, i uint64) error {
				// New keys, but documents from a fixed set: the heap then
				// measures the receipts, not documents piling up.
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
	base := liveHeap()
	var curve []float64
	var heaps []float64
	fillSeconds := 0.0
	for stage := 0; ; stage++ {
		rate, err := keyed(stage)
		if err != nil {
			st.close()
			return err
		}
		curve = append(curve, round(rate, 0))
		heaps = append(heaps, round(float64(liveHeap())-float64(base), 0))
		if stage == capacityStages {
			break
		}
		lo, hi := n*stage/capacityStages, n*(stage+1)/capacityStages
		start := time.Now()
		err = putReceiptRange(env, st.db, tmpl, lo, hi, name)
		if err == nil {
			err = foldExpiry(env, st.svc, name)
		}
		if err == nil {
			env.Progress("%s/%s checkpoint after %d receipts", env.Suite(), name, hi)
			err = st.db.Checkpoint()
			env.ProgressDone()
		} else {
			st.close()
			return err
		}
		fillSeconds += time.Since(start).Seconds()
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

	env.Progress("%s/%s reopening", env.Suite(), name)
	before := liveHeap()
	start := time.Now()
	db, err := engine.Open(st.dir, engine.Options{Logger: discardLogger, ColdValue: receipt.ColdValue})
	if err != nil {
		env.ProgressDone()
		return fmt.Errorf("reopen: %w", err)
	}
	svc, err := receipt.Open(env.Ctx, db, receipt.Options{Logger: discardLogger})
	reopen := time.Since(start).Seconds()
	env.ProgressDone()
	if err != nil {
		db.Close()
		return fmt.Errorf("reopen: receipt.Open: %w", err)
	}
	heap := float64(liveHeap()) - float64(before)
	stats := db.Stats()
	// The first and the last receipt replay from the value log.
	if err := checkEnds(env, svc, tmpl, n, "receipt after reopen", replays); err != nil {
		svc.Close()
		db.Close()
		return err
	}
	svc.Close()
	if err := db.Close(); err != nil {
		return err
	}

	// The store holds the fill and what the keyed measurements added.
	retained := float64(stats.Keys) // keys, not receipts: an upper bound on receipts
	perReceipt := heap / float64(n)
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: reopen, OpsPerSec: float64(n) / reopen, NoFloorRatio: true}
	r.Set("bytes_per_receipt", round(perReceipt, 1))
	r.Set("disk_bytes_per_receipt", round(float64(dirBytes(st.dir))/float64(n), 1))
	r.Set("reopen_seconds", round(reopen, 3))
	r.Set("reopen_replayed_entries", stats.Recovery.ReplayedEntries)
	r.Set("fill_seconds", round(fillSeconds, 1))
	r.Set("keys", retained)
	r.Set("projected_ram_day_1k_gib", round(perReceipt*receiptsPerDay/(1<<30), 2))
	r.Set("keyed_curve", curve)
	r.Set("heap_curve", heaps)
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
	env.Report(r)
	return nil
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
