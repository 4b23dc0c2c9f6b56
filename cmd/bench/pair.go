package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Interleaved pairs: two cases' p50 latencies measured in alternating
// slices of the same minutes.
//
// This VM's speed drifts by a third and more within minutes: the
// fsync-serial floor read 256 µs in one run and 133 µs in the next. A ratio
// of two cases measured one after the other, a minute apart, carries that
// drift whole. A pair runs both cases side by side on stores kept open,
// alternating slices of pairSlice (ABBA order, so neither side always
// follows the other): both sides sample the same minutes, each for
// pairRounds slices. The aim is judged by the pooled ratio — the p50 of all
// of one side's latencies over the other's — and the rounds' own ratios
// are reported beside it as its spread. The cases' own rows, and the ratio
// of those, stay as they were. (Ratios of rates were measured this way too
// and came out no steadier than their rows': a rate slice also takes the
// other store's checkpoints and new segments. docs/benchmarks.md.)
const (
	pairRounds   = 8
	pairSliceMin = 200 * time.Millisecond
	pairSliceMax = time.Second
	pairWarmup   = 50 * time.Millisecond
)

// pairSlice is each side's measured window in a round: a quarter of
// -duration, within [pairSliceMin, pairSliceMax].
func pairSlice(d time.Duration) time.Duration {
	return min(max(d/4, pairSliceMin), pairSliceMax)
}

// benchSide is a case ready to run, on a store it keeps open until close.
type benchSide struct {
	loop  Loop
	op    Op
	close func() error
}

// p50us is a measurement's median latency in microseconds.
func p50us(m Measured) float64 { return float64(m.Hist.ValueAtQuantile(50)) / 1e3 }

// pairResult is an interleaved ratio of A's p50 over B's.
type pairResult struct {
	// A and B are each side's p50 over all its slices, in µs.
	A, B float64
	// Rounds are the ratios of single rounds (the spread).
	Rounds []float64
}

// Ratio is the pooled ratio, A over B: what the aim is judged by.
func (p pairResult) Ratio() float64 {
	if p.B <= 0 {
		return 0
	}
	return p.A / p.B
}

// Spread is the lowest and highest round.
func (p pairResult) Spread() (lo, hi float64) {
	if len(p.Rounds) == 0 {
		return 0, 0
	}
	return slices.Min(p.Rounds), slices.Max(p.Rounds)
}

// describe says the ratio and how it was measured, for a target's Got.
func (p pairResult) describe(unit string) string {
	lo, hi := p.Spread()
	return fmt.Sprintf("%.3f x interleaved (%.0f / %.0f %s over %d alternating slices each; single rounds %.3f..%.3f)", p.Ratio(), p.A, p.B, unit, len(p.Rounds), lo, hi)
}

// set records the pair on r under field (the pooled ratio) and the
// rounds' spread under field_lo and field_hi.
func (p pairResult) set(r *Result, field string) {
	lo, hi := p.Spread()
	r.Set(field, round(p.Ratio(), 3))
	r.Set(field+"_lo", round(lo, 3))
	r.Set(field+"_hi", round(hi, 3))
}

// interleave measures a's p50 against b's in alternating slices and
// closes both.
func (e *Env) interleave(a, b *benchSide) (pairResult, error) {
	defer b.close()
	defer a.close()
	slice := pairSlice(e.Opts.Duration)
	if e.slice > 0 {
		slice = e.slice
	}
	sides := []*benchSide{a, b}
	for _, s := range sides {
		s.loop.Window, s.loop.Warmup = slice, pairWarmup
		s.op = freshCalls(s.op, s.loop.Concurrency)
	}
	var res pairResult
	all := [2]Measured{{Hist: newHist()}, {Hist: newHist()}}
	for round := range pairRounds {
		var got [2]Measured
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			m, err := e.Loop(sides[i].loop, sides[i].op)
			if err != nil {
				return pairResult{}, err
			}
			got[i] = m
			all[i].Hist.Merge(m.Hist)
		}
		if bm := p50us(got[1]); bm > 0 {
			res.Rounds = append(res.Rounds, p50us(got[0])/bm)
		}
	}
	res.A, res.B = p50us(all[0]), p50us(all[1])
	return res, nil
}

// freshCalls numbers each worker's calls on from where its last loop left
// off, so that a case run in several slices never repeats a call (a keyed
// case would replay its own keys). Worker w's counter is touched only by
// worker w's goroutine of each loop, and loops run one after the other.
func freshCalls(op Op, workers int) Op {
	next := make([]uint64, workers)
	return func(ctx context.Context, w int, _ uint64) error {
		i := next[w]
		next[w]++
		return op(ctx, w, i)
	}
}
