package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Op is one closed-loop call: worker is 0..Concurrency-1 and i counts that
// worker's calls from 0, so (worker, i) is unique within a case.
type Op func(ctx context.Context, worker int, i uint64) error

// Loop describes one closed-loop case.
type Loop struct {
	Case        string
	Concurrency int
	// ItemsPerCall is how many items one call completes (64 for a batch of
	// 64 entries); ops counts items, latency is per call. 0 means 1.
	ItemsPerCall int
	// Fsyncs, if set, returns a cumulative fsync counter; it is sampled at
	// the edges of the measured window.
	Fsyncs func() uint64
	// FsyncNanos, if set, returns the cumulative time spent in those
	// fsyncs: the result then says how busy the disk's fsyncs kept the
	// window (fsync_busy) — near 1, the case is bound by its fsyncs; well
	// below, by what happens between them.
	FsyncNanos func() int64
	// Warmup overrides the default warm-up (a tenth of the duration, at
	// most 200ms).
	Warmup time.Duration
	// Window overrides the measured window (-duration): an interleaved
	// pair measures each side in short slices (pair.go).
	Window time.Duration
	// ServerOutside says the case's server runs in another process
	// (PostgreSQL): the process's CPU is then not the case's (cpu.go).
	ServerOutside bool
}

// Measured is what one Loop observed inside its measured window.
type Measured struct {
	Calls   uint64
	Items   uint64
	Seconds float64
	Fsyncs  uint64
	// FsyncNanos is the time spent in those fsyncs; -1 when not measured.
	FsyncNanos int64
	// CPUNanos is the process's CPU time over the window (cpu.go); -1 when
	// not measured.
	CPUNanos int64
	Hist     *hdrhistogram.Histogram // per-call latency in nanoseconds
}

// Latencies are recorded in nanoseconds (1ns..100s at 3 significant
// digits, ~0.1% error): in-process cases complete in a few microseconds,
// where whole-microsecond buckets would be too coarse.
const (
	histMinNS  = 1
	histMaxNS  = 100 * int64(time.Second)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMinNS, histMaxNS, histDigits) }

// worker state is padded so that the per-op counter increments of
// neighbouring workers do not share a cache line.
type workerState struct {
	calls atomic.Uint64
	hist  *hdrhistogram.Histogram
	_     [48]byte
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// Loop runs op on l.Concurrency goroutines, each calling it back to back,
// for a warm-up and then Opts.Duration (longer if no call completed yet). A
// call counts (and its latency is recorded) if it completes inside the
// measured window, so ops/seconds is a completion rate over exactly the
// window. The first error ends the case.
func (e *Env) Loop(l Loop, op Op) (Measured, error) {
	if l.Concurrency < 1 {
		l.Concurrency = 1
	}
	if l.ItemsPerCall < 1 {
		l.ItemsPerCall = 1
	}
	warmup := l.Warmup
	if warmup == 0 {
		warmup = min(e.Opts.Duration/10, 200*time.Millisecond)
	}
	r := &loopRun{e: e, l: l, failed: make(chan struct{}), workers: make([]workerState, l.Concurrency),
		label: fmt.Sprintf("%s/%s c=%d", e.suite, l.Case, l.Concurrency)}
	quiesce()
	r.start(op)
	e.Progress("%s warming up", r.label)
	var begin loopEdge
	if r.wait(warmup) {
		begin = loopEdge{fsyncs: r.fsyncs(), fsyncNanos: r.fsyncNanos(), cpu: processCPU(), t: time.Now()}
		r.phase.Store(phaseMeasure)
		stopProfile := e.caseProfile(e.Opts.CaseProfiles, l)
		r.measure(begin.t)
		stopProfile()
	}
	r.phase.Store(phaseStop)
	end := loopEdge{t: time.Now(), fsyncs: r.fsyncs(), fsyncNanos: r.fsyncNanos(), cpu: processCPU()}
	r.wg.Wait()
	e.ProgressDone()
	if r.firstErr != nil {
		return Measured{}, r.firstErr
	}
	if r.ctxErr != nil {
		return Measured{}, r.ctxErr
	}
	return r.measured(begin, end), nil
}

// loopRun is one Loop in progress: its workers, its phase and how it ended.
type loopRun struct {
	e       *Env
	l       Loop
	label   string
	phase   atomic.Int32
	workers []workerState
	wg      sync.WaitGroup

	errOnce  sync.Once
	firstErr error         // the first failed call's
	failed   chan struct{} // closed once firstErr is set
	ctxErr   error         // the run's context ended the case
}

// loopEdge is what is sampled at either edge of the measured window.
type loopEdge struct {
	t          time.Time
	fsyncs     uint64
	fsyncNanos int64
	cpu        time.Duration
}

// start launches the workers; they call op back to back until the phase
// is phaseStop, recording only the calls that complete while measuring.
func (r *loopRun) start(op Op) {
	for w := range r.workers {
		r.workers[w].hist = newHist()
	}
	ctx := r.e.Ctx
	for w := range r.workers {
		r.wg.Add(1)
		go func(w int, ws *workerState) {
			defer r.wg.Done()
			for i := uint64(0); r.phase.Load() != phaseStop; i++ {
				start := time.Now()
				if err := op(ctx, w, i); err != nil {
					r.fail(fmt.Errorf("%s/%s c=%d worker %d: %w", r.e.suite, r.l.Case, r.l.Concurrency, w, err))
					r.phase.Store(phaseStop)
					return
				}
				d := time.Since(start)
				if r.phase.Load() == phaseMeasure {
					ws.hist.RecordValue(int64(d)) // out of range (>100s) is dropped
					ws.calls.Add(1)
				}
			}
		}(w, &r.workers[w])
	}
}

func (r *loopRun) fail(err error) {
	r.errOnce.Do(func() { r.firstErr = err; close(r.failed) })
}

// measure keeps the window open from t0 for the case's duration,
// printing progress, until it ends or the case fails.
func (r *loopRun) measure(t0 time.Time) {
	window := r.e.Opts.Duration
	if r.l.Window > 0 {
		window = r.l.Window
	}
	end := t0.Add(window)
	// The window also stays open until one call completed, so a case
	// whose calls outlast a short -duration (a stalled disk, a loaded CI
	// machine) still reports a rate and a latency.
	for left := time.Until(end); left > 0 || r.calls() == 0; left = time.Until(end) {
		if !r.wait(min(max(left, 10*time.Millisecond), 250*time.Millisecond)) {
			return
		}
		el := time.Since(t0).Seconds()
		r.e.Progress("%s %4.1fs/%.1fs %10.0f ops/s", r.label, el, window.Seconds(),
			float64(r.calls())*float64(r.l.ItemsPerCall)/el)
	}
}

// wait reports whether d passed before a call failed or the run's
// context ended.
func (r *loopRun) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.failed:
	case <-r.e.Ctx.Done():
		r.ctxErr = r.e.Ctx.Err()
	}
	return false
}

// calls counts the calls completed inside the window so far.
func (r *loopRun) calls() (n uint64) {
	for w := range r.workers {
		n += r.workers[w].calls.Load()
	}
	return n
}

func (r *loopRun) fsyncs() uint64 {
	if r.l.Fsyncs == nil {
		return 0
	}
	return r.l.Fsyncs()
}

func (r *loopRun) fsyncNanos() int64 {
	if r.l.FsyncNanos == nil {
		return -1
	}
	return r.l.FsyncNanos()
}

// measured is the window between the two edges, the workers' counts and
// histograms merged.
func (r *loopRun) measured(begin, end loopEdge) Measured {
	m := Measured{Seconds: end.t.Sub(begin.t).Seconds(), Fsyncs: end.fsyncs - begin.fsyncs, FsyncNanos: -1, CPUNanos: -1, Hist: newHist()}
	if r.l.FsyncNanos != nil {
		m.FsyncNanos = end.fsyncNanos - begin.fsyncNanos
	}
	if begin.cpu >= 0 && end.cpu >= begin.cpu && !r.l.ServerOutside {
		m.CPUNanos = int64(end.cpu - begin.cpu)
	}
	for w := range r.workers {
		m.Calls += r.workers[w].calls.Load()
		m.Hist.Merge(r.workers[w].hist)
	}
	m.Items = m.Calls * uint64(r.l.ItemsPerCall)
	return m
}

// Result turns a measurement into a report line for the case.
func (m Measured) Result(caseName string, concurrency int) Result {
	r := Result{
		Case:        caseName,
		Concurrency: concurrency,
		Ops:         m.Items,
		Seconds:     m.Seconds,
	}
	if m.Seconds > 0 {
		r.OpsPerSec = float64(m.Items) / m.Seconds
		r.FsyncsPerSec = float64(m.Fsyncs) / m.Seconds
		if m.FsyncNanos >= 0 {
			r.Set("fsync_busy", round(float64(m.FsyncNanos)/(m.Seconds*1e9), 3))
			if m.Fsyncs > 0 {
				r.Set("fsync_mean_us", round(float64(m.FsyncNanos)/float64(m.Fsyncs)/1e3, 1))
			}
		}
	}
	setCPU(&r, m)
	if m.Hist != nil && m.Hist.TotalCount() > 0 {
		r.P50us = float64(m.Hist.ValueAtQuantile(50)) / 1e3
		r.P99us = float64(m.Hist.ValueAtQuantile(99)) / 1e3
		r.P90us = float64(m.Hist.ValueAtQuantile(90)) / 1e3
		r.P999us = float64(m.Hist.ValueAtQuantile(99.9)) / 1e3
	}
	return r
}
