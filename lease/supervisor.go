package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Supervisor bounds.
const (
	// RenewBatchMax bounds the leases renewed by one Apply.
	RenewBatchMax = 256
	// RenewPassesPerTickMax bounds the batches of one tick.
	RenewPassesPerTickMax = 256
)

// SupervisorOptions configure the renewal supervisor.
type SupervisorOptions struct {
	// Interval between ticks; clamped to at most TTL/3 (0 means TTL/3).
	Interval time.Duration
	// BatchMax bounds one renewal Apply (0 means RenewBatchMax).
	BatchMax int
	// OnLost is called for every lease found fenced.
	OnLost func(h *Held)
}

// Supervisor renews the active set. It has its own goroutine and in-flight
// state, independent of recovery, so a slow recovery pass can never starve a
// due renewal. Each tick walks the whole set once in bounded, round-robin
// batches and renews those whose confirmed lease has aged by at least half
// an interval, one Apply per batch.
type Supervisor struct {
	set  *ActiveSet
	hb   *Heartbeat
	opts SupervisorOptions

	stop chan struct{}
	done chan struct{}
	once sync.Once

	passes  atomic.Uint64
	renewed atomic.Uint64
	fenced  atomic.Uint64
	writes  atomic.Uint64
}

// ClampInterval returns the renewal interval in force for a TTL.
func ClampInterval(interval, ttl time.Duration) time.Duration {
	if interval <= 0 || interval > ttl/3 {
		return ttl / 3
	}
	return interval
}

// NewSupervisor returns a supervisor; Start runs it.
func NewSupervisor(set *ActiveSet, hb *Heartbeat, opts SupervisorOptions) *Supervisor {
	opts.Interval = ClampInterval(opts.Interval, hb.TTL)
	if opts.BatchMax <= 0 || opts.BatchMax > RenewBatchMax {
		opts.BatchMax = RenewBatchMax
	}
	if hb.Store != nil {
		// A renewal is one fence condition and one put.
		opts.BatchMax = min(opts.BatchMax, hb.Store.Limits().Fit(1, 1, 0, 0))
	}
	return &Supervisor{set: set, hb: hb, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
}

// Interval is the clamped tick interval.
func (s *Supervisor) Interval() time.Duration { return s.opts.Interval }

// Start runs the supervisor until Stop.
func (s *Supervisor) Start() {
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			select {
			case <-s.stop:
				return
			case <-s.hb.Clock.After(s.opts.Interval):
			}
			s.Tick(ctx)
		}
	}()
}

// Stop ends the supervisor and waits for it.
func (s *Supervisor) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Tick runs one round: ⌈Len/BatchMax⌉ passes (bounded).
func (s *Supervisor) Tick(ctx context.Context) {
	n := s.set.Len()
	passes := min((n+s.opts.BatchMax-1)/s.opts.BatchMax, RenewPassesPerTickMax)
	for i := 0; i < passes && ctx.Err() == nil; i++ {
		s.Pass(ctx)
	}
}

// Pass renews the next batch of the active set that is due; it returns the
// report of its one Apply.
func (s *Supervisor) Pass(ctx context.Context) RenewReport {
	batch := s.set.NextBatch(s.opts.BatchMax)
	due := batch[:0]
	agedBy := s.hb.TTL - s.opts.Interval/2
	now := s.hb.Clock.Now()
	for _, h := range batch {
		switch st := h.Status(); {
		case st == Lost:
			s.set.Remove(h.ID, h)
		case st == Publishing:
			// Its publishing write is in flight; its writer settles it.
		case st != Live || h.Until().Sub(now) <= agedBy:
			due = append(due, h)
		}
	}
	s.passes.Add(1)
	if len(due) == 0 {
		return RenewReport{}
	}
	rep := s.hb.Renew(ctx, due)
	s.renewed.Add(uint64(rep.Renewed))
	s.fenced.Add(uint64(rep.Fenced))
	s.writes.Add(uint64(rep.Attempts))
	for _, h := range due {
		if h.Status() == Lost {
			s.set.Remove(h.ID, h)
			if s.opts.OnLost != nil {
				s.opts.OnLost(h)
			}
		}
	}
	return rep
}

// SupervisorStats are cumulative counters.
type SupervisorStats struct {
	Passes  uint64 // batches examined
	Renewed uint64 // leases renewed
	Fenced  uint64 // leases found lost
	Writes  uint64 // renewal Applies attempted
}

// Stats returns cumulative counters.
func (s *Supervisor) Stats() SupervisorStats {
	return SupervisorStats{Passes: s.passes.Load(), Renewed: s.renewed.Load(), Fenced: s.fenced.Load(), Writes: s.writes.Load()}
}
