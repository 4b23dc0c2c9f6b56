package receipt

import (
	"context"
	"time"
)

// flight marks the one local goroutine working on a receipt; duplicates and
// waiters block on done.
type flight struct{ done chan struct{} }

// beginFlight registers a flight for id; mine=false returns the existing one.
func (s *Service) beginFlight(id string) (f *flight, mine bool) {
	nf := &flight{done: make(chan struct{})}
	actual, loaded := s.flights.LoadOrStore(id, nf)
	return actual.(*flight), !loaded
}

func (s *Service) endFlight(id string, f *flight) {
	s.flights.CompareAndDelete(id, f)
	close(f.done)
}

// waitFlight waits for f to end before deadline.
func (s *Service) waitFlight(ctx context.Context, f *flight, deadline time.Time) bool {
	select {
	case <-f.done:
		return true
	default:
	}
	d := deadline.Sub(s.clock.Now())
	if d <= 0 {
		return false
	}
	select {
	case <-f.done:
		return true
	case <-s.clock.After(d):
		return false
	case <-ctx.Done():
		return false
	}
}

// sleep waits d on the service clock; false if ctx ended.
func (s *Service) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-s.clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// retryAfter is the Retry-After suggested to a client whose request is in
// flight: a fraction of the lease TTL, at least a second.
func (s *Service) retryAfter() time.Duration { return max(time.Second, s.opts.LeaseTTL/10) }
