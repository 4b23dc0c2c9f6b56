package receipt

import (
	"fmt"
	"testing"
	"time"
)

// TestCauseLog_OneLinePerCausePerInterval walks a script of occurrences:
// the first of a cause is logged at once, the next ones at most once per
// interval with the count since the last line, each cause on its own, and
// causes beyond the bound together.
func TestCauseLog_OneLinePerCausePerInterval(t *testing.T) {
	type step struct {
		at     time.Duration // since dt0
		cause  string
		wantAs string // "" : no line
		wantN  uint64
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"first occurrence logs at once, repeats wait for the interval", 4, []step{
			{0, "load/failed", "load/failed", 1},
			{time.Second, "load/failed", "", 0},
			{30 * time.Second, "load/failed", "", 0},
			{time.Minute, "load/failed", "load/failed", 3},
			{time.Minute + time.Second, "load/failed", "", 0},
			{3 * time.Minute, "load/failed", "load/failed", 2},
		}},
		{"causes are sampled apart", 4, []step{
			{0, "load/failed", "load/failed", 1},
			{time.Second, "hold/ambiguous", "hold/ambiguous", 1},
			{2 * time.Second, "load/failed", "", 0},
			{time.Minute, "hold/ambiguous", "", 0},
			{time.Minute + time.Second, "hold/ambiguous", "hold/ambiguous", 2},
			{time.Minute + time.Second, "load/failed", "load/failed", 2},
		}},
		{"causes beyond the bound are counted together", 2, []step{
			{0, "a", "a", 1},
			{0, "b", "b", 1},
			{0, "c", causeOther, 1},
			{time.Second, "d", "", 0},
			{time.Second, "a", "", 0},
			{time.Minute, "e", causeOther, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newCauseLog(time.Minute, tc.max)
			for i, s := range tc.steps {
				as, n, ok := l.note(dt0.Add(s.at), s.cause)
				got := fmt.Sprintf("%v %s %d", ok, as, n)
				want := fmt.Sprintf("%v %s %d", s.wantAs != "", s.wantAs, s.wantN)
				if !ok {
					got = "false"
				}
				if s.wantAs == "" {
					want = "false"
				}
				if got != want {
					t.Errorf("step %d (%v %s): got %s, want %s", i, s.at, s.cause, got, want)
				}
			}
			if len(l.causes) > tc.max+1 {
				t.Errorf("%d causes tracked, bound %d (+ %s)", len(l.causes), tc.max, causeOther)
			}
		})
	}
}
