package lease_test

import (
	"testing"
	"time"

	"github.com/idemdb/idem/internal/testsupport"
	"github.com/idemdb/idem/lease"
)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestSim_TimeMovesOnlyWhenAdvanced(t *testing.T) {
	c := lease.NewSim(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v, want %v", c.Now(), t0)
	}
	c.Advance(1500 * time.Millisecond)
	if want := t0.Add(1500 * time.Millisecond); !c.Now().Equal(want) {
		t.Fatalf("Now = %v, want %v", c.Now(), want)
	}
	c.Advance(0)
	if want := t0.Add(1500 * time.Millisecond); !c.Now().Equal(want) {
		t.Fatalf("Advance(0) moved the clock to %v", c.Now())
	}
}

func TestSim_TimerFiresExactlyAtItsDeadlineNotBefore(t *testing.T) {
	c := lease.NewSim(t0)
	ch := c.After(3 * time.Second)
	if c.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1", c.Timers())
	}
	c.Advance(2999 * time.Millisecond)
	if _, ok := fired(ch); ok {
		t.Fatal("timer fired before its deadline")
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1 (still pending)", c.Timers())
	}
	c.Advance(time.Millisecond)
	v, ok := fired(ch)
	if !ok {
		t.Fatal("timer did not fire at its deadline")
	}
	if !v.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("timer delivered %v, want the clock's time %v", v, t0.Add(3*time.Second))
	}
	if c.Timers() != 0 {
		t.Fatalf("Timers = %d after firing, want 0", c.Timers())
	}
}

func TestSim_NonPositiveDurationFiresAtOnceWithoutATimer(t *testing.T) {
	c := lease.NewSim(t0)
	for _, d := range []time.Duration{0, -time.Second} {
		v, ok := fired(c.After(d))
		if !ok || !v.Equal(t0) {
			t.Fatalf("After(%v) = %v %v, want immediate %v", d, v, ok, t0)
		}
	}
	if c.Timers() != 0 {
		t.Fatalf("Timers = %d, want 0", c.Timers())
	}
}

func TestSim_OneAdvanceFiresEveryDueTimerAndKeepsTheRest(t *testing.T) {
	c := lease.NewSim(t0)
	a := c.After(1 * time.Second)
	b := c.After(5 * time.Second)
	d := c.After(2 * time.Second)
	late := c.After(10 * time.Second)
	c.Advance(5 * time.Second)
	for name, ch := range map[string]<-chan time.Time{"1s": a, "5s": b, "2s": d} {
		v, ok := fired(ch)
		if !ok {
			t.Fatalf("%s timer did not fire", name)
		}
		// Every timer fired by one Advance receives the clock's new time.
		if !v.Equal(t0.Add(5 * time.Second)) {
			t.Fatalf("%s timer delivered %v", name, v)
		}
	}
	if _, ok := fired(late); ok {
		t.Fatal("10s timer fired at 5s")
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1", c.Timers())
	}
	c.Advance(5 * time.Second)
	if _, ok := fired(late); !ok {
		t.Fatal("10s timer did not fire at 10s")
	}
}

func TestSim_ParkedGoroutineWakesOnlyOnAdvance(t *testing.T) {
	c := lease.NewSim(t0)
	done := make(chan time.Time)
	go func() { done <- <-c.After(time.Minute) }()
	testsupport.Poll(t, "the goroutine to park on the clock", testsupport.Patience, func() bool { return c.Timers() == 1 })
	select {
	case <-done:
		t.Fatal("woke without Advance")
	default:
	}
	c.Advance(time.Minute)
	if v := <-done; !v.Equal(t0.Add(time.Minute)) {
		t.Fatalf("woke with %v", v)
	}
}

func TestReal_NowAndAfter(t *testing.T) {
	var c lease.Clock = lease.Real{}
	before := time.Now()
	if c.Now().Before(before) {
		t.Fatal("Real.Now went backwards")
	}
	<-c.After(0)
}
