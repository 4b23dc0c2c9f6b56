package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// http:http-post-wait-floor (issue 41): http-post-floor whose handler, after
// reading the body, waits for a group commit that writes nothing, before it
// answers. A keyed request's handler parks on its WAL group's release
// (wal.Commit.Wait); this floor parks the same way: a releaser goroutine
// takes the open group, as the WAL's writer does, blocks its thread in a
// syscall that costs no CPU (nanosleep, where the writer has its fsync),
// then closes the group's channel, waking every handler in it at once. What
// it costs over http-post-floor is the wait's own scheduling — the park, the
// wake-up, the idle Ps, the netpoller's next round — apart from any of
// Idem's code or the fsync's CPU, which library keyed already carries.
const caseHTTPPostWaitFloor = "http-post-wait-floor"

// waitFloorHold stands in for one fsync: about fsync-serial's p50 on the
// development VM (320-420 µs), so that a release gathers about as many
// waiters at 32 workers as keyed's groups hold (ops_per_release beside
// keyed's ops_per_fsync).
const waitFloorHold = 400 * time.Microsecond

func httpPostWaitFloorCase(env *Env, concs []int) ([]*Result, error) {
	var out []*Result
	wl := newWorkload(env.Opts.BatchDocs)
	for _, c := range concs {
		wf := newWaitFloor(waitFloorHold)
		st, srv, err := openHTTPWith(env, caseHTTPPostWaitFloor, c, wf.wrap)
		if err != nil {
			wf.stop()
			return out, err
		}
		err = wf.capture(env.Ctx, srv, wl)
		var m Measured
		if err == nil {
			// The releases stand in for fsyncs (the store writes nothing):
			// the row's fsync figures count them, within the window.
			m, err = env.Loop(Loop{Case: caseHTTPPostWaitFloor, Concurrency: c, Fsyncs: wf.releases.Load},
				postFloorOp(srv, wl, make([][]byte, c)))
		}
		wf.stop()
		if cerr := srv.close(st); err == nil {
			err = cerr
		}
		if err != nil {
			return out, err
		}
		r := m.Result(caseHTTPPostWaitFloor, c)
		if m.Fsyncs > 0 {
			r.Set("ops_per_release", round(float64(m.Items)/float64(m.Fsyncs), 2))
		}
		out = append(out, &r)
	}
	return out, nil
}

// waitFloor is postFloor whose answers wait for a release of their group.
type waitFloor struct {
	postFloor
	hold     time.Duration
	mu       sync.Mutex
	open     *waitGroup    // the group a handler joins; nil: none yet
	kick     chan struct{} // a group was opened (one token at most)
	done     chan struct{} // closed by stop
	exited   chan struct{} // closed when the releaser has returned
	releases atomic.Uint64
}

// waitGroup is the handlers one release wakes.
type waitGroup struct{ done chan struct{} }

func newWaitFloor(hold time.Duration) *waitFloor {
	wf := &waitFloor{hold: hold, kick: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	go wf.release()
	return wf
}

func (wf *waitFloor) wrap(api http.Handler) http.Handler { wf.api = api; return wf }

// join returns the open group, opening one (and waking the releaser) if
// there is none, as wal.Log.Enqueue joins its open group.
func (wf *waitFloor) join() *waitGroup {
	wf.mu.Lock()
	defer wf.mu.Unlock()
	if wf.open == nil {
		wf.open = &waitGroup{done: make(chan struct{})}
		select {
		case wf.kick <- struct{}{}:
		default:
		}
	}
	return wf.open
}

// release is the stand-in for the WAL's writer: it takes the open group
// (later handlers join the next one), holds its thread in a syscall for
// hold, and closes the group's channel.
func (wf *waitFloor) release() {
	defer close(wf.exited)
	ts := syscall.NsecToTimespec(wf.hold.Nanoseconds())
	for {
		select {
		case <-wf.kick:
		case <-wf.done:
			return
		}
		wf.mu.Lock()
		g := wf.open
		wf.open = nil
		wf.mu.Unlock()
		if g == nil {
			continue
		}
		_ = syscall.Nanosleep(&ts, nil)
		wf.releases.Add(1)
		close(g.done)
	}
}

// stop ends the releaser after it has released every group it took; a
// handler joining later waits on its request's context alone.
func (wf *waitFloor) stop() {
	close(wf.done)
	<-wf.exited
	wf.mu.Lock()
	if g := wf.open; g != nil {
		wf.open = nil
		close(g.done)
	}
	wf.mu.Unlock()
}

// ServeHTTP reads the body, waits for its group's release, and answers the
// captured answer; before the capture it is api.New's handler.
func (wf *waitFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wf.answer.Load() == nil {
		wf.api.ServeHTTP(w, r)
		return
	}
	wf.serveAfter(w, r, func(ctx context.Context) error {
		g := wf.join()
		select {
		case <-g.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}
