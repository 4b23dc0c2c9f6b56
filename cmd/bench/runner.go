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
	var (
		phase   atomic.Int32
		errOnce sync.Once
		firstEr error
		failed  = make(chan struct{})
		workers = make([]workerState, l.Concurrency)
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstEr = err; close(failed) })
	}
	for w := range workers {
		workers[w].hist = newHist()
	}
	quiesce()
	ctx := e.Ctx
	for w := range workers {
		wg.Add(1)
		go func(w int, ws *workerState) {
			defer wg.Done()
			for i := uint64(0); phase.Load() != phaseStop; i++ {
				start := time.Now()
				if err := op(ctx, w, i); err != nil {
					fail(fmt.Errorf("%s/%s c=%d worker %d: %w", e.suite, l.Case, l.Concurrency, w, err))
					phase.Store(phaseStop)
					return
				}
				d := time.Since(start)
				if phase.Load() == phaseMeasure {
					ws.hist.RecordValue(int64(d)) // out of range (>100s) is dropped
					ws.calls.Add(1)
				}
			}
		}(w, &workers[w])
	}

	fsyncs := func() uint64 {
		if l.Fsyncs == nil {
			return 0
		}
		return l.Fsyncs()
	}
	fsyncNanos := func() int64 {
		if l.FsyncNanos == nil {
			return -1
		}
		return l.FsyncNanos()
	}
	var (
		t0, t1 time.Time
		f0, f1 uint64
		n0, n1 int64
		c0, c1 time.Duration
		err    error
	)
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-failed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		return false
	}
	label := fmt.Sprintf("%s/%s c=%d", e.suite, l.Case, l.Concurrency)
	e.Progress("%s warming up", label)
	if wait(warmup) {
		f0, n0, c0, t0 = fsyncs(), fsyncNanos(), processCPU(), time.Now()
		phase.Store(phaseMeasure)
		window := e.Opts.Duration
		if l.Window > 0 {
			window = l.Window
		}
		end := t0.Add(window)
		calls := func() (n uint64) {
			for w := range workers {
				n += workers[w].calls.Load()
			}
			return n
		}
		// The window also stays open until one call completed, so a case
		// whose calls outlast a short -duration (a stalled disk, a loaded CI
		// machine) still reports a rate and a latency.
		for left := time.Until(end); left > 0 || calls() == 0; left = time.Until(end) {
			if !wait(min(max(left, 10*time.Millisecond), 250*time.Millisecond)) {
				break
			}
			el := time.Since(t0).Seconds()
			e.Progress("%s %4.1fs/%.1fs %10.0f ops/s", label, el, window.Seconds(),
				float64(calls())*float64(l.ItemsPerCall)/el)
		}
	}
	phase.Store(phaseStop)
	t1, f1, n1, c1 = time.Now(), fsyncs(), fsyncNanos(), processCPU()
	wg.Wait()
	e.ProgressDone()
	if firstEr != nil {
		return Measured{}, firstEr
	}
	if err != nil {
		return Measured{}, err
	}

	m := Measured{Seconds: t1.Sub(t0).Seconds(), Fsyncs: f1 - f0, FsyncNanos: -1, CPUNanos: -1, Hist: newHist()}
	if l.FsyncNanos != nil {
		m.FsyncNanos = n1 - n0
	}
	if c0 >= 0 && c1 >= c0 && !l.ServerOutside {
		m.CPUNanos = int64(c1 - c0)
	}
	for w := range workers {
		m.Calls += workers[w].calls.Load()
		m.Hist.Merge(workers[w].hist)
	}
	m.Items = m.Calls * uint64(l.ItemsPerCall)
	return m, nil
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
