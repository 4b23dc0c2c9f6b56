package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// reopenDocs is the RAM per stored document, next to RAM per receipt: it
// inserts -receipts documents of docBytes bytes through the table layer
// (key-less batches of -batch-docs), checkpoints, closes, and measures the
// heap that engine.Open + receipt.Open of the store cost, per document.
func reopenDocs(env *Env) error {
	n := env.Opts.Receipts
	per := max(env.Opts.BatchDocs, 1)
	batches := max(n/per, 1)
	n = batches * per
	name := reopenDocsCaseName(n)
	dir, cleanup, err := env.DataDir("reopen-docs")
	if err != nil {
		return err
	}
	defer cleanup()

	ro, err := reopenRun(env, dir, name, receipt.ColdValue,
		func(db *engine.DB) error { return insertDocs(env, db, name, batches, per) },
		func(db *engine.DB, _ *receipt.Service) error {
			if keys := db.Stats().Keys; keys < n {
				return fmt.Errorf("%d keys for %d documents", keys, n)
			}
			return nil
		})
	if err != nil {
		return err
	}
	openSeconds := ro.open
	r := Result{Case: name, Concurrency: 1, Ops: uint64(n), Seconds: openSeconds, OpsPerSec: float64(n) / openSeconds, NoFloorRatio: true}
	r.Set("bytes_per_doc", round(ro.heap/float64(n), 1))
	r.Set("doc_json_bytes", docBytes)
	r.Set("open_seconds", round(openSeconds, 4))
	r.Set("build_seconds", round(ro.build, 2))
	r.Set("keys", ro.stats.Keys)
	r.Set("disk_bytes", dirBytes(dir))
	env.Report(r)
	return nil
}

func reopenDocsCaseName(n int) string {
	return reopenCaseName(n)[:len(reopenCaseName(n))-len("receipts")] + "docs"
}

// insertDocs writes batches key-less batches of per new documents.
func insertDocs(env *Env, db *engine.DB, name string, batches, per int) error {
	svc, err := receipt.Open(env.Ctx, db, receipt.Options{Logger: discardLogger, MaintainInterval: -1, CleanInterval: -1})
	if err != nil {
		return err
	}
	defer svc.Close()
	if _, _, err := svc.Tables().Create(env.Ctx, benchPrincipal, benchTable, benchShards); err != nil {
		return err
	}
	wl := newWorkload(per)
	env.Progress("%s/%s inserting %s documents", env.Suite(), name, strconv.Itoa(batches*per))
	return precreate(env.Ctx, batches, func(ctx context.Context, i uint64) error {
		var b *table.Batch = wl.batch(0, i)
		_, err := svc.ExecuteFast(ctx, benchPrincipal, benchTable, b)
		return err
	})
}
