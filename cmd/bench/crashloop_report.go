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
	if len(starts) == 0 {
		return []*Result{load.result(loadSeconds, portChanges, logs)}
	}
	out := crashEnds(o, first, starts)
	out = append(out, crashRatio(o, starts, capped), crashPhases(o, starts), crashDisk(o, first, starts))
	return append(out, load.result(loadSeconds, portChanges, logs))
}

// crashStartResult is one start's line of the report.
func crashStartResult(o CrashloopOptions, s crashStart, name string) *Result {
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

// crashEnds are the lines of the start after the first kill and after the
// last.
func crashEnds(o CrashloopOptions, first crashStart, starts []crashStart) []*Result {
	n := len(starts)
	r1 := crashStartResult(o, starts[0], "healthy-after-kill-1")
	r1.Set("first_start_ms", round(ms(first.healthy), 1))
	if n == 1 {
		return []*Result{r1}
	}
	rn := crashStartResult(o, starts[n-1], "healthy-after-kill-"+strconv.Itoa(n))
	rn.Set("over_kill_1", round(ms(starts[n-1].healthy)/ms(starts[0].healthy), 3))
	return []*Result{r1, rn}
}

// crashRatio is the time to healthy across the kills: its distribution,
// the first and last medians, and the trend by tenth of the run.
func crashRatio(o CrashloopOptions, starts []crashStart, capped bool) *Result {
	n := len(starts)
	healthy, perMB := make([]float64, n), make([]float64, n)
	var total time.Duration
	for i, s := range starts {
		healthy[i], perMB[i] = ms(s.healthy), s.msPerMB()
		total += s.healthy
	}
	m := min(crashMedianOf, n)
	medFirst, medLast := median(healthy[:m]), median(healthy[n-m:])
	ratio := &Result{Case: "healthy-ratio", Concurrency: o.Clients, Ops: uint64(n), NoFloorRatio: true, Seconds: total.Seconds(),
		P50us: median(healthy) * 1e3, P90us: quantile(healthy, 0.90) * 1e3, P99us: quantile(healthy, 0.99) * 1e3, P999us: quantile(healthy, 0.999) * 1e3}
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
		ratio.Targets = append(ratio.Targets, crashFlatTarget(m, medFirst, medLast, healthy))
	}
	return ratio
}

// crashFlatTarget judges issue 38's aim: the median time to healthy of the
// last crashMedianOf restarts at most crashBoundRatio × that of the first
// plus crashBoundSlack.
func crashFlatTarget(m int, medFirst, medLast float64, healthy []float64) Target {
	n := len(healthy)
	bound := crashBoundRatio*medFirst + ms(crashBoundSlack)
	return Target{
		Want: fmt.Sprintf("time to healthy stays flat: median of the last %d <= %.1fx the first %d + %s (issue 38)",
			m, crashBoundRatio, m, crashBoundSlack),
		Got: fmt.Sprintf("%.0f ms against %.0f ms (%.2fx the first %.0f ms; kill %d %.0f ms, kill 1 %.0f ms)",
			medLast, bound, medLast/medFirst, medFirst, n, healthy[n-1], healthy[0]),
		Met:   medLast <= bound,
		Score: atMost(medLast, bound),
	}
}

// crashDisk is what the loop left on disk: the log, the checkpoints, the
// data dir, and the log each open replayed.
func crashDisk(o CrashloopOptions, first crashStart, starts []crashStart) *Result {
	disk := &Result{Case: "disk", Concurrency: o.Clients, Ops: uint64(len(starts)), NoFloorRatio: true}
	var maxWAL, maxData, maxCkpt, maxReplayed int64
	maxCkpts := 0
	for _, s := range starts {
		maxWAL, maxData, maxCkpt = max(maxWAL, s.walBytes), max(maxData, s.dataBytes), max(maxCkpt, s.ckptBytes)
		maxCkpts, maxReplayed = max(maxCkpts, s.ckpts), max(maxReplayed, s.replayed())
	}
	last := starts[len(starts)-1]
	disk.Set("max_wal_bytes", maxWAL)
	disk.Set("max_data_bytes", maxData)
	disk.Set("max_checkpoint_bytes", maxCkpt)
	disk.Set("max_checkpoint_files", maxCkpts)
	crashCheckpointsSeen(disk, first, starts)
	disk.Set("last_wal_bytes", last.walBytes)
	disk.Set("last_data_bytes", last.dataBytes)
	disk.Set("wal_mb_by_tenth", tenths(starts, maxMBOf(func(s crashStart) int64 { return s.walBytes }), 0))
	disk.Set("checkpoint_mb_by_tenth", tenths(starts, maxMBOf(func(s crashStart) int64 { return s.ckptBytes }), 0))
	disk.Set("data_mb_by_tenth", tenths(starts, maxMBOf(func(s crashStart) int64 { return s.dataBytes }), 0))
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
	walOver := func(ss []crashStart) float64 {
		var x float64
		for _, s := range ss {
			x = max(x, float64(s.walBytes)/float64(max(checkpointBytes, s.ckptBytes)))
		}
		return x
	}
	disk.Set("max_wal_over_interval", round(walOver(starts), 2))
	disk.Set("wal_over_interval_by_tenth", tenths(starts, walOver, 2))
	// The log an open replayed (issue 38): from its checkpoint chain's tip
	// on, about two intervals at most however large the store and the
	// log kept on disk (docs/engine.md, "Bounded recovery").
	disk.Set("max_replayed_bytes", maxReplayed)
	disk.Set("max_replayed_over_checkpoint_bytes", round(float64(maxReplayed)/float64(checkpointBytes), 2))
	disk.Set("replayed_mb_by_tenth", tenths(starts, maxMBOf(func(s crashStart) int64 { return s.replayed() }), 1))
	return disk
}

// crashCheckpointsSeen counts the checkpoints that completed during the
// loop, seen as a change of the newest checkpoint from one restart to the
// next (a lower bound: two in one process's life count once), and the
// last kill after which one had: a loop whose checkpoints never finish
// between kills has a log that only grows.
func crashCheckpointsSeen(disk *Result, first crashStart, starts []crashStart) {
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
}

// maxMBOf is the largest f of a run of starts, in MB.
func maxMBOf(f func(crashStart) int64) func([]crashStart) float64 {
	return func(ss []crashStart) float64 {
		var m int64
		for _, s := range ss {
			m = max(m, f(s))
		}
		return mb(m)
	}
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
