package receipt

import (
	"context"
	"time"
)

// flight marks the one local goroutine working on a receipt; duplicates and
// waiters block on done.
type flight struct{ done chan struct{} }

// beginFlight registers a flight for id; mine=false returns the existing one.
func (l *lifecycle) beginFlight(id string) (f *flight, mine bool) {
	nf := &flight{done: make(chan struct{})}
	actual, loaded := l.flights.LoadOrStore(id, nf)
	return actual.(*flight), !loaded
}

func (l *lifecycle) endFlight(id string, f *flight) {
	l.flights.CompareAndDelete(id, f)
	close(f.done)
}

// waitFlight waits for f to end before deadline.
func (l *lifecycle) waitFlight(ctx context.Context, f *flight, deadline time.Time) bool {
	select {
	case <-f.done:
		return true
	default:
	}
	d := deadline.Sub(l.clock.Now())
	if d <= 0 {
		return false
	}
	select {
	case <-f.done:
		return true
	case <-l.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}
