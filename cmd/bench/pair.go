package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Interleaved pairs: the two cases of a ratio measured in alternating
// slices of the same minutes.
//
// This VM's speed drifts by a third and more within minutes: the
// fsync-serial floor read 256 µs in one run and 133 µs in the next, and
// keyed@64 over fast@64 came out 0.61 and 0.81 in two runs of the same code
// back to back. A ratio of two cases measured one after the other, a minute
// apart, carries that drift whole. A pair runs both cases side by side on
// stores kept open, alternating slices of pairSlice (ABBA order, so neither
// side always follows the other): both sides sample the same minutes, each
// for pairRounds slices. The aim is judged by the pooled ratio — each
// side's calls over all its slices, or the p50 of all its latencies — and
// the rounds' own ratios are reported beside it as its spread. (A round's
// ratio alone is noisy: a store checkpoints or takes a new log segment
// every second or so under these loads, and half a second holds one or
// none.) The cases' own rows, and the ratio of those, stay as they were.
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

// pairMetric is what a pair compares: a rate, or the p50 latency.
type pairMetric int

const (
	pairRate pairMetric = iota
	pairP50
)

func (m pairMetric) of(x Measured) float64 {
	if m == pairP50 {
		return float64(x.Hist.ValueAtQuantile(50)) / 1e3
	}
	if x.Seconds <= 0 {
		return 0
	}
	return float64(x.Items) / x.Seconds
}

// pairResult is an interleaved ratio of A's metric over B's.
type pairResult struct {
	// A and B are each side's metric over all its slices.
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

// interleave measures a against b in alternating slices and closes both.
func (e *Env) interleave(a, b *benchSide, metric pairMetric) (pairResult, error) {
	defer b.close()
	defer a.close()
	slice := pairSlice(e.Opts.Duration)
	sides := []*benchSide{a, b}
	for _, s := range sides {
		s.loop.Window, s.loop.Warmup = slice, pairWarmup
		s.op = freshCalls(s.op, s.loop.Concurrency)
	}
	var res pairResult
	var sum [2]Measured
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
			sum[i] = sum[i].add(m)
		}
		if bm := metric.of(got[1]); bm > 0 {
			res.Rounds = append(res.Rounds, metric.of(got[0])/bm)
		}
	}
	res.A, res.B = metric.of(sum[0]), metric.of(sum[1])
	return res, nil
}

// add merges two measurements of one case: their calls, time and
// latencies.
func (m Measured) add(o Measured) Measured {
	if m.Hist == nil {
		m.Hist = newHist()
	}
	m.Calls += o.Calls
	m.Items += o.Items
	m.Seconds += o.Seconds
	if o.Hist != nil {
		m.Hist.Merge(o.Hist)
	}
	return m
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
