package receipt

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemdb/idem/lease"
)

// TestFlight_EveryWaiterIsReleasedWhenTheFlightEnds: a flight's channel is
// made by its first waiter, so the end must release waiters that came
// before it and let through at once those that come after it; a duplicate
// begun while it is in flight joins it, and once it ended the id is free.
func TestFlight_EveryWaiterIsReleasedWhenTheFlightEnds(t *testing.T) {
	l := &executor{core: &core{clock: lease.Real{}}}
	f, mine := l.beginFlight("tx")
	if !mine {
		t.Fatal("first beginFlight is not mine")
	}
	if g, mine := l.beginFlight("tx"); mine || g != f {
		t.Fatalf("a duplicate got its own flight (mine=%v)", mine)
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	released := make(chan bool, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			released <- l.waitFlight(context.Background(), f, deadline)
		}()
	}
	// Whether the waiters got to doneOf before the end or not, all are
	// released by it: the end closes a channel a waiter made, and a
	// channel made after it is made closed.
	l.endFlight("tx", f)
	wg.Wait()
	close(released)
	for ok := range released {
		if !ok {
			t.Fatal("a waiter was not released by the flight's end")
		}
	}
	if !l.waitFlight(context.Background(), f, time.Now().Add(time.Second)) {
		t.Fatal("a waiter after the end was not let through")
	}
	if g, mine := l.beginFlight("tx"); !mine || g == f {
		t.Fatal("the id is still taken after its flight ended")
	}
}
