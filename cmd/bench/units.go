package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/table"
)

// Interactive sessions next to keyed batches, in the receipts suite (the
// library) and the http suite (the API over loopback). One unit is
// unitBatches batches of -batch-docs documents either way:
//
//	session-10x10  begin a session, stage the batches one per step, commit
//	               it under a new Idempotency-Key: one retained-2PC
//	               transaction of everything staged
//	keyed-10x      the same batches as unitBatches keyed requests (a new key
//	               each), executed back to back by one worker
//
// ops count batches (so ops/s is comparable with the keyed case's), the
// latency is per unit, and the session line carries its ratios to the
// keyed-10x line of the same concurrency in the same run.
const (
	unitBatches  = 10
	caseSession  = "session-10x10"
	caseKeyed10x = "keyed-10x"
)

// unitCases is the pair in run order: at each concurrency keyed-10x, then
// the session, so the two members of a ratio are measured back to back.
var unitCases = []string{caseKeyed10x, caseSession}

// unitsFit reports whether a session can hold a unit's documents, and
// says so on stderr when it cannot (the pair is then left out).
func unitsFit(env *Env) bool {
	if n := unitBatches * env.Opts.BatchDocs; n > table.SessionDocsMax {
		fmt.Fprintf(env.run.diag, "%s: %s and %s left out: %d batches of -batch-docs %d are %d documents, over a session's %d\n",
			env.Suite(), caseSession, caseKeyed10x, unitBatches, env.Opts.BatchDocs, n, table.SessionDocsMax)
		return false
	}
	return true
}

// unitResult is a unit case's report line: units/s, fsyncs and WAL bytes
// per unit. The WAL bytes are counted over the whole case (warm-up and
// every unit the workers finished at the stop included, renewals and any
// other background write too) and divided by the units completed in it.
func unitResult(m Measured, name string, concurrency, docs int, units, walBytes uint64) Result {
	r := m.Result(name, concurrency)
	r.Set("unit_batches", unitBatches)
	r.Set("docs_per_batch", docs)
	if m.Seconds > 0 {
		r.Set("units_per_sec", round(float64(m.Calls)/m.Seconds, 1))
	}
	if m.Calls > 0 {
		r.Set("fsyncs_per_unit", round(float64(m.Fsyncs)/float64(m.Calls), 2))
	}
	if units > 0 {
		r.Set("wal_bytes_per_unit", walBytes/units)
	}
	return r
}

// unitRatios sets, on each session line, its ratios to the keyed-10x line
// of the same concurrency: time per unit (the keyed units/s over the
// session's: above 1, a session costs more than its batches sent as keyed
// requests), p50 per unit, and WAL bytes per unit.
func unitRatios(results []*Result) {
	idx := indexResults(results)
	for _, s := range results {
		if s.Case != caseSession {
			continue
		}
		k := idx.get(caseKeyed10x, s.Concurrency)
		if k == nil {
			continue
		}
		if s.OpsPerSec > 0 && k.OpsPerSec > 0 {
			s.Set("session_over_keyed10x_time", round(k.OpsPerSec/s.OpsPerSec, 3))
		}
		if s.P50us > 0 && k.P50us > 0 {
			s.Set("session_over_keyed10x_p50", round(s.P50us/k.P50us, 3))
		}
		sb, _ := s.Extra["wal_bytes_per_unit"].(uint64)
		kb, _ := k.Extra["wal_bytes_per_unit"].(uint64)
		if sb > 0 && kb > 0 {
			s.Set("session_over_keyed10x_wal_bytes", round(float64(sb)/float64(kb), 3))
		}
	}
}

// runUnits measures the pair at each concurrency with open(case, c),
// which returns the unit op, the store's WAL byte counter and a close.
func runUnits(env *Env, concs []int, open func(name string, c int) (Op, func() uint64, func() uint64, func() error, error)) ([]*Result, error) {
	var out []*Result
	if !env.Want(caseSession) && !env.Want(caseKeyed10x) || !unitsFit(env) {
		return nil, nil
	}
	for _, c := range concs {
		for _, name := range unitCases {
			if !env.Want(name) {
				continue
			}
			op, fsyncs, walBytes, closeFn, err := open(name, c)
			if err != nil {
				return out, err
			}
			var units atomic.Uint64
			counted := func(ctx context.Context, w int, i uint64) error {
				if err := op(ctx, w, i); err != nil {
					return err
				}
				units.Add(1)
				return nil
			}
			b0 := walBytes()
			m, err := env.Loop(Loop{Case: name, Concurrency: c, ItemsPerCall: unitBatches, Fsyncs: fsyncs}, counted)
			b1 := walBytes()
			if cerr := closeFn(); err == nil {
				err = cerr
			}
			if err != nil {
				return out, err
			}
			r := unitResult(m, name, c, env.Opts.BatchDocs, units.Load(), b1-b0)
			out = append(out, &r)
		}
	}
	return out, nil
}

func (s *stack) walBytes() uint64 { return s.db.Stats().WAL.Bytes }

// receiptsUnits is the pair on receipt.Service, one fresh store per case.
func receiptsUnits(env *Env, concs []int) ([]*Result, error) {
	docs := unitBatches * env.Opts.BatchDocs
	wantResult := []byte(`{"inserted":` + strconv.Itoa(docs) + `,`)
	return runUnits(env, concs, func(name string, c int) (Op, func() uint64, func() uint64, func() error, error) {
		st, err := openStack(env, name, receipt.Options{})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		wl := newWorkload(env.Opts.BatchDocs)
		svc := st.svc
		keyed := func(ctx context.Context, w int, i uint64) error {
			for j := range uint64(unitBatches) {
				n := i*unitBatches + j
				ans, err := svc.Execute(ctx, receipt.Request{Principal: benchPrincipal, Table: benchTable, Key: wl.key(w, n), Batch: wl.batch(w, n)})
				if err != nil {
					return err
				}
				if err := checkCommitted(ans, false); err != nil {
					return err
				}
			}
			return nil
		}
		session := func(ctx context.Context, w int, i uint64) error {
			sess, err := svc.BeginSession(ctx, benchPrincipal, 0)
			if err != nil {
				return fmt.Errorf("begin: %w", err)
			}
			for j := range uint64(unitBatches) {
				tb := []receipt.TableBatch{{Table: benchTable, Batch: wl.batch(w, i*unitBatches+j)}}
				if _, _, err := svc.StageSession(ctx, benchPrincipal, sess.ID, tb); err != nil {
					return fmt.Errorf("stage %d: %w", j, err)
				}
			}
			ans, err := svc.CommitSession(ctx, receipt.CommitRequest{Principal: benchPrincipal, Session: sess.ID, Key: wl.key(w, i)})
			if err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			if err := checkCommitted(ans, false); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			if !bytes.HasPrefix(ans.Result, wantResult) {
				return fmt.Errorf("commit of %d staged documents answered %s", docs, ans.Result)
			}
			return nil
		}
		op := keyed
		if name == caseSession {
			op = session
		}
		return op, st.fsyncs, st.walBytes, st.close, nil
	})
}

// httpUnits is the pair over loopback HTTP against api.New: keyed-10x as
// unitBatches keyed POSTs of the batch route, the session as POST
// /v1/sessions, unitBatches POST /v1/sessions/{id}/batch and POST
// /v1/sessions/{id}/commit with an Idempotency-Key.
func httpUnits(env *Env, concs []int) ([]*Result, error) {
	docs := unitBatches * env.Opts.BatchDocs
	wantResult := []byte(`{"inserted":` + strconv.Itoa(docs) + `,`)
	return runUnits(env, concs, func(name string, c int) (Op, func() uint64, func() uint64, func() error, error) {
		st, srv, err := openHTTP(env, name, c)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		wl := newWorkload(env.Opts.BatchDocs)
		bufs := make([][]byte, c)
		keyed := func(ctx context.Context, w int, i uint64) error {
			for j := range uint64(unitBatches) {
				n := i*unitBatches + j
				bufs[w] = wl.appendBody(bufs[w][:0], w, n)
				if err := srv.post(ctx, bufs[w], wl.key(w, n), false); err != nil {
					return err
				}
			}
			return nil
		}
		session := func(ctx context.Context, w int, i uint64) error {
			var a loadAnswer
			if err := srv.call(ctx, srv.base+"/v1/sessions", nil, "", http.StatusCreated, &a); err != nil {
				return err
			}
			var began struct {
				ID string `json:"session_id"`
			}
			if err := json.Unmarshal(a.body, &began); err != nil || began.ID == "" {
				return fmt.Errorf("POST /v1/sessions answered %s (%v)", a.body, err)
			}
			sessURL := srv.base + "/v1/sessions/" + began.ID
			for j := range uint64(unitBatches) {
				bufs[w] = wl.appendStageBody(bufs[w][:0], w, i*unitBatches+j)
				if err := srv.call(ctx, sessURL+"/batch", bufs[w], "", http.StatusOK, &a); err != nil {
					return fmt.Errorf("stage %d: %w", j, err)
				}
			}
			if err := srv.call(ctx, sessURL+"/commit", nil, wl.key(w, i), http.StatusCreated, &a); err != nil {
				return err
			}
			if a.replayed || !bytes.HasPrefix(a.body, wantResult) {
				return fmt.Errorf("commit of %d staged documents answered %s (Idempotent-Replayed=%v)", docs, a.body, a.replayed)
			}
			return nil
		}
		op := keyed
		if name == caseSession {
			op = session
		}
		return op, srv.fsyncs, st.walBytes, func() error { return srv.close(st) }, nil
	})
}

// appendStageBody is call i of worker w as the body of a session's stage
// step: the batch route's body with the table named.
func (wl *workload) appendStageBody(dst []byte, w int, i uint64) []byte {
	dst = append(dst, `{"table":"`+benchTable+`",`...)
	start := len(dst)
	dst = wl.appendBody(dst, w, i) // {"inserts":[…]}
	return append(dst[:start], dst[start+1:]...)
}
