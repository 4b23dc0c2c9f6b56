package receipt

import (
	"context"
	"testing"
	"time"
)

// waiters is how many wait in k's queue now.
func (d *docLatches) waiters(k string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held[k])
}

// awaitWaiters polls until n wait for k (a deadline, never a sleep to
// wait for something).
func awaitWaiters(t *testing.T, d *docLatches, k string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for d.waiters(k) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on %q, want %d", d.waiters(k), k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func never() <-chan time.Time { return nil }

// TestDocLatches_FIFO: a latch passes to its waiters in the order they
// came, one at a time — no waiter starves behind later ones.
func TestDocLatches_FIFO(t *testing.T) {
	var d docLatches
	ctx := context.Background()
	if !d.lock(ctx, []string{"k"}, never) {
		t.Fatal("a free latch was not taken")
	}
	got := make(chan int, 3)
	for i := range 3 {
		go func() {
			if d.lock(ctx, []string{"k"}, never) {
				got <- i
			}
		}()
		awaitWaiters(t, &d, "k", i+1)
	}
	for want := range 3 {
		select {
		case g := <-got:
			t.Fatalf("waiter %d got the latch while it was held", g)
		default:
		}
		d.unlock([]string{"k"})
		if g := <-got; g != want {
			t.Fatalf("waiter %d got the latch, want %d (FIFO)", g, want)
		}
	}
	d.unlock([]string{"k"})
	if len(d.held) != 0 || d.waited.Load() != 3 {
		t.Fatalf("held %v, waited %d; want nothing held, 3 waits", d.held, d.waited.Load())
	}
}

// TestDocLatches_TimeoutHoldsNothing: a wait that runs out leaves its
// queue and gives back the latches it took on the way (keys taken in
// order), so the holder's unlock frees the documents entirely.
func TestDocLatches_TimeoutHoldsNothing(t *testing.T) {
	var d docLatches
	ctx := context.Background()
	if !d.lock(ctx, []string{"b"}, never) {
		t.Fatal("a free latch was not taken")
	}
	fire := make(chan time.Time)
	done := make(chan bool)
	go func() { done <- d.lock(ctx, []string{"a", "b"}, func() <-chan time.Time { return fire }) }()
	awaitWaiters(t, &d, "b", 1)
	close(fire)
	if <-done {
		t.Fatal("a wait that ran out took the latches")
	}
	d.unlock([]string{"b"})
	if len(d.held) != 0 {
		t.Fatalf("held after the timeout and the holder's unlock: %v", d.held)
	}
	if !d.lock(ctx, []string{"a", "b"}, firedAlready) {
		t.Fatal("free latches were not taken at once")
	}
}

// TestDocLatches_OrderedKeysNoDeadlock: batches latching overlapping
// sets of documents, each in key order, all finish.
func TestDocLatches_OrderedKeysNoDeadlock(t *testing.T) {
	var d docLatches
	ctx := context.Background()
	sets := [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}, {"a", "b", "c"}}
	done := make(chan struct{})
	for _, keys := range sets {
		go func() {
			for range 200 {
				if !d.lock(ctx, keys, never) {
					panic("lock without a timeout failed")
				}
				d.unlock(keys)
			}
			done <- struct{}{}
		}()
	}
	for range sets {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("latches deadlocked")
		}
	}
}
