package lease

import (
	"sort"
	"sync"
	"time"
)

// Clock is the source of time for leases, waits and supervisors.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// After implements Clock.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sim is a simulated clock that only moves when Advance is called. Tests use
// it to run lease expiry and renewal deterministically, without sleeping.
type Sim struct {
	mu      sync.Mutex
	now     time.Time
	waiters []simWaiter
}

type simWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewSim returns a simulated clock starting at start.
func NewSim(start time.Time) *Sim { return &Sim{now: start} }

// Now implements Clock.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// After implements Clock.
func (s *Sim) After(d time.Duration) <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- s.now
		return ch
	}
	s.waiters = append(s.waiters, simWaiter{at: s.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due,
// in deadline order.
func (s *Sim) Advance(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	now := s.now
	var due, keep []simWaiter
	for _, w := range s.waiters {
		if !w.at.After(now) {
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	s.waiters = keep
	s.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, w := range due {
		w.ch <- now
	}
}

// Timers is the number of pending timers: tests poll it to know that a
// goroutine is parked on the clock before they advance it.
func (s *Sim) Timers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
