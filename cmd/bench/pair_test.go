package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// An interleaved pair runs its sides in alternating slices, A B B A …, each
// pairRounds times; a side's calls are numbered on across its slices (a
// keyed side never repeats a key); the pooled ratio is A's p50 over B's;
// and both sides are closed. Its sides do nothing, so each slice is 20 ms,
// not pairSliceMin: at 200 ms the 16 slices' busy loops took 7 s of CPU
// under -race (make test's go-race).
func TestInterleave_AlternatesTheSidesAndNumbersCallsOnAcrossSlices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := &Env{Opts: Options{JSON: true, Duration: 20 * time.Millisecond}, Ctx: ctx, suite: "test", slice: 20 * time.Millisecond}
	const workers = 2
	var mu sync.Mutex
	var order []string        // the side of each slice, in the order they ran
	seen := map[string]bool{} // side/worker/call
	closed := map[string]bool{}
	side := func(name string) *benchSide {
		return &benchSide{
			loop: Loop{Case: name, Concurrency: workers},
			op: func(_ context.Context, w int, i uint64) error {
				mu.Lock()
				defer mu.Unlock()
				if n := len(order); n == 0 || order[n-1] != name {
					order = append(order, name)
				}
				key := fmt.Sprintf("%s/%d/%d", name, w, i)
				if seen[key] {
					t.Errorf("%s worker %d: call %d twice", name, w, i)
				}
				seen[key] = true
				return nil
			},
			close: func() error {
				mu.Lock()
				closed[name] = true
				mu.Unlock()
				return nil
			},
		}
	}
	p, err := env.interleave(side("a"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for round := range pairRounds {
		if round%2 == 0 {
			want = append(want, "a", "b")
		} else {
			want = append(want, "b", "a")
		}
	}
	// Adjacent slices of one side (b b, a a) show as one run of it.
	var runs []string
	for _, s := range want {
		if n := len(runs); n == 0 || runs[n-1] != s {
			runs = append(runs, s)
		}
	}
	if len(order) != len(runs) {
		t.Fatalf("slices ran as %v, want %v", order, runs)
	}
	for i := range runs {
		if order[i] != runs[i] {
			t.Fatalf("slices ran as %v, want %v", order, runs)
		}
	}
	if len(p.Rounds) != pairRounds || p.A <= 0 || p.B <= 0 || math.Abs(p.Ratio()-p.A/p.B) > 1e-12 {
		t.Fatalf("pair %+v: want %d rounds and the pooled ratio A/B", p, pairRounds)
	}
	if !closed["a"] || !closed["b"] {
		t.Fatalf("closed %v, want both sides", closed)
	}
}

// The pooled ratio is the sides' totals set against each other; the rounds
// only give its spread.
func TestPairResult_ThePooledRatioAndTheRoundsSpread(t *testing.T) {
	p := pairResult{A: 150, B: 120, Rounds: []float64{1.4, 0.9, 1.1}}
	if got := p.Ratio(); got != 1.25 {
		t.Fatalf("ratio %v, want 1.25", got)
	}
	if lo, hi := p.Spread(); lo != 0.9 || hi != 1.4 {
		t.Fatalf("spread %v..%v, want 0.9..1.4", lo, hi)
	}
	var r Result
	p.set(&r, "x")
	if r.Extra["x"] != 1.25 || r.Extra["x_lo"] != 0.9 || r.Extra["x_hi"] != 1.4 {
		t.Fatalf("fields %v", r.Extra)
	}
	if (pairResult{A: 1}).Ratio() != 0 {
		t.Fatal("a pair whose B measured nothing has a ratio")
	}
}

// A pair's slices are short: a quarter of -duration, within bounds.
func TestPairSlice_AQuarterOfTheDurationWithinBounds(t *testing.T) {
	for _, c := range []struct{ d, want time.Duration }{
		{20 * time.Millisecond, pairSliceMin},
		{2 * time.Second, 500 * time.Millisecond},
		{time.Minute, pairSliceMax},
	} {
		if got := pairSlice(c.d); got != c.want {
			t.Errorf("pairSlice(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}
