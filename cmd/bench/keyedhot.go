package main

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// caseKeyedHot is receipts:keyed-hot (issue 37): keyed requests that each
// insert their own documents (as keyed does) and $inc one shared document,
// the README's order-and-stock pattern. It reports aborts_per_op: the
// requests refused with transaction_conflict, which contention must never
// cause (they are counted, not failed, so that a regression shows as a
// number rather than a stopped run).
const caseKeyedHot = "keyed-hot"

// hotDocID is the document every keyed-hot request increments.
const hotDocID = "hot-counter"

var hotInc = table.Transform{ID: hotDocID, Upsert: true,
	Ops: []table.Op{{Op: "$inc", Path: "n", Value: json.RawMessage("1")}}}

// keyedHotCases runs keyed-hot at each concurrency of the keyed case.
func keyedHotCases(env *Env) ([]*Result, error) {
	var out []*Result
	for _, c := range keyedConcurrencies(env) {
		r, err := keyedHotCase(env, c)
		if err != nil {
			return out, err
		}
		out = append(out, &r)
	}
	return out, nil
}

func keyedHotCase(env *Env, concurrency int) (Result, error) {
	st, err := openStack(env, caseKeyedHot, receipt.Options{})
	if err != nil {
		return Result{}, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	var aborts atomic.Uint64
	op := func(ctx context.Context, w int, i uint64) error {
		b := wl.batch(w, i)
		b.Transforms = []table.Transform{hotInc}
		ans, err := st.svc.Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable, Key: wl.key(w, i), Batch: b})
		if err != nil {
			return err
		}
		if ans.Code == code.TransactionConflict {
			aborts.Add(1)
			return nil
		}
		return checkCommitted(ans, false)
	}
	loop := Loop{Case: caseKeyedHot, Concurrency: concurrency, Fsyncs: st.fsyncs, FsyncNanos: st.fsyncNanos}
	m, err := env.Loop(loop, op)
	if cerr := st.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	r := m.Result(caseKeyedHot, concurrency)
	if r.Ops > 0 {
		r.Set("aborts_per_op", round(float64(aborts.Load())/float64(r.Ops), 4))
	}
	return r, nil
}
