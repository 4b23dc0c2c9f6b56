package harness

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing/synctest"
	"time"
)

// sim is a scenario's scheduler: the one goroutine that decides what the
// system under test does next, so that a seed replays its run, not only its
// fault schedule.
//
// A scenario runs inside a testing/synctest bubble: its time is fake, it
// moves only when every goroutine of the bubble is durably blocked, and
// synctest.Wait tells the scheduler when that is. Nothing of the nodes runs
// unless the scheduler lets it:
//
//   - every store call of a node waits at a gate (gate) until the scheduler
//     serves it — one call at a time, each after a latency drawn from the
//     seed, so the interleaving of concurrent requests is the seed's;
//   - every timer of the nodes' clock (nodeClock) is fired by the scheduler,
//     in deadline order;
//   - clients start one after another, in an order drawn from the seed
//     (scenario.step), and the scheduler drives the bubble between them.
//
// Between two decisions exactly one event runs — a store call, or a timer's
// goroutine — until everything blocks again; then the scheduler serves the
// event that is due first (ties broken by the seed, over events sorted by
// a label that names the node and what it asks for). When nothing is due,
// time jumps to the next deadline. So the same seed takes the same
// decisions (Run seeds crypto/rand too: table IDs are in the keys, and so
// in the labels). A run that is not replayed exactly is one where two
// goroutines woke at once and raced on memory (a flight's end waking its
// waiters), or two events carried the same label; TestReplay_SeedReplaysRun
// measures how often that changes anything.
type sim struct {
	rng *rand.Rand

	mu     sync.Mutex
	calls  []*call  // store calls at the gate
	timers []*timer // pending timers of the nodes' clock
	seq    uint64   // arrival order (the last tie-breaker)
	drain  bool     // tearing down: the gate lets everything through
	held   bool     // the nodes' timers wait (hold)
	served int64    // decisions taken
}

// call is one store call waiting at the gate.
type call struct {
	label string
	seq   uint64
	due   time.Time // when it is served (set at the first decision after it arrived)
	timed bool
	ch    chan struct{}
}

// timer is one pending After of the nodes' clock.
type timer struct {
	label string
	seq   uint64
	at    time.Time
	ch    chan time.Time
}

// Store-call latency: each call waits latencyStepsMax steps of latencyStep
// at most, drawn from the seed; short next to every timer of the system, it
// only orders concurrent calls.
const (
	latencyStep     = 100 * time.Microsecond
	latencyStepsMax = 5
)

func newSim(seed uint64) *sim { return &sim{rng: rand.New(rand.NewPCG(seed, 0x5c4ed))} }

// gate blocks a store call until the scheduler serves it. It fails with
// ctx's error or errNodeDown (dead closed) if those come first.
func (s *sim) gate(ctx context.Context, label string, dead <-chan struct{}) error {
	s.mu.Lock()
	if s.drain {
		s.mu.Unlock()
		return nil
	}
	c := &call{label: label, seq: s.seq, ch: make(chan struct{})}
	s.seq++
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	select {
	case <-c.ch:
		return nil
	case <-ctx.Done():
		if s.withdraw(c) {
			return ctx.Err()
		}
	case <-dead:
		if s.withdraw(c) {
			return errNodeDown
		}
	}
	return nil // served meanwhile
}

// withdraw removes c from the gate; false if it was served already.
func (s *sim) withdraw(c *call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.calls {
		if x == c {
			s.calls = slices.Delete(s.calls, i, i+1)
			return true
		}
	}
	return false
}

// after registers a timer for the nodes' clock.
func (s *sim) after(label string, d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 || s.drain {
		ch <- now
		return ch
	}
	s.timers = append(s.timers, &timer{label: label, seq: s.seq, at: now.Add(d), ch: ch})
	s.seq++
	return ch
}

// next serves the one event that is due first now; false if none is.
func (s *sim) next() bool {
	now := time.Now()
	s.mu.Lock()
	// Calls that arrived since the last decision get their latency, in
	// label order: goroutines woken together arrive in any order.
	var fresh []*call
	for _, c := range s.calls {
		if !c.timed {
			fresh = append(fresh, c)
		}
	}
	slices.SortFunc(fresh, func(a, b *call) int { return cmp.Or(cmp.Compare(a.label, b.label), cmp.Compare(a.seq, b.seq)) })
	for _, c := range fresh {
		c.due, c.timed = now.Add(time.Duration(s.rng.IntN(latencyStepsMax))*latencyStep), true
	}
	type event struct {
		at    time.Time
		label string
		seq   uint64
		call  int // index in calls, or -1
		timer int // index in timers, or -1
	}
	var due []event
	for i, c := range s.calls {
		if !c.due.After(now) {
			due = append(due, event{c.due, c.label, c.seq, i, -1})
		}
	}
	for i, t := range s.timers {
		if !s.held && !t.at.After(now) {
			due = append(due, event{t.at, t.label, t.seq, -1, i})
		}
	}
	if len(due) == 0 {
		s.mu.Unlock()
		return false
	}
	slices.SortFunc(due, func(a, b event) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.label, b.label), cmp.Compare(a.seq, b.seq))
	})
	tied := 1
	for tied < len(due) && due[tied].at.Equal(due[0].at) {
		tied++
	}
	e := due[s.rng.IntN(tied)]
	s.served++
	if e.call >= 0 {
		c := s.calls[e.call]
		s.calls = slices.Delete(s.calls, e.call, e.call+1)
		s.mu.Unlock()
		close(c.ch)
		return true
	}
	t := s.timers[e.timer]
	s.timers = slices.Delete(s.timers, e.timer, e.timer+1)
	s.mu.Unlock()
	t.ch <- now
	return true
}

// nextAt is the earliest deadline of a waiting event.
func (s *sim) nextAt() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at time.Time
	ok := false
	for _, c := range s.calls {
		if c.timed && (!ok || c.due.Before(at)) {
			at, ok = c.due, true
		}
	}
	for _, t := range s.timers {
		if !s.held && (!ok || t.at.Before(at)) {
			at, ok = t.at, true
		}
	}
	return at, ok
}

// hold keeps the nodes' timers from firing (on) or lets them fire again,
// those that fell due meanwhile at once: while held, only store calls are
// served, so an actor the harness runs with nothing else in flight
// (settle) is the only one that acts — the store after it shows what it
// did and nothing else.
func (s *sim) hold(on bool) {
	s.mu.Lock()
	s.held = on
	s.mu.Unlock()
}

// run drives the bubble until done reports true (checked whenever
// everything is blocked) or limit of simulated time has passed; false
// means the limit. A nil done runs for exactly limit.
func (s *sim) run(done func() bool, limit time.Duration) bool {
	end := time.Now().Add(limit)
	for {
		synctest.Wait()
		if done != nil && done() {
			return true
		}
		if s.next() {
			continue
		}
		now := time.Now()
		at, ok := s.nextAt()
		if !ok || at.After(end) {
			if !now.Before(end) {
				return done == nil
			}
			at = end
		}
		time.Sleep(at.Sub(now)) // everything else is blocked: time jumps
	}
}

// idle reports whether no store call is waiting at the gate.
func (s *sim) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) == 0
}

// settle serves the store calls in flight (and the timers that fall due
// meanwhile) until none is left, within limit.
func (s *sim) settle(limit time.Duration) bool { return s.run(s.idle, limit) }

// teardown lets every waiting call and timer through, and every later one
// at once: the end of the run, when nothing is scheduled any more.
func (s *sim) teardown() {
	s.mu.Lock()
	s.drain = true
	calls, timers := s.calls, s.timers
	s.calls, s.timers = nil, nil
	s.mu.Unlock()
	for _, c := range calls {
		close(c.ch)
	}
	now := time.Now()
	for _, t := range timers {
		t.ch <- now
	}
}

// nodeClock is a node's lease.Clock: the bubble's time, with timers the
// scheduler fires.
type nodeClock struct {
	s    *sim
	node string
}

func (c nodeClock) Now() time.Time { return time.Now() }

func (c nodeClock) After(d time.Duration) <-chan time.Time {
	return c.s.after(c.node+"/after/"+d.String(), d)
}

// actorKey labels a context with who acts (a client, the harness): the
// gate's labels tell apart identical calls of different actors.
type actorKey struct{}

func withActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

func actorOf(ctx context.Context) string {
	name, _ := ctx.Value(actorKey{}).(string)
	return name
}
