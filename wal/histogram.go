package wal

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Histogram counts observations into fixed buckets without a lock: an
// observation is one atomic add to its bucket and one to the sum, so the
// WAL writer (and the engine's checkpointer) can record on their latency
// paths. It has no metrics-library dependency; a Snapshot carries what an
// exporter needs (api/metrics.go turns it into a Prometheus histogram).
type Histogram struct {
	bounds []int64         // inclusive upper bounds, strictly ascending
	counts []atomic.Uint64 // counts[i]: values in (bounds[i-1], bounds[i]]; counts[len(bounds)]: above every bound
	sum    atomic.Int64
}

// NewHistogram returns a histogram with the given inclusive upper bounds,
// which must be strictly ascending (a programming error panics). Values
// above the last bound are counted in an implicit +Inf bucket.
func NewHistogram(bounds []int64) *Histogram {
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] {
			panic(fmt.Sprintf("wal: histogram bounds not ascending at %d: %v", i, bounds))
		}
	}
	return &Histogram{bounds: append([]int64(nil), bounds...), counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v int64) {
	// A linear scan: the histograms here have under 20 bounds, and most
	// values land in the first few buckets.
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// ObserveDuration records a duration in nanoseconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(int64(d)) }

// HistogramSnapshot is a histogram's cumulative state, in the shape of a
// Prometheus histogram: Cumulative[i] counts the values ≤ Bounds[i], Count
// every value (the +Inf bucket), Sum their total. Its unit is the
// histogram's: nanoseconds for the duration histograms of Stats.
type HistogramSnapshot struct {
	Bounds     []int64
	Cumulative []uint64
	Count      uint64
	Sum        int64
}

// Snapshot reads the histogram. The buckets are read one by one while
// observations may go on, so a snapshot is not an instant; but Count is the
// total of the buckets read, so the buckets and Count always agree (Sum may
// include an observation the buckets do not yet, or miss one they do).
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{
		Bounds:     append([]int64(nil), h.bounds...),
		Cumulative: make([]uint64, len(h.bounds)),
	}
	for i := range h.counts {
		s.Count += h.counts[i].Load()
		if i < len(h.bounds) {
			s.Cumulative[i] = s.Count
		}
	}
	s.Sum = h.sum.Load()
	return s
}

// DurationBounds converts bucket bounds given as durations to a
// histogram's nanoseconds.
func DurationBounds(ds ...time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = int64(d)
	}
	return out
}
