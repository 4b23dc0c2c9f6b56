package api

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// unavailableLogEvery bounds how often refusals by a store that accepts no
// writes are logged: the cause once, then a count at most this often,
// instead of one line per refused request.
const unavailableLogEvery = time.Minute

// refusalCause is why the store refused a request. What an operator must
// do differs: a fail-stopped or closed store refuses every write until
// idemd restarts; a remote store (etcd) that did not answer within its
// bound is a transient loss the node rides out by itself — telling an
// operator to restart a healthy node would be a lie (issue 39, part 7).
type refusalCause int

const (
	// refusalStopped: store.ErrFailStopped or store.ErrClosed.
	refusalStopped refusalCause = iota
	// refusalUnreachable: store.ErrUnavailable, or any other cause
	// short of a stop: the node retries by itself.
	refusalUnreachable
	// refusalFull: store.ErrNoSpace — the store is near its space quota
	// (store_full before the quota) or at it (etcd's NOSPACE alarm): new
	// work is refused until space is freed, with no restart.
	refusalFull
	refusalCauses
)

// refusalCauseLabels are the cause label values of idem_store_refusals_total.
var refusalCauseLabels = [refusalCauses]string{"stopped", "unreachable", "full"}

// causeOf classifies a refusal's cause.
func causeOf(err error) refusalCause {
	switch {
	case errors.Is(err, store.ErrNoSpace):
		return refusalFull
	case errors.Is(err, store.ErrFailStopped), errors.Is(err, store.ErrClosed):
		return refusalStopped
	}
	return refusalUnreachable
}

// unavailableLog counts the requests refused because the store accepts no
// writes or did not answer, by cause, and logs them without flooding.
type unavailableLog [refusalCauses]refusalCount

type refusalCount struct {
	refused atomic.Uint64
	logged  logGate
}

// logGate lets one log line through at most every unavailableLogEvery,
// however many goroutines ask at once.
type logGate struct {
	last atomic.Int64 // unix nanos of the last line; 0 before the first
}

// pass reports whether a line may be logged now, and whether it is the
// first.
func (g *logGate) pass() (ok, first bool) {
	now := time.Now().UnixNano()
	last := g.last.Load()
	if last != 0 && now-last < int64(unavailableLogEvery) || !g.last.CompareAndSwap(last, now) {
		return false, false
	}
	return true, last == 0
}

// refusals is how many requests were refused for cause c.
func (u *unavailableLog) refusals(c refusalCause) uint64 { return u[c].refused.Load() }

// noteUnavailable records one refusal under its cause. A stopped store's
// first refusal logs its cause at ERROR, later ones a count at WARN at
// most every unavailableLogEvery; an unreachable store's are WARN lines at
// most as often, saying the node goes on by itself. A nil cause (the
// store is healthy by the time it is asked: the refusal was a race of
// requests, not the store's) is no store refusal and is not counted.
func (s *failures) noteUnavailable(cause error) {
	if cause == nil {
		return
	}
	c := causeOf(cause)
	u := &s.unavailable[c]
	n := u.refused.Add(1)
	ok, first := u.logged.pass()
	if !ok {
		return
	}
	switch {
	case c == refusalFull:
		s.opts.Logger.Warn("api: the store is near or at its space quota: new keys and sessions are answered 503 store_full until cleanup and compaction free space "+
			"(past etcd's NOSPACE alarm an operator defragments and disarms it: docs/cluster.md); no restart needed; refusals are counted, not each logged",
			"err", cause, "refused", n)
	case c == refusalUnreachable:
		s.opts.Logger.Warn("api: the store did not answer in time; requests are answered 503 and retried, this node goes on by itself (no restart needed); refusals are counted, not each logged",
			"err", cause, "refused", n)
	case first:
		s.opts.Logger.Error("api: the store refuses writes until idemd restarts; refusals are counted, not each logged",
			"err", cause, "refused", n)
	default:
		s.opts.Logger.Warn("api: the store still refuses writes until idemd restarts", "refused", n)
	}
}

// noteRefusal notes an answer the store caused by its code: unavailable
// by the store's health now, store_full as a want of space.
func (s *failures) noteRefusal(c code.Code) {
	switch c {
	case code.Unavailable:
		s.noteUnavailable(s.health())
	case code.StoreFull:
		s.noteUnavailable(store.ErrNoSpace)
	}
}

// healthDetail is what /healthz, which answers without authentication,
// tells of why the store is unhealthy: the kind of failure only. The
// error itself may name files of the server's disk or its etcd endpoints,
// which are the operator's, in the log (noteUnhealthy).
func healthDetail(err error) string {
	switch {
	case errors.Is(err, store.ErrFailStopped):
		return "the store fail-stopped after an I/O error and refuses writes until idemd restarts; the server's log has the cause"
	case errors.Is(err, store.ErrClosed):
		return "the store is closed"
	case errors.Is(err, store.ErrUnavailable):
		return "the remote store (etcd) does not answer within its bound: this node serves nothing until it does"
	default:
		return "the store cannot serve now; the server's log has the cause"
	}
}

// noteUnhealthy logs why /healthz answered 503: the first time at ERROR,
// then at most every unavailableLogEvery, however often it is polled.
func (s *failures) noteUnhealthy(cause error) {
	if ok, _ := s.unhealthyLogged.pass(); ok {
		s.opts.Logger.Error("api: /healthz answers 503", "err", cause)
	}
}

// refusalsHelp is idem_store_refusals_total's help.
const refusalsHelp = "Requests answered 503 unavailable because of the store, by cause: " +
	"stopped (the store fail-stopped or closed: it refuses writes until idemd restarts), " +
	"unreachable (a remote store did not answer within its bound: transient, the node goes on by itself), " +
	"full (503 store_full: the store is near its space quota, or at it; new keys and sessions wait for cleanup and compaction to free space)."

// refusalCollectors are the series of idem_store_refusals_total, one per
// cause, read at scrape time.
func (s *failures) refusalCollectors() []prometheus.Collector {
	out := make([]prometheus.Collector, 0, refusalCauses)
	for c := range refusalCauses {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idem_store_refusals_total", Help: refusalsHelp,
			ConstLabels: prometheus.Labels{"cause": refusalCauseLabels[c]},
		}, func() float64 { return float64(s.unavailable.refusals(c)) }))
	}
	return out
}

// noSpaceRetryAfter is the Retry-After of a write etcd refused for want
// of space (its NOSPACE alarm): an operator has to act, which takes
// longer than the high-water refusal's wait for a cleaner pass.
const noSpaceRetryAfter = time.Minute
