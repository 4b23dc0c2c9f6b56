package wal

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// Lingering: the writer holds the next group open a little longer while
// every core is busy.
//
// On a virtual disk an fsync costs CPU, not only time: the development VM
// spends about 150 µs of a core on each append + fdatasync (cmd/bench's
// fsync-serial floor, cpu_us_per_op). The writer starts the next group the
// moment the last is durable, so under load a group holds what arrived
// during one fsync, and each request pays its share of the next. When
// goroutines are already waiting for a core, the requests that would join
// the group are on their way and the cores have other work: waiting costs
// no CPU, and every request that joins takes one fsync's CPU off the
// requests. With a core idle, waiting would only add latency, so the
// writer does not.

// DefaultGroupLinger is how long the writer holds a group open while the
// cores are busy (Options.GroupLinger).
const DefaultGroupLinger = 100 * time.Microsecond

// runnableMetric counts goroutines ready to run but waiting for a P.
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// coreWatch reports whether the process's cores are all busy. It belongs to
// the writer goroutine (its sample buffer is not shared).
type coreWatch struct {
	sample    [1]metrics.Sample
	threshold uint64 // runnable goroutines that make the cores busy
}

// busyRunnablePerCore is how many goroutines per core must be waiting for
// one before the cores count as busy: two rounds of other work queued. At
// one, a moderate load (eight closed-loop callers on two cores) lingered
// often enough to cost it latency for little gain.
const busyRunnablePerCore = 2

func newCoreWatch() *coreWatch {
	w := &coreWatch{threshold: busyRunnablePerCore * uint64(runtime.GOMAXPROCS(0))}
	w.sample[0].Name = runnableMetric
	return w
}

// busy reports whether at least threshold goroutines wait for a core.
func (w *coreWatch) busy() bool {
	metrics.Read(w.sample[:])
	s := w.sample[0].Value
	return s.Kind() == metrics.KindUint64 && s.Uint64() >= w.threshold
}

// linger holds the first queued group open for GroupLinger while the cores
// are busy, so that more entries join it. Caller holds mu, which linger
// releases while it judges the cores (a runtime/metrics read that appenders
// need not wait behind) and while it waits. It does not wait for a group
// already closed (another queued behind it) or on a closing log.
func (l *Log) linger() {
	if l.opts.GroupLinger <= 0 || l.closing || len(l.queue) != 1 {
		return
	}
	busy, wait := l.coresBusy, l.lingerWait
	l.mu.Unlock()
	defer l.mu.Lock()
	if !busy() {
		return
	}
	l.lingered.Add(1)
	// While the cores are busy every P runs the timers at each switch, so
	// a short sleep ends close to when it should (in an idle process it
	// would take about a millisecond, which is why this never waits then).
	wait(l.opts.GroupLinger)
}
