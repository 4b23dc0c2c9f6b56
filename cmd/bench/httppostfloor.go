package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// http:http-post-floor (issue 41): the keyed case's very request — its
// path, headers, Idempotency-Key and body, through the same client and the
// same net/http server as http-floor — answered by a bench-only handler
// that reads the body to its end and writes back, at once, a keyed
// answer's headers and body as api.New gave them to one such request at
// the start. It is what a keyed POST costs net/http, the load client and
// loopback when the handler does nothing: the bytes of a 2 KB body and a
// keyed answer on both sides, which http-floor's bare GET does not carry.
// HTTP keyed over library keyed and this floor is the handler's own work.
const caseHTTPPostFloor = "http-post-floor"

func httpPostFloorCase(env *Env, concs []int) ([]*Result, error) {
	var out []*Result
	wl := newWorkload(env.Opts.BatchDocs)
	for _, c := range concs {
		pf := &postFloor{}
		st, srv, err := openHTTPWith(env, caseHTTPPostFloor, c, pf.wrap)
		if err != nil {
			return out, err
		}
		err = pf.capture(env.Ctx, srv, wl)
		var m Measured
		if err == nil {
			m, err = env.Loop(Loop{Case: caseHTTPPostFloor, Concurrency: c, Fsyncs: srv.fsyncs},
				postFloorOp(srv, wl, make([][]byte, c)))
		}
		if cerr := srv.close(st); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		r := m.Result(caseHTTPPostFloor, c)
		r.Set("answer_bytes", len(pf.answer.Load().body))
		out = append(out, &r)
	}
	return out, nil
}

// postFloorOp sends call i of worker w exactly as the keyed case does.
func postFloorOp(srv *httpServer, wl *workload, bufs [][]byte) Op {
	return func(ctx context.Context, w int, i uint64) error {
		bufs[w] = wl.appendBody(bufs[w][:0], w, i)
		a := loadAnswers.Get().(*loadAnswer)
		defer loadAnswers.Put(a)
		return srv.call(ctx, srv.url, bufs[w], wl.key(w, i), http.StatusCreated, a)
	}
}

// postFloor serves api.New's handler until an answer is captured, then
// answers every request with it.
type postFloor struct {
	api    http.Handler
	answer atomic.Pointer[floorAnswer]
}

// floorAnswer is a keyed answer's status, header fields (Date and the
// key's echo left to each request) and body.
type floorAnswer struct {
	status int
	fields []floorField
	body   []byte
}

type floorField struct {
	key  string
	vals []string
}

func (pf *postFloor) wrap(api http.Handler) http.Handler { pf.api = api; return pf }

// capture sends one keyed request of the workload through api.New and
// keeps its answer. net/http's own client reads it: every header is kept,
// whatever the lean client looks at.
func (pf *postFloor) capture(ctx context.Context, srv *httpServer, wl *workload) error {
	body := wl.appendBody(nil, 0, 0)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", wl.key(0, 0))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: the keyed answer to copy: status %d: %.512s", caseHTTPPostFloor, resp.StatusCode, b)
	}
	a := &floorAnswer{status: resp.StatusCode, body: b}
	for k, v := range resp.Header {
		if k != "Date" && k != "Idempotency-Key" {
			a.fields = append(a.fields, floorField{k, v})
		}
	}
	pf.answer.Store(a)
	return nil
}

// ServeHTTP reads the body to its end and answers the captured answer.
func (pf *postFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if pf.answer.Load() == nil {
		pf.api.ServeHTTP(w, r)
		return
	}
	pf.serveAfter(w, r, nil)
}

// serveAfter reads the body to its end, runs wait (nil: none) and answers
// the captured answer. Its header values are shared, not copied: net/http
// only reads them.
func (pf *postFloor) serveAfter(w http.ResponseWriter, r *http.Request, wait func(context.Context) error) {
	a := pf.answer.Load()
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if wait != nil {
		if err := wait(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	h := w.Header()
	for _, f := range a.fields {
		h[f.key] = f.vals
	}
	if v, ok := r.Header["Idempotency-Key"]; ok {
		h["Idempotency-Key"] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}
