package main

import (
	"fmt"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
)

// targetBytesPerTombstone is issue 19's aim for the RAM a tombstone costs.
const targetBytesPerTombstone = 80

// reopenTombstones is the cost of what an expired receipt leaves: it
// writes -receipts terminal receipts as reopenReceipts does, lets the
// receipt service's own cleaner turn them into tombstones (on a clock past
// their retention: the same writes, chunks included, as in production),
// checkpoints, and measures the heap and disk per tombstone after a reopen.
func reopenTombstones(env *Env) error {
	n := env.Opts.Receipts
	name := reopenCaseName(n)[:len(reopenCaseName(n))-len("receipts")] + "tombstones"
	dir, cleanup, err := env.DataDir("reopen-tombstones")
	if err != nil {
		return err
	}
	defer cleanup()
	tmpl, err := newReceiptTemplate()
	if err != nil {
		return err
	}
	ro, err := reopenRun(env, dir, name, receipt.ColdValue,
		func(db *engine.DB) error {
			if err := putReceipts(env, db, tmpl, n, name); err != nil {
				return err
			}
			return cleanAll(env, db, tmpl.now.Add(25*time.Hour), n, name)
		},
		func(db *engine.DB, svc *receipt.Service) error {
			return checkEnds(env, svc, tmpl, n, "tombstone", func(v receipt.View) bool { return v.State == receipt.Expired })
		})
	if err != nil {
		return err
	}
	per := ro.heap / float64(n)
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: ro.open, OpsPerSec: float64(n) / ro.open, NoFloorRatio: true}
	r.Set("bytes_per_tombstone", round(per, 1))
	r.Set("checkpoint_bytes_per_tombstone", round(float64(checkpointBytes(dir))/float64(n), 1))
	r.Set("open_seconds", round(ro.open, 4))
	r.Set("build_seconds", round(ro.build, 2))
	r.Set("keys", ro.stats.Keys)
	r.Set("day_at_1k_per_s_gib", round(per*86_400_000/(1<<30), 2))
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("RAM per tombstone <= %d B (aim)", targetBytesPerTombstone),
		Got:   fmt.Sprintf("%.0f B (%.2fx the aim)", per, per/targetBytesPerTombstone),
		Met:   per <= targetBytesPerTombstone,
		Score: atMost(per, targetBytesPerTombstone),
	})
	env.Report(r)
	return nil
}

// cleanAll runs the retention cleaner at now until it deletes nothing more.
func cleanAll(env *Env, db *engine.DB, now time.Time, n int, name string) error {
	svc, err := receipt.Open(env.Ctx, db, receipt.Options{Logger: discardLogger, Clock: lease.NewSim(now),
		MaintainInterval: -1, CleanInterval: -1})
	if err != nil {
		return err
	}
	defer svc.Close()
	for done := 0; done < n; {
		c, err := svc.CleanOnce(env.Ctx)
		if err != nil {
			return err
		}
		if c == 0 {
			return fmt.Errorf("the cleaner stopped at %d of %d receipts", done, n)
		}
		done += c
		env.Progress("%s/%s cleaning: %d of %d", env.Suite(), name, done, n)
	}
	return nil
}
