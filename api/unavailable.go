package api

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/engine"
)

// unavailableLogEvery bounds how often refusals by a store that accepts no
// writes are logged: the cause once, then a count at most this often,
// instead of one line per refused request.
const unavailableLogEvery = time.Minute

// unavailableLog counts the requests refused because the store accepts no
// writes, and logs them without flooding.
type unavailableLog struct {
	refused atomic.Uint64
	last    atomic.Int64 // unix nanos of the last line; 0 before the first
}

// note records one refusal. The first logs its cause at ERROR; later ones
// are summed into a WARN line at most every unavailableLogEvery.
func (s *Server) noteUnavailable(cause error) {
	u := &s.unavailable
	n := u.refused.Add(1)
	now := time.Now().UnixNano()
	last := u.last.Load()
	if last != 0 && now-last < int64(unavailableLogEvery) || !u.last.CompareAndSwap(last, now) {
		return
	}
	if last == 0 {
		s.opts.Logger.Error("api: the store refuses writes until idemd restarts; refusals are counted, not each logged",
			"err", cause, "refused", n)
		return
	}
	s.opts.Logger.Warn("api: the store still refuses writes until idemd restarts", "refused", n)
}

// healthDetail is what /healthz, which answers without authentication,
// tells of why the store is unhealthy: the kind of failure only. The
// error itself may name files of the server's disk or its etcd endpoints,
// which are the operator's, in the log (noteUnhealthy).
func healthDetail(err error) string {
	switch {
	case errors.Is(err, engine.ErrFailStopped):
		return "the store fail-stopped after an I/O error and refuses writes until idemd restarts; the server's log has the cause"
	case errors.Is(err, engine.ErrClosed):
		return "the store is closed"
	case errors.Is(err, engine.ErrUnavailable):
		return "the remote store (etcd) does not answer within its bound: this node serves nothing until it does"
	default:
		return "the store cannot serve now; the server's log has the cause"
	}
}

// noteUnhealthy logs why /healthz answered 503: the first time at ERROR,
// then at most every unavailableLogEvery, however often it is polled.
func (s *Server) noteUnhealthy(cause error) {
	now := time.Now().UnixNano()
	last := s.unhealthyLogged.Load()
	if last != 0 && now-last < int64(unavailableLogEvery) || !s.unhealthyLogged.CompareAndSwap(last, now) {
		return
	}
	s.opts.Logger.Error("api: /healthz answers 503", "err", cause)
}
