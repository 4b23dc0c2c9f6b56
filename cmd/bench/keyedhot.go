package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	setAborts(&r, aborts.Load())
	return r, nil
}

// caseHTTPKeyedHot is http:keyed-hot: keyed-hot's requests as JSON bodies
// through the api on loopback (issue 37 wants aborts_per_op 0 at 32).
const caseHTTPKeyedHot = caseKeyedHot

// hotTransforms is hotInc as the batch route's JSON, closing the body.
const hotTransforms = `,"transforms":[{"id":"` + hotDocID + `","ops":[{"op":"$inc","path":"n","value":1}],"upsert":true}]}`

// appendHotBody is call i of worker w's inserts and the shared $inc.
func (wl *workload) appendHotBody(dst []byte, w int, i uint64) []byte {
	dst = wl.appendBody(dst, w, i)
	return append(dst[:len(dst)-1], hotTransforms...)
}

// httpKeyedHotCases runs http:keyed-hot at each concurrency, each on a
// fresh server.
func httpKeyedHotCases(env *Env, concs []int) ([]*Result, error) {
	var out []*Result
	for _, c := range concs {
		st, srv, err := openHTTP(env, caseHTTPKeyedHot, c)
		if err != nil {
			return out, err
		}
		r, err := httpKeyedHotCase(env, srv, c)
		if cerr := srv.close(st); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		out = append(out, &r)
	}
	return out, nil
}

// httpKeyedHotCase counts 409 transaction_conflict answers as aborts and
// fails on any other answer but a fresh 201.
func httpKeyedHotCase(env *Env, srv *httpServer, concurrency int) (Result, error) {
	wl := newWorkload(env.Opts.BatchDocs)
	bufs := make([][]byte, concurrency)
	var aborts atomic.Uint64
	loop := Loop{Case: caseHTTPKeyedHot, Concurrency: concurrency, Fsyncs: srv.fsyncs, FsyncNanos: srv.fsyncNanos}
	m, err := env.Loop(loop, func(ctx context.Context, w int, i uint64) error {
		bufs[w] = wl.appendHotBody(bufs[w][:0], w, i)
		a := loadAnswers.Get().(*loadAnswer)
		defer loadAnswers.Put(a)
		key := wl.key(w, i)
		if err := srv.client.do(ctx, http.MethodPost, srv.url, bufs[w], key, a); err != nil {
			return err
		}
		switch {
		case a.status == http.StatusConflict && bytes.Contains(a.body, []byte(`"code":"`+string(code.TransactionConflict)+`"`)):
			aborts.Add(1)
			return nil
		case a.status != http.StatusCreated || a.replayed:
			return fmt.Errorf("POST (key %q): status %d replayed=%v, want a fresh 201: %.4096s", key, a.status, a.replayed, a.body)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(caseHTTPKeyedHot, concurrency)
	setAborts(&r, aborts.Load())
	return r, nil
}

// setAborts sets aborts_per_op: the requests refused for contention per
// measured request.
func setAborts(r *Result, aborts uint64) {
	if r.Ops > 0 {
		r.Set(fieldAbortsPerOp, round(float64(aborts)/float64(r.Ops), 4))
	}
}
