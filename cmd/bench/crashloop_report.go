package main

// The crashloop suite's report: time to healthy by kill, sizes on disk.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// crashResults turns the starts and the load's counters into the report.
func crashResults(o CrashloopOptions, first crashStart, starts []crashStart, load *crashLoad,
	loadSeconds float64, capped bool, portChanges int, logs *crashLogs) []*Result {
	n := len(starts)
	if n == 0 {
		return []*Result{load.result(loadSeconds, portChanges, logs)}
	}
	var out []*Result
	at := func(s crashStart, name string) *Result {
		r := &Result{Case: name, Concurrency: o.Clients, Ops: 1, Seconds: s.healthy.Seconds(),
			P50us: us(s.healthy), P99us: us(s.healthy), NoFloorRatio: true}
		r.Set("kill", s.kill)
		r.Set("healthy_ms", round(ms(s.healthy), 1))
		r.Set("listen_ms", round(ms(s.listen), 1))
		r.Set("uptime_before_kill_ms", round(ms(s.uptime), 0))
		r.Set("wal_bytes", s.walBytes)
		r.Set("data_bytes", s.dataBytes)
		r.Set("checkpoint_bytes", s.ckptBytes)
		r.Set("ms_per_loaded_mb", round(s.msPerMB(), 3))
		return r
	}
	healthy, perMB := make([]float64, n), make([]float64, n)
	for i, s := range starts {
		healthy[i], perMB[i] = ms(s.healthy), s.msPerMB()
	}
	r1 := at(starts[0], "healthy-after-kill-1")
	r1.Set("first_start_ms", round(ms(first.healthy), 1))
	out = append(out, r1)
	if n > 1 {
		rn := at(starts[n-1], "healthy-after-kill-"+strconv.Itoa(n))
		rn.Set("over_kill_1", round(healthy[n-1]/healthy[0], 3))
		out = append(out, rn)
	}

	m := min(crashMedianOf, n)
	medFirst, medLast := median(healthy[:m]), median(healthy[n-m:])
	ratio := &Result{Case: "healthy-ratio", Concurrency: o.Clients, Ops: uint64(n), NoFloorRatio: true}
	var total time.Duration
	for _, s := range starts {
		total += s.healthy
	}
	ratio.Seconds = total.Seconds()
	ratio.P50us = median(healthy) * 1e3
	ratio.P90us = quantile(healthy, 0.90) * 1e3
	ratio.P99us = quantile(healthy, 0.99) * 1e3
	ratio.P999us = quantile(healthy, 0.999) * 1e3
	ratio.Set("kills", n)
	ratio.Set("first_ms", round(healthy[0], 1))
	ratio.Set("last_ms", round(healthy[n-1], 1))
	ratio.Set("ratio", round(healthy[n-1]/healthy[0], 3))
	ratio.Set("median_first10_ms", round(medFirst, 1))
	ratio.Set("median_last10_ms", round(medLast, 1))
	ratio.Set("median_ratio", round(medLast/medFirst, 3))
	// The store grows during the run (every batch inserts new documents),
	// so the checkpoint an open loads grows too: per MB loaded, the time
	// to healthy separates that from growth caused by the crashes.
	pmFirst, pmLast := median(perMB[:m]), median(perMB[n-m:])
	ratio.Set("median_first10_ms_per_loaded_mb", round(pmFirst, 3))
	ratio.Set("median_last10_ms_per_loaded_mb", round(pmLast, 3))
	if pmFirst > 0 {
		ratio.Set("per_loaded_mb_ratio", round(pmLast/pmFirst, 3))
	}
	ratio.Set("max_ms", round(slices.Max(healthy), 1))
	ratio.Set("slope_ms_per_kill", round(slope(healthy), 3))
	ratio.Set("median_ms_by_tenth", tenths(starts, func(ss []crashStart) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = ms(s.healthy)
		}
		return median(v)
	}, 0))
	if n < 2*crashMedianOf {
		ratio.Set("note", fmt.Sprintf("%d kills: the first and last %d overlap", n, m))
	}
	if capped {
		ratio.Set("capped", fmt.Sprintf("-crashloop-max %s reached after %d of %d kills", o.MaxWall, n, o.Kills))
	}
	if n > 1 {
		x := medLast / medFirst
		ratio.Targets = append(ratio.Targets, Target{
			Want:  fmt.Sprintf("time to healthy does not grow with kills: median of the last %d <= %.0fx the first %d (issue 11)", m, crashBoundRatio, m),
			Got:   fmt.Sprintf("%.2fx (%.0f / %.0f ms; kill %d %.0f ms, kill 1 %.0f ms: %.2fx)", x, medLast, medFirst, n, healthy[n-1], healthy[0], healthy[n-1]/healthy[0]),
			Met:   x <= crashBoundRatio,
			Score: atMost(x, crashBoundRatio),
		})
	}
	out = append(out, ratio)

	disk := &Result{Case: "disk", Concurrency: o.Clients, Ops: uint64(n), NoFloorRatio: true}
	var maxWAL, maxData, maxCkpt int64
	maxCkpts := 0
	for _, s := range starts {
		maxWAL, maxData, maxCkpt = max(maxWAL, s.walBytes), max(maxData, s.dataBytes), max(maxCkpt, s.ckptBytes)
		maxCkpts = max(maxCkpts, s.ckpts)
	}
	last := starts[n-1]
	disk.Set("max_wal_bytes", maxWAL)
	disk.Set("max_data_bytes", maxData)
	disk.Set("max_checkpoint_bytes", maxCkpt)
	disk.Set("max_checkpoint_files", maxCkpts)
	// Checkpoints that completed during the loop, seen as a change of the
	// newest checkpoint from one restart to the next (a lower bound: two in
	// one process's life count once), and the last kill after which one
	// had: a loop whose checkpoints never finish between kills has a log
	// that only grows.
	completed, lastAt, prev, tmps := 0, 0, first.newest, 0
	for _, s := range starts {
		if s.newest != prev {
			completed, lastAt, prev = completed+1, s.kill, s.newest
		}
		tmps = max(tmps, s.ckptTmps)
	}
	disk.Set("checkpoints_completed", completed)
	disk.Set("last_new_checkpoint_at_kill", lastAt)
	disk.Set("max_checkpoint_tmp_files", tmps)
	disk.Set("last_wal_bytes", last.walBytes)
	disk.Set("last_data_bytes", last.dataBytes)
	maxOf := func(f func(crashStart) int64) func([]crashStart) float64 {
		return func(ss []crashStart) float64 {
			var m int64
			for _, s := range ss {
				m = max(m, f(s))
			}
			return mb(m)
		}
	}
	disk.Set("wal_mb_by_tenth", tenths(starts, maxOf(func(s crashStart) int64 { return s.walBytes }), 0))
	disk.Set("checkpoint_mb_by_tenth", tenths(starts, maxOf(func(s crashStart) int64 { return s.ckptBytes }), 0))
	disk.Set("data_mb_by_tenth", tenths(starts, maxOf(func(s crashStart) int64 { return s.dataBytes }), 0))
	checkpointBytes := o.CheckpointBytes
	if checkpointBytes == 0 {
		checkpointBytes = 64 << 20
	}
	disk.Set("idemd_checkpoint_bytes", checkpointBytes)
	// The log a crash loop leaves, against max(-checkpoint-bytes, the
	// checkpoint's size): the engine keeps the log from its base's link
	// on and merges a new base once that log reaches the store's size, so
	// about 2 means bounded; a figure that climbs with kills means it is
	// not. What a restart replays is max_replayed_bytes below.
	var walOver float64
	for _, s := range starts {
		walOver = max(walOver, float64(s.walBytes)/float64(max(checkpointBytes, s.ckptBytes)))
	}
	disk.Set("max_wal_over_interval", round(walOver, 2))
	disk.Set("wal_over_interval_by_tenth", tenths(starts, func(ss []crashStart) float64 {
		var x float64
		for _, s := range ss {
			x = max(x, float64(s.walBytes)/float64(max(checkpointBytes, s.ckptBytes)))
		}
		return x
	}, 2))
	// The log an open replayed (issue 38): from its checkpoint chain's tip
	// on, about two intervals at most however large the store and the
	// log kept on disk (docs/engine.md, "Bounded recovery").
	var maxReplayed int64
	for _, s := range starts {
		maxReplayed = max(maxReplayed, s.replayed)
	}
	disk.Set("max_replayed_bytes", maxReplayed)
	disk.Set("max_replayed_over_checkpoint_bytes", round(float64(maxReplayed)/float64(checkpointBytes), 2))
	disk.Set("replayed_mb_by_tenth", tenths(starts, maxOf(func(s crashStart) int64 { return s.replayed }), 1))
	out = append(out, disk)
	return append(out, load.result(loadSeconds, portChanges, logs))
}

// tenths splits the starts into ten runs of kills (fewer if there are
// fewer than ten) and formats f of each, comma-separated: the trend in one
// field.
func tenths(starts []crashStart, f func([]crashStart) float64, prec int) string {
	parts := min(10, len(starts))
	var b strings.Builder
	for p := range parts {
		lo, hi := p*len(starts)/parts, (p+1)*len(starts)/parts
		if p > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(f(starts[lo:hi]), 'f', prec, 64))
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func mb(b int64) float64         { return float64(b) / (1 << 20) }

func median(v []float64) float64 { return quantile(v, 0.5) }

// quantile interpolates linearly between the closest ranks.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// slope is the least-squares slope of v against its index: how many
// milliseconds each kill adds to the time to healthy.
func slope(v []float64) float64 {
	n := float64(len(v))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range v {
		x := float64(i + 1)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// checkpointFiles counts the data dir's checkpoint links (a base's
// ckpt-<index>-<n>.ckpt parts grouped by index, complete or being
// written, and ckpt-<index>.delta deltas), names the newest, sizes them
// all (an open reads at most the newest chain of them), and counts the
// temp files of unfinished ones.
func checkpointFiles(data string) (n int, newest string, size int64, tmps int) {
	names, _ := filepath.Glob(filepath.Join(data, "ckpt-*.ckpt"))
	deltas, _ := filepath.Glob(filepath.Join(data, "ckpt-*.delta"))
	names = append(names, deltas...)
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	links := map[string]bool{}
	for _, p := range names {
		base := filepath.Base(p)
		link := base[:min(len(base), len("ckpt-")+20)]
		if info, err := os.Stat(p); err == nil {
			size += info.Size()
		}
		links[link] = true
		newest = link // zero-padded indexes: the newest sorts last
	}
	tmp, _ := filepath.Glob(filepath.Join(data, "ckpt-*.tmp"))
	return len(links), newest, size, len(tmp)
}
