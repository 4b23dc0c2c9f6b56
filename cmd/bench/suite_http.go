package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/api"
	"github.com/idemdb/idem/engine/enginemetrics"
	"github.com/idemdb/idem/receipt"
)

func init() {
	register(Suite{
		Name:  "http",
		Rank:  50,
		Doc:   "api over loopback HTTP/1.1: the http-floor (GET /healthz over the same client), the http-post-floor (the keyed case's POST, answered by a bench-only handler that reads the body and writes a captured keyed answer), the http-post-wait-floor (the same, answered after a group-commit-like wait that writes nothing), closed-loop clients posting keyed, key-less and replayed batches, keyed-hot (keyed, each also $incs one shared document; aborts_per_op), and sessions of 10 batches next to 10 keyed POSTs (default concurrency 1,8,32)",
		Cases: []string{caseHTTPFloor, caseHTTPPostFloor, caseHTTPPostWaitFloor, "keyed", caseHTTPKeyedHot, "fast", "replay", caseKeyed10x, caseSession},
		Run:   runHTTP,
	})
}

// Targets of issue 5 (docs/design.md §12), at concurrency 32.
const (
	targetHTTPKeyed  = 5_000
	targetHTTPReplay = 25_000
	httpTargetConc   = 32
)

var httpDefaultConcurrency = []int{1, 8, 32}

func runHTTP(env *Env) error {
	concs := env.concurrencies(httpDefaultConcurrency)
	var results []*Result
	fail := func(err error) error {
		env.reportAll(results)
		return err
	}
	for _, c := range []struct {
		name string
		run  func(*Env, []int) ([]*Result, error)
	}{{caseHTTPFloor, httpFloorCase}, {caseHTTPPostFloor, httpPostFloorCase}, {caseHTTPPostWaitFloor, httpPostWaitFloorCase}} {
		if !env.Want(c.name) {
			continue
		}
		rs, err := c.run(env, concs)
		results = append(results, rs...)
		if err != nil {
			return fail(err)
		}
	}
	for _, name := range []string{"keyed", "fast"} {
		if !env.Want(name) {
			continue
		}
		for _, c := range concs {
			st, srv, err := openHTTP(env, name, c)
			if err != nil {
				return fail(err)
			}
			r, err := httpCase(env, srv, name, c, newWorkload(env.Opts.BatchDocs), 0)
			if cerr := srv.close(st); err == nil {
				err = cerr
			}
			if err != nil {
				return fail(err)
			}
			results = append(results, &r)
		}
	}
	if env.Want(caseHTTPKeyedHot) {
		rs, err := httpKeyedHotCases(env, concs)
		results = append(results, rs...)
		if err != nil {
			return fail(err)
		}
	}
	if env.Want("replay") {
		rs, err := httpReplay(env, concs)
		results = append(results, rs...)
		if err != nil {
			return fail(err)
		}
	}
	us, err := httpUnits(env, concs)
	results = append(results, us...)
	if err != nil {
		return fail(err)
	}
	keyedRatios(env, results, targetHTTPKeyed, httpTargetConc, nil)
	httpFloorRatios(results)
	httpKeyedHotAims(results)
	httpLibraryRatios(env, results)
	unitRatios(results)
	replayVlogRatios(results, "http replay from the value log", targetHTTPReplayVlog)
	if r := indexResults(results).get("replay", httpTargetConc); r != nil {
		rateTarget(r, fmt.Sprintf("http replay@%d", httpTargetConc), targetHTTPReplay)
	}
	env.reportAll(results)
	return nil
}

// httpServer is api.New on a real loopback listener and the load client
// (loadclient.go), whose pool keeps one connection per worker.
type httpServer struct {
	base   string // http://127.0.0.1:port
	url    string // the bench table's batch route
	srv    *http.Server
	client loadClient
	fsyncs func() uint64 // the store's WAL fsyncs
	// fsyncNanos is the time spent in them (nil: not known)
	fsyncNanos func() int64
}

func openHTTP(env *Env, name string, maxConc int) (*stack, *httpServer, error) {
	return openHTTPWith(env, name, maxConc, nil)
}

// openHTTPWith is openHTTP serving wrap(api.New's handler) (wrap nil: the
// handler itself), on the same listener, server settings and client.
func openHTTPWith(env *Env, name string, maxConc int, wrap func(http.Handler) http.Handler) (*stack, *httpServer, error) {
	st, err := openStack(env, "http-"+name, receipt.Options{})
	if err != nil {
		return nil, nil, err
	}
	// The server has no tokens: its requests are the anonymous principal's,
	// and so must the table be.
	if _, _, err := st.svc.Tables().Create(env.Ctx, api.Anonymous, benchTable, benchShards); err != nil {
		st.close()
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.close()
		return nil, nil, err
	}
	var h http.Handler = api.New(st.svc, api.Options{StoreCollectors: []prometheus.Collector{enginemetrics.New(st.db.Stats)}, Logger: discardLogger})
	if wrap != nil {
		h = wrap(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	client, err := newLoadClient(env.Opts.HTTPClient, ln.Addr().String(), maxConc)
	if err != nil {
		srv.Close()
		st.close()
		return nil, nil, err
	}
	base := "http://" + ln.Addr().String()
	return st, &httpServer{
		base:       base,
		url:        base + "/v1/tables/" + benchTable + "/batch",
		srv:        srv,
		client:     client,
		fsyncs:     st.fsyncs,
		fsyncNanos: st.fsyncNanos,
	}, nil
}

func (s *httpServer) close(st *stack) error {
	s.client.closeIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if cerr := st.close(); err == nil {
		err = cerr
	}
	return err
}

// post sends one batch and checks the answer: 201, and on a keyed request
// whether it was a replay.
func (s *httpServer) post(ctx context.Context, body []byte, key string, replay bool) error {
	a := loadAnswers.Get().(*loadAnswer)
	defer loadAnswers.Put(a)
	if err := s.call(ctx, s.url, body, key, http.StatusCreated, a); err != nil {
		return err
	}
	if key != "" && a.replayed != replay {
		return fmt.Errorf("POST (key %q): Idempotent-Replayed=%v, want replay=%v", key, a.replayed, replay)
	}
	return nil
}

// call POSTs body (nil: none) to url, with an Idempotency-Key unless key
// is "", reads the answer into a and checks that its status is want.
func (s *httpServer) call(ctx context.Context, url string, body []byte, key string, want int, a *loadAnswer) error {
	if err := s.client.do(ctx, http.MethodPost, url, body, key, a); err != nil {
		return err
	}
	if a.status != want {
		return fmt.Errorf("POST %s (key %q): status %d, want %d: %.4096s", url, key, a.status, want, a.body)
	}
	return nil
}

// httpCase runs closed-loop clients against srv: keyed (a new key per
// call), fast (no key) or replay (n pre-created keys).
func httpCase(env *Env, srv *httpServer, name string, concurrency int, wl *workload, n int) (Result, error) {
	bufs := make([][]byte, concurrency)
	var bodies [][]byte
	var keys []string
	replay := name == "replay" || name == caseReplayVlog
	if replay {
		bodies, keys = make([][]byte, n), make([]string, n)
		for k := range n {
			bodies[k], keys[k] = wl.appendBody(nil, 0, uint64(k)), wl.key(0, uint64(k))
		}
	}
	m, err := env.Loop(Loop{Case: name, Concurrency: concurrency, Fsyncs: srv.fsyncs, FsyncNanos: srv.fsyncNanos},
		func(ctx context.Context, w int, i uint64) error {
			switch {
			case replay:
				k := replayIndex(w, i, n)
				return srv.post(ctx, bodies[k], keys[k], true)
			case name == "keyed":
				bufs[w] = wl.appendBody(bufs[w][:0], w, i)
				return srv.post(ctx, bufs[w], wl.key(w, i), false)
			}
			bufs[w] = wl.appendBody(bufs[w][:0], w, i)
			return srv.post(ctx, bufs[w], "", false)
		})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(name, concurrency)
	if replay {
		r.Set("replay_set", n)
	}
	return r, nil
}

// caseReplayVlog replays receipts whose envelopes a checkpoint moved to
// the value log, as idemd's engine does (issue 20).
const caseReplayVlog = "replay-vlog"

// targetHTTPReplayVlog: replay from the value log is within noise of
// replay from RAM, over HTTP (issue 20: "must not get slower").
const targetHTTPReplayVlog = 0.9

// httpReplay pre-creates terminal receipts through the API and replays
// them at each concurrency on the same server.
func httpReplay(env *Env, concs []int) ([]*Result, error) {
	maxC := 1
	for _, c := range concs {
		maxC = max(maxC, c)
	}
	st, srv, err := openHTTP(env, "replay", max(maxC, 16))
	if err != nil {
		return nil, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	n := env.Opts.ReplayKeys
	env.Progress("%s/replay creating %d receipts", env.Suite(), n)
	err = precreate(env.Ctx, n, func(ctx context.Context, k uint64) error {
		return srv.post(ctx, wl.appendBody(nil, 0, k), wl.key(0, k), false)
	})
	env.ProgressDone()
	var out []*Result
	for _, c := range concs {
		if err != nil {
			break
		}
		var r Result
		r, err = httpCase(env, srv, "replay", c, wl, n)
		if err == nil {
			out = append(out, &r)
		}
	}
	if err == nil {
		err = st.db.Checkpoint() // the envelopes go to the value log
	}
	for _, c := range concs {
		if err != nil {
			break
		}
		var r Result
		r, err = httpCase(env, srv, caseReplayVlog, c, wl, n)
		if err == nil {
			out = append(out, &r)
		}
	}
	if cerr := srv.close(st); err == nil {
		err = cerr
	}
	return out, err
}
