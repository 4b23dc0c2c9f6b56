package main

import (
	"context"
	"fmt"
	"net/http"
)

// http:http-floor (issue 18): GET /healthz over the same server, client
// and connection pool as the other http cases — the floor of an HTTP
// answer here (net/http's server, the load client, loopback, a small JSON
// body), which the replay case is held to.
const caseHTTPFloor = "http-floor"

// Issue 18's aim: replay@32 at least 0.6 of the floor's rate.
const targetReplayOverHTTPFloor = 0.6

func httpFloorCase(env *Env, concs []int) ([]*Result, error) {
	var out []*Result
	for _, c := range concs {
		st, srv, err := openHTTP(env, caseHTTPFloor, c)
		if err != nil {
			return out, err
		}
		url := srv.base + "/healthz"
		m, err := env.Loop(Loop{Case: caseHTTPFloor, Concurrency: c, Fsyncs: srv.fsyncs},
			func(ctx context.Context, _ int, _ uint64) error {
				a := loadAnswers.Get().(*loadAnswer)
				defer loadAnswers.Put(a)
				if err := srv.client.do(ctx, http.MethodGet, url, nil, "", a); err != nil {
					return err
				}
				if a.status != http.StatusOK {
					return fmt.Errorf("GET /healthz: status %d", a.status)
				}
				return nil
			})
		if cerr := srv.close(st); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		r := m.Result(caseHTTPFloor, c)
		out = append(out, &r)
	}
	return out, nil
}

// httpFloorRatios sets replay/http-floor at each concurrency and the aim
// at httpTargetConc.
func httpFloorRatios(results []*Result) {
	idx := indexResults(results)
	for _, r := range results {
		if r.Case != "replay" {
			continue
		}
		f := idx.get(caseHTTPFloor, r.Concurrency)
		if f == nil || f.OpsPerSec <= 0 {
			continue
		}
		ratio := r.OpsPerSec / f.OpsPerSec
		r.Set("replay_over_http_floor_rate", round(ratio, 3))
		if r.Concurrency == httpTargetConc {
			r.Targets = append(r.Targets, Target{
				Want:  fmt.Sprintf("replay@%d >= %.1f x %s@%d (issue 18)", httpTargetConc, targetReplayOverHTTPFloor, caseHTTPFloor, httpTargetConc),
				Got:   fmt.Sprintf("%.3f x (%.0f / %.0f req/s)", ratio, r.OpsPerSec, f.OpsPerSec),
				Met:   ratio >= targetReplayOverHTTPFloor,
				Score: atLeast(ratio, targetReplayOverHTTPFloor),
			})
		}
	}
}

// Issue 18's aim: HTTP keyed@32 at least 0.8 of the library's keyed@32 of
// the same run — what the server path costs on top of the library.
const targetHTTPOverLibrary = 0.8

// httpLibraryRatios sets, on each http case that the receipts suite of
// this run measured at the same concurrency (keyed, fast, replay), its
// rate over the library's, and the aim on keyed@httpTargetConc. The suites'
// default concurrencies differ (1,8,32 and 1,8,64): the aim is judged when
// both ran at 32 (-concurrency 1,8,32,64, say).
func httpLibraryRatios(env *Env, results []*Result) {
	lib := indexResults(ptrs(env.Earlier("receipts")))
	for _, r := range results {
		switch r.Case {
		case "keyed", "fast", "replay":
		default:
			continue
		}
		l := lib.get(r.Case, r.Concurrency)
		if l == nil || l.OpsPerSec <= 0 {
			continue
		}
		ratio := r.OpsPerSec / l.OpsPerSec
		r.Set("over_library_rate", round(ratio, 3))
		if r.Case == "keyed" && r.Concurrency == httpTargetConc {
			r.Targets = append(r.Targets, Target{
				Want:  fmt.Sprintf("http keyed@%d >= %.1f x library keyed@%d (issue 18)", httpTargetConc, targetHTTPOverLibrary, httpTargetConc),
				Got:   fmt.Sprintf("%.3f x (%.0f / %.0f req/s)", ratio, r.OpsPerSec, l.OpsPerSec),
				Met:   ratio >= targetHTTPOverLibrary,
				Score: atLeast(ratio, targetHTTPOverLibrary),
			})
		}
	}
}
