package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every handler of a group is woken by its one release and answers the
// captured answer; the releases are counted, at most one per group.
func TestWaitFloor_AnswersEveryWaiterAfterItsGroupIsReleased(t *testing.T) {
	wf := newWaitFloor(time.Microsecond)
	defer wf.stop()
	wf.answer.Store(&floorAnswer{status: http.StatusCreated, body: []byte(`{"ok":true}`),
		fields: []floorField{{"Content-Type", []string{"application/json"}}}})
	const n = 16
	recs := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/tables/t/batch", strings.NewReader(`{"insert":[]}`))
		req.Header.Set("Idempotency-Key", "k")
		ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
		defer cancel()
		wg.Add(1)
		go func(rec *httptest.ResponseRecorder, req *http.Request) {
			defer wg.Done()
			wf.ServeHTTP(rec, req)
		}(recs[i], req.WithContext(ctx))
	}
	wg.Wait()
	for i, rec := range recs {
		if rec.Code != http.StatusCreated || rec.Body.String() != `{"ok":true}` || rec.Header().Get("Idempotency-Key") != "k" {
			t.Errorf("request %d: %d %q %v, want the captured answer with the key echoed", i, rec.Code, rec.Body, rec.Header())
		}
	}
	if got := wf.releases.Load(); got < 1 || got > n {
		t.Errorf("releases %d, want 1..%d", got, n)
	}
}

// A handler whose request ends before its group is released answers an
// error instead of the floor's answer, and stop still returns.
func TestWaitFloor_ARequestThatEndsFirstIsNotAnswered(t *testing.T) {
	wf := newWaitFloor(time.Microsecond)
	wf.answer.Store(&floorAnswer{status: http.StatusCreated, body: []byte(`{}`)})
	wf.stop() // no releaser: the group opened below is never released
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	wf.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`)).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
}

// Against the wait floor the keyed row gets its own figure, judging nothing.
func TestSetCPUOver_WaitFloorFigure(t *testing.T) {
	r := resultWithCPU(200)
	setCPUOver(r, resultWithCPU(110), resultWithCPU(70), "cpu_over_library_and_wait_floor_us")
	if got := r.Extra["cpu_over_library_and_wait_floor_us"]; got != 20.0 || len(r.Targets) != 0 {
		t.Errorf("figure %v, targets %v: want 20 and none", got, r.Targets)
	}
}
