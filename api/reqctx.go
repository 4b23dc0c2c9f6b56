package api

import (
	"context"
	"net/http"
)

// requestCtx is the context dispatch gives a routed request: its
// RequestTimeout deadline, and the principal authenticate names. The
// principal is set in place, not by context.WithValue and
// Request.WithContext: on the keyed path those were two allocations (a
// value context and a copy of the whole Request) per request for one
// string. It is set once, before the handler runs, on the goroutine that
// serves the request, and read after; nothing else sees it change.
type requestCtx struct {
	context.Context
	// principal is a string, nil until authenticate sets it: held as an
	// interface so that Value, called a few times per request, does not
	// box it anew each time.
	principal any
	// sw is the route's status writer (metrics.instrument) and slots the
	// answer's header slots (headers.go), allocated with the context: each
	// was an allocation of its own on every request. Each is handed out
	// once (the taken flags); a second asker gets its own.
	sw                  statusWriter
	slots               headerSlots
	swTaken, slotsTaken bool
}

func (c *requestCtx) Value(key any) any {
	if _, ok := key.(principalKey); ok && c.principal != nil {
		return c.principal
	}
	return c.Context.Value(key)
}

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
