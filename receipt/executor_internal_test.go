package receipt

import (
	"testing"
	"time"
)

// TestDrainTime_IsAverageHoldTimesQueueOverSlots: the executor's drain
// time is the EWMA of slot hold times × (slots in use + requests waiting)
// / slots, within DrainRetryAfterMin and DrainRetryAfterMax.
func TestDrainTime_IsAverageHoldTimesQueueOverSlots(t *testing.T) {
	l := &executor{slots: make(chan struct{}, 4)}
	if got := l.drainTime(); got != DrainRetryAfterMin {
		t.Fatalf("nothing measured: %v, want the minimum %v", got, DrainRetryAfterMin)
	}
	l.drain.held(8 * time.Second) // the first sample is the average
	l.drain.held(16 * time.Second)
	if got := time.Duration(l.drain.holdNanos.Load()); got != 9*time.Second {
		t.Fatalf("average %v, want 9s (8s + (16s-8s)/8)", got)
	}
	for range 4 {
		l.slots <- struct{}{}
	}
	l.drain.waiting.Add(2)
	if got, want := l.drainTime(), 9*time.Second*6/4; got != want {
		t.Fatalf("drain %v, want %v: 9s × (4 busy + 2 waiting) / 4 slots", got, want)
	}
	l.drain.waiting.Add(100)
	if got := l.drainTime(); got != DrainRetryAfterMax {
		t.Fatalf("a long queue: %v, want the cap %v", got, DrainRetryAfterMax)
	}
}
