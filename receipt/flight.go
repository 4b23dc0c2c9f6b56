package receipt

import (
	"context"
	"sync"
	"time"
)

// flight marks the one local goroutine working on a receipt; duplicates and
// waiters block on done, which the first of them makes: most flights end
// with nobody waiting, and then cost one allocation, not a channel too.
type flight struct {
	done  chan struct{} // nil until a waiter needs it (under flightSet.mu)
	ended bool
}

// flightSet is the receipts this process works on, by txn_id. One mutex,
// held for a map operation: a keyed request takes it twice.
type flightSet struct {
	mu sync.Mutex
	m  map[string]*flight
}

// beginFlight registers a flight for id; mine=false returns the existing one.
func (x *executor) beginFlight(id string) (f *flight, mine bool) {
	fs := &x.flights
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[id]; f != nil {
		return f, false
	}
	if fs.m == nil {
		fs.m = make(map[string]*flight)
	}
	f = &flight{}
	fs.m[id] = f
	return f, true
}

func (x *executor) endFlight(id string, f *flight) {
	fs := &x.flights
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[id] == f {
		delete(fs.m, id)
	}
	f.ended = true
	if f.done != nil {
		close(f.done)
	}
}

// doneOf is the channel f's end closes (closed already if it ended).
func (x *executor) doneOf(f *flight) <-chan struct{} {
	fs := &x.flights
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.done == nil {
		f.done = make(chan struct{})
		if f.ended {
			close(f.done)
		}
	}
	return f.done
}

// waitFlight waits for f to end before deadline.
func (x *executor) waitFlight(ctx context.Context, f *flight, deadline time.Time) bool {
	done := x.doneOf(f)
	select {
	case <-done:
		return true
	default:
	}
	d := deadline.Sub(x.core.clock.Now())
	if d <= 0 {
		return false
	}
	select {
	case <-done:
		return true
	case <-x.core.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}
