package api

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// requestCtx is the context dispatch gives a routed request: its
// RequestTimeout deadline, and the principal authenticate names. The
// principal is set in place, not by context.WithValue and
// Request.WithContext: on the keyed path those were two allocations (a
// value context and a copy of the whole Request) per request for one
// string. It is set once, before the handler runs, on the goroutine that
// serves the request, and read after; nothing else sees it change.
//
// The deadline's timer is armed only when something asks for the Done
// channel (a wait for a group commit, an executor slot, a forward's round
// trip): context.WithTimeout armed it on every request, 3 allocations
// (BenchmarkReplayOverhead) and about a microsecond — its timer, the timer's
// context, an entry in the parent's map of children — that a verbatim replay
// or /healthz, which never wait, paid for nothing. Until then Err reads
// the deadline and the parent itself, so a request sees the same Deadline,
// Done and Err as under WithTimeout.
type requestCtx struct {
	parent   context.Context // net/http's request context
	deadline time.Time       // dispatch's start + RequestTimeout
	// principal is a string, nil until authenticate sets it: held as an
	// interface so that Value, called a few times per request, does not
	// box it anew each time.
	principal any
	// timed is WithDeadline(parent, deadline), armed by the first Done
	// (or a Value other than the principal's) before end. It is written
	// once, under mu, before armed is set, and read only after armed is
	// seen set.
	armed  atomic.Bool
	timed  context.Context
	mu     sync.Mutex
	cancel context.CancelFunc // timed's
	// ended is the Err in force when end ran with nothing armed; then Done
	// is a closed channel.
	ended atomic.Pointer[error]
	// sw is the route's status writer (metrics.instrument) and slots the
	// answer's header slots (headers.go), allocated with the context: each
	// was an allocation of its own on every request. Each is handed out
	// once (the taken flags); a second asker gets its own.
	sw                  statusWriter
	slots               headerSlots
	swTaken, slotsTaken bool
}

func newRequestCtx(parent context.Context, timeout time.Duration) *requestCtx {
	return &requestCtx{parent: parent, deadline: time.Now().Add(timeout)}
}

// Deadline is WithDeadline's: the parent's when it is sooner.
func (c *requestCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *requestCtx) Done() <-chan struct{} {
	if c.armed.Load() {
		return c.timed.Done()
	}
	if t := c.arm(); t != nil {
		return t.Done()
	}
	return closedChan
}

func (c *requestCtx) Err() error {
	if c.armed.Load() {
		return c.timed.Err()
	}
	if err := c.ended.Load(); err != nil {
		return *err
	}
	return c.errNow()
}

// errNow is what an armed context's Err would say now: the parent's
// error, else DeadlineExceeded past the deadline.
func (c *requestCtx) errNow() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *requestCtx) Value(key any) any {
	if _, ok := key.(principalKey); ok && c.principal != nil {
		return c.principal
	}
	// Any other key may be context's own (context.Cause, a child's
	// propagation look for the innermost cancelable context): the armed one.
	if c.armed.Load() {
		return c.timed.Value(key)
	}
	if t := c.arm(); t != nil {
		return t.Value(key)
	}
	return c.parent.Value(key)
}

// arm makes the timed context once, unless end ran first (nil then).
func (c *requestCtx) arm() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed.Load() {
		return c.timed
	}
	if c.ended.Load() != nil {
		return nil
	}
	c.timed, c.cancel = context.WithDeadline(c.parent, c.deadline)
	c.armed.Store(true)
	return c.timed
}

// end is WithTimeout's cancel, run when dispatch returns: the armed
// context is cancelled; an unarmed one keeps the Err it had then, or
// Canceled.
func (c *requestCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		return
	}
	err := c.errNow()
	if err == nil {
		err = context.Canceled
	}
	c.ended.Store(&err)
}

// closedChan is the Done of a context that ended before anything asked.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// anonymousPrincipal is Anonymous boxed once: a server without tokens sets
// it on every request without an allocation.
var anonymousPrincipal any = Anonymous

// withPrincipal is r as its handler sees it when principal is
// authenticated: the same request when dispatch made its context, else a
// copy with the principal as a context value.
func withPrincipal(r *http.Request, principal string) *http.Request {
	if c, ok := r.Context().(*requestCtx); ok && c.principal == nil {
		if principal == Anonymous {
			c.principal = anonymousPrincipal
		} else {
			c.principal = principal // boxed here only: Anonymous's box is shared
		}
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, principal))
}

// statusWriterFor is a statusWriter over w: the routed request's own when
// it has not been handed out, else a new one.
func statusWriterFor(w http.ResponseWriter, r *http.Request) *statusWriter {
	if c, ok := r.Context().(*requestCtx); ok && !c.swTaken {
		c.swTaken, c.sw = true, statusWriter{ResponseWriter: w}
		return &c.sw
	}
	return &statusWriter{ResponseWriter: w}
}

// headerSlotsFor is an empty headerSlots: the routed request's own when it
// has not been handed out, else a new one.
func headerSlotsFor(r *http.Request) *headerSlots {
	if c, ok := r.Context().(*requestCtx); ok && !c.slotsTaken {
		c.slotsTaken = true
		return &c.slots
	}
	return new(headerSlots)
}
