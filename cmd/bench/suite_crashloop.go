package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

func init() {
	register(Suite{
		Name:     "crashloop",
		Rank:     65,
		Optional: true,
		Doc: "opt-in, minutes: the real idemd (-tags nofailpoint) under -crashloop-clients keyed HTTP clients, SIGKILLed every " +
			"-crashloop-interval and restarted -crashloop-kills times: time to healthy after the first kill against the last, " +
			"WAL and data dir size, then a graceful stop and an exactly-once replay of 200 acknowledged keys",
		Run: runCrashloop,
	})
}

// CrashloopOptions are the -crashloop-* flags.
type CrashloopOptions struct {
	Kills                    int           // SIGKILLs (and restarts) under load
	IntervalMin, IntervalMax time.Duration // load time from healthy to the next kill, uniform
	Clients                  int           // closed-loop keyed HTTP clients
	Seed                     uint64        // kill intervals and the exactly-once sample
	MaxWall                  time.Duration // cap of the kill loop
	CheckpointBytes          int64         // idemd -checkpoint-bytes; 0 keeps idemd's default
	Docs                     int           // document ids reused round-robin (0: new ones per batch)
	Retention                time.Duration // idemd -retention; 0 keeps idemd's default
}

// parseCrashInterval reads "2s-5s" (uniform between the two) or "3s".
func parseCrashInterval(s string) (lo, hi time.Duration, err error) {
	a, b, ranged := strings.Cut(strings.TrimSpace(s), "-")
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, err
	}
	hi = lo
	if ranged {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, err
		}
	}
	if lo <= 0 || hi < lo {
		return 0, 0, fmt.Errorf("want MIN-MAX with 0 < MIN <= MAX, or one positive duration; got %q", s)
	}
	return lo, hi, nil
}

const (
	// crashTable is the table the clients write (4 shards, the default).
	crashTable = "t"
	// crashHealthyDeadline bounds one start: process start to /healthz 200.
	crashHealthyDeadline = 60 * time.Second
	// crashHealthPoll is the /healthz polling step.
	crashHealthPoll = 5 * time.Millisecond
	// crashStopTimeout bounds the wait for an exit after SIGKILL or SIGTERM.
	crashStopTimeout = 30 * time.Second
	// Client retries with the same key: exponential backoff between these,
	// with jitter, for at most crashKeyGiveUp per key.
	crashRetryMin  = 5 * time.Millisecond
	crashRetryMax  = 200 * time.Millisecond
	crashKeyGiveUp = 2 * time.Minute
	// crashSampleKeys acknowledged keys are replayed after the graceful
	// stop: up to half of them the last key acknowledged before each kill
	// (the writes a torn tail would lose), the rest drawn at random.
	crashSampleKeys = 200
	// crashMedianOf is how many restarts the first/last medians take.
	crashMedianOf = 10
	// crashBoundRatio is the aim: the median time to healthy of the last
	// crashMedianOf restarts at most this many times that of the first.
	crashBoundRatio = 2.0
)

// crashStart is one start of idemd and how long it took to answer.
type crashStart struct {
	kill      int           // the SIGKILL it followed; 0 is the first start
	uptime    time.Duration // load time the killed process served
	listen    time.Duration // process start to the "idemd: listening" line
	healthy   time.Duration // process start to the first /healthz 200
	walBytes  int64         // <data>/wal once healthy
	dataBytes int64         // the whole data dir once healthy
	ckptBytes int64         // the newest checkpoint file (0: none yet)
	ckpts     int           // checkpoint files present
	newest    string        // the newest checkpoint's name ("": none)
	ckptTmps  int           // ckpt-*.tmp files present (a checkpoint cut short by a kill)
}

// loadedMB is what the open read at most: the newest checkpoint and the
// log (the log may also hold already-checkpointed segments it skips).
func (s crashStart) loadedMB() float64 { return mb(s.ckptBytes + s.walBytes) }

// msPerMB is the time to healthy per MB loaded: flat when recovery is
// bounded by the store's size rather than by the number of crashes.
func (s crashStart) msPerMB() float64 {
	if s.loadedMB() <= 0 {
		return 0
	}
	return ms(s.healthy) / s.loadedMB()
}

func runCrashloop(env *Env) error {
	o := env.Opts.Crashloop
	ctx, cancel := context.WithCancel(env.Ctx)
	defer cancel()

	buildDir, cleanBuild, err := env.DataDir("build")
	if err != nil {
		return err
	}
	defer cleanBuild()
	env.Progress("%s: building idemd (-tags nofailpoint)", env.Suite())
	bin, err := buildIdemd(ctx, buildDir)
	env.ProgressDone()
	if err != nil {
		return err
	}
	data, cleanData, err := env.DataDir("data")
	if err != nil {
		return err
	}
	defer cleanData()

	var extra []string
	if o.CheckpointBytes > 0 {
		extra = append(extra, "-checkpoint-bytes", strconv.FormatInt(o.CheckpointBytes, 10))
	}
	if o.Retention > 0 {
		extra = append(extra, "-retention", o.Retention.String())
	}
	logs := newCrashLogs()
	health := newHealthClient()
	defer health.CloseIdleConnections()
	var proc *idemdProc
	// Whatever way the suite ends, no idemd survives it.
	defer func() {
		if proc != nil {
			proc.kill()
		}
	}()
	portChanges := 0
	// start launches idemd on addr (the previous one's, so clients keep
	// their URL; a fresh port if it is taken) and waits for /healthz.
	start := func(addr string, kill int) (crashStart, error) {
		p, err := launchIdemd(ctx, bin, data, addr, extra, logs)
		if err != nil && addr != "127.0.0.1:0" && strings.Contains(err.Error(), "address already in use") {
			portChanges++
			p, err = launchIdemd(ctx, bin, data, "127.0.0.1:0", extra, logs)
		}
		if err != nil {
			return crashStart{}, err
		}
		proc = p
		healthy, err := p.waitHealthy(ctx, health)
		if err != nil {
			return crashStart{}, err
		}
		s := crashStart{kill: kill, listen: p.listen, healthy: healthy}
		s.walBytes, s.dataBytes = dirBytes(filepath.Join(data, "wal")), dirBytes(data)
		s.ckpts, s.newest, s.ckptBytes, s.ckptTmps = checkpointFiles(data)
		return s, nil
	}

	first, err := start("127.0.0.1:0", 0)
	if err != nil {
		return err
	}
	if err := createTable(ctx, health, proc.base()); err != nil {
		return err
	}
	load := newCrashLoad(env, o)
	load.base.Store(new(proc.base()))
	loadStart := time.Now()
	load.start(ctx)
	stopLoad := func() { load.stopAndWait() }
	defer stopLoad()

	rng := rand.New(rand.NewPCG(o.Seed, 0x6b696c6c)) // "kill"
	interval := func() time.Duration {
		return o.IntervalMin + time.Duration(rng.Int64N(int64(o.IntervalMax-o.IntervalMin)+1))
	}
	var (
		starts []crashStart // starts[k-1] followed kill k
		marks  []int        // acknowledged keys at each kill
		capped bool
	)
	// serve lets the load run for d on the current process, or fails.
	serve := func(d time.Duration, label func() string) error {
		t := time.NewTimer(d)
		defer t.Stop()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-t.C:
				return nil
			case <-tick.C:
				env.Progress("%s", label())
			case <-load.failed:
				return load.err()
			case <-proc.exited:
				return fmt.Errorf("idemd exited on its own under load (%v)\n%s", proc.err, proc.tail.String())
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	loopStart := time.Now()
	last := first
	for k := 1; k <= o.Kills; k++ {
		d := interval()
		if time.Since(loopStart)+d > o.MaxWall {
			capped = true
			break
		}
		killAt := time.Now().Add(d)
		err = serve(d, func() string {
			return fmt.Sprintf("%s: kill %d/%d in %.1fs; last healthy in %.0f ms, wal %.0f MB; %d acked", env.Suite(), k, o.Kills,
				time.Until(killAt).Seconds(), ms(last.healthy), mb(last.walBytes), load.ackedCount())
		})
		if err != nil {
			break
		}
		marks = append(marks, load.ackedCount())
		if err = proc.kill(); err != nil {
			break
		}
		var s crashStart
		if s, err = start(proc.addr, k); err != nil {
			err = fmt.Errorf("restart after kill %d: %w", k, err)
			break
		}
		s.uptime = d
		starts = append(starts, s)
		last = s
		load.base.Store(new(proc.base()))
		env.Progress("%s: kill %d/%d: healthy in %.0f ms, wal %.0f MB, data %.0f MB, %d acked", env.Suite(), k, o.Kills,
			ms(s.healthy), mb(s.walBytes), mb(s.dataBytes), load.ackedCount())
	}
	// Let the retries of the last crash complete on the last process, so
	// their keys are acknowledged too, then stop the load.
	if err == nil && len(starts) > 0 {
		err = serve(min(o.IntervalMin, 2*time.Second), func() string { return env.Suite() + ": draining the load" })
	}
	stopLoad()
	loadSeconds := time.Since(loadStart).Seconds()
	env.ProgressDone()
	if err == nil {
		err = load.err()
	}
	results := crashResults(o, first, starts, load, loadSeconds, capped, portChanges, logs)
	if err != nil {
		env.reportAll(results)
		return err
	}

	// A graceful stop, a clean restart, and the exactly-once sample.
	env.Progress("%s: SIGTERM, restart, replaying the sample", env.Suite())
	health.CloseIdleConnections()
	if err := proc.term(); err != nil {
		env.reportAll(results)
		return err
	}
	clean, err := start(proc.addr, 0)
	if err != nil {
		env.reportAll(results)
		return fmt.Errorf("restart after the graceful stop: %w", err)
	}
	check, verr := verifyExactlyOnce(ctx, load, proc.base(), marks, o.Seed)
	check.Set("healthy_after_clean_stop_ms", round(ms(clean.healthy), 1))
	load.tr.CloseIdleConnections()
	health.CloseIdleConnections()
	if terr := proc.term(); terr != nil && verr == nil {
		verr = terr
	}
	proc = nil
	env.ProgressDone()
	results = append(results, check)
	env.reportAll(results)
	return verr
}

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
			Want: fmt.Sprintf("time to healthy does not grow with kills: median of the last %d <= %.0fx the first %d (issue 11)", m, crashBoundRatio, m),
			Got:  fmt.Sprintf("%.2fx (%.0f / %.0f ms; kill %d %.0f ms, kill 1 %.0f ms: %.2fx)", x, medLast, medFirst, n, healthy[n-1], healthy[0], healthy[n-1]/healthy[0]),
			Met:  x <= crashBoundRatio,
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
	// The log a crash loop leaves, against the checkpoint interval: the
	// engine checkpoints after max(-checkpoint-bytes, last checkpoint's
	// size) of log and keeps the previous checkpoint's log, so about 2
	// means bounded; a figure that climbs with kills means it is not.
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

// checkpointFiles counts the data dir's checkpoints (ckpt-<index>-<n>.part
// files grouped by index; complete or being written), names and sizes the
// newest, and counts the temp files of unfinished parts.
func checkpointFiles(data string) (n int, newest string, size int64, tmps int) {
	names, _ := filepath.Glob(filepath.Join(data, "ckpt-*.part"))
	slices.Sort(names) // zero-padded indexes: the newest sorts last
	sizes := map[string]int64{}
	for _, p := range names {
		base := filepath.Base(p)
		gen := base[:min(len(base), len("ckpt-")+20)]
		if info, err := os.Stat(p); err == nil {
			sizes[gen] += info.Size()
		}
		newest = gen
	}
	tmp, _ := filepath.Glob(filepath.Join(data, "ckpt-*.tmp"))
	return len(sizes), newest, sizes[newest], len(tmp)
}

// moduleRoot is the directory of the idem module's go.mod: `go env GOMOD`
// from the working directory (go run ./cmd/bench runs from the root; the
// test from cmd/bench).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("crashloop builds ./cmd/idemd: run the bench inside the idem module (go run ./cmd/bench)")
	}
	mod, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(mod, []byte("module github.com/idemdb/idem\n")) {
		return "", fmt.Errorf("%s is not the idem module's", gomod)
	}
	return filepath.Dir(gomod), nil
}

// buildIdemd builds the release server (failpoints compiled out, as make
// build does) into dir.
func buildIdemd(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "idemd")
	args := []string{"build", "-tags", "nofailpoint", "-o", bin, "./cmd/idemd"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// crashLogs gathers what every idemd of the run logged at WARN or above,
// by message, for the report.
type crashLogs struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCrashLogs() *crashLogs { return &crashLogs{counts: map[string]int{}} }

func (l *crashLogs) add(msg string) {
	l.mu.Lock()
	l.counts[msg]++
	l.mu.Unlock()
}

// summary is "msg×n; …", most frequent first; the warning every start
// without -tokens logs is left out.
func (l *crashLogs) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for m, n := range l.counts {
		if !strings.HasPrefix(m, "auth: no -tokens file") {
			all = append(all, kv{m, n})
		}
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.msg, b.msg)
	})
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%q x%d", e.msg, e.n))
	}
	return strings.Join(parts, "; ")
}

// lineRing keeps a process's last lines of output, for error messages.
type lineRing struct {
	mu    sync.Mutex
	lines []string
	next  int
}

const ringLines = 40

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < ringLines {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % ringLines
}

func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...)
	return strings.Join(out, "\n")
}

// idemdProc is one running idemd.
type idemdProc struct {
	cmd    *exec.Cmd
	addr   string
	listen time.Duration // start to the listening line
	start  time.Time
	tail   lineRing
	clean  atomic.Bool // logged "idemd: stopped cleanly"
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

func (p *idemdProc) base() string { return "http://" + p.addr }

// launchIdemd starts idemd on data and returns once it logged its address
// (after the engine's recovery: idemd opens the store before it listens).
func launchIdemd(ctx context.Context, bin, data, addr string, extra []string, logs *crashLogs) (*idemdProc, error) {
	args := append([]string{"-addr", addr, "-data", data, "-log-format", "json", "-log-level", "info",
		"-shutdown-timeout", "10s"}, extra...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GO_FAILPOINTS") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = childProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &idemdProc{cmd: cmd, exited: make(chan struct{})}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.tail.add(string(line))
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Addr  string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			switch {
			case rec.Msg == "idemd: listening":
				select {
				case addrs <- rec.Addr:
				default:
				}
			case rec.Msg == "idemd: stopped cleanly":
				p.clean.Store(true)
			case rec.Level == "WARN" || rec.Level == "ERROR":
				logs.add(rec.Msg)
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // a line longer than the buffer
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(crashHealthyDeadline)
	defer timer.Stop()
	select {
	case p.addr = <-addrs:
		p.listen = time.Since(p.start)
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("idemd exited before listening (%v)\n%s", p.err, p.tail.String())
	case <-timer.C:
		err = fmt.Errorf("idemd did not listen within %v\n%s", crashHealthyDeadline, p.tail.String())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// waitHealthy polls /healthz until it answers 200 and returns the time
// since the process started.
func (p *idemdProc) waitHealthy(ctx context.Context, c *http.Client) (time.Duration, error) {
	deadline := p.start.Add(crashHealthyDeadline)
	url := p.base() + "/healthz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(p.start), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("idemd /healthz did not answer 200 within %v of its start (%v)\n%s", crashHealthyDeadline, err, p.tail.String())
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("idemd exited before /healthz answered (%v)\n%s", p.err, p.tail.String())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(crashHealthPoll):
		}
	}
}

// kill sends SIGKILL and waits for the exit, which must be that signal's:
// a process that died on its own is an error.
func (p *idemdProc) kill() error {
	select {
	case <-p.exited:
		return fmt.Errorf("idemd had already exited (%v)\n%s", p.err, p.tail.String())
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(crashStopTimeout):
		return fmt.Errorf("idemd did not exit within %v of SIGKILL", crashStopTimeout)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		return fmt.Errorf("idemd exited with %v, not by the SIGKILL\n%s", p.cmd.ProcessState, p.tail.String())
	}
	return nil
}

// term stops idemd gracefully and requires a clean exit: status 0 and
// "idemd: stopped cleanly".
func (p *idemdProc) term() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(crashStopTimeout):
		p.kill()
		return fmt.Errorf("idemd did not exit within %v of SIGTERM\n%s", crashStopTimeout, p.tail.String())
	}
	if p.err != nil || !p.clean.Load() {
		return fmt.Errorf("idemd did not stop cleanly after SIGTERM (%v)\n%s", p.err, p.tail.String())
	}
	return nil
}

func newHealthClient() *http.Client {
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
}

// createTable creates the clients' table (4 shards, the default).
func createTable(ctx context.Context, c *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/tables/"+crashTable, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("PUT /v1/tables/%s: %w", crashTable, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /v1/tables/%s: status %d: %s", crashTable, resp.StatusCode, body)
	}
	return nil
}

// crashLoad is the steady keyed load: every client posts call i of its own
// (a new key and ten new documents), and retries it with the same key and
// body until it is acknowledged (201): the exactly-once contract. An answer
// that says retry_with new_key ends the key unacknowledged.
type crashLoad struct {
	clients int
	seed    uint64
	wl      *workload
	base    atomic.Pointer[string] // the current process's http://addr
	client  *http.Client
	tr      *http.Transport

	stop    atomic.Bool
	stopped time.Time // when stop was set (read only after it)
	wg      sync.WaitGroup
	cancel  context.CancelFunc

	ackMu sync.Mutex
	acked []ackRef // acknowledged calls, in acknowledgement order
	hists []*hdrhistogram.Histogram

	failOnce sync.Once
	failed   chan struct{}
	firstErr error

	// Counters of attempts that did not get a 201.
	attempts, retries                           atomic.Uint64
	refused, reset, netOther                    atomic.Uint64
	s503, s409, s429, s500                      atomic.Uint64
	newKey, abandoned, firstReplays, retryAcked atomic.Uint64
	retryReplays                                atomic.Uint64
}

type ackRef struct {
	w int32
	i uint64
}

func newCrashLoad(env *Env, o CrashloopOptions) *crashLoad {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        o.Clients * 2,
		MaxIdleConnsPerHost: o.Clients * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}
	wl := newWorkload(env.Opts.BatchDocs)
	if o.Docs > 0 {
		wl.perWorker = uint64(max(o.Docs/o.Clients, 10*env.Opts.BatchDocs))
	}
	l := &crashLoad{clients: o.Clients, seed: o.Seed, wl: wl,
		client: &http.Client{Transport: tr, Timeout: time.Minute}, tr: tr, failed: make(chan struct{})}
	for range o.Clients {
		l.hists = append(l.hists, newHist())
	}
	return l
}

func (l *crashLoad) fail(err error) {
	l.failOnce.Do(func() { l.firstErr = err; close(l.failed) })
}

func (l *crashLoad) err() error {
	select {
	case <-l.failed:
		return l.firstErr
	default:
		return nil
	}
}

func (l *crashLoad) ackedCount() int {
	l.ackMu.Lock()
	defer l.ackMu.Unlock()
	return len(l.acked)
}

func (l *crashLoad) start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	for w := range l.clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client1(ctx, w)
		}()
	}
}

// stopAndWait ends the load: clients finish the key in hand (for up to
// 10 s, then abandon it) and return. Idempotent.
func (l *crashLoad) stopAndWait() {
	if l.stop.Load() {
		return
	}
	l.stopped = time.Now()
	l.stop.Store(true)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		l.cancel()
		<-done
	}
	l.cancel()
	l.tr.CloseIdleConnections()
}

// answer is what one attempt got.
type answer struct {
	status    int
	replayed  bool
	code      string
	retryWith string
}

func (l *crashLoad) post(ctx context.Context, base, key string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tables/"+crashTable+"/batch", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if a.status != http.StatusCreated {
		var p struct {
			Code      string `json:"code"`
			RetryWith string `json:"retry_with"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&p)
		a.code, a.retryWith = p.Code, p.RetryWith
	}
	io.Copy(io.Discard, resp.Body) // so the connection goes back to the pool
	resp.Body.Close()
	return a, nil
}

// client1 is one client's loop.
func (l *crashLoad) client1(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(l.seed, uint64(w)+1))
	hist := l.hists[w]
	var buf []byte
	for i := uint64(0); !l.stop.Load() && ctx.Err() == nil; i++ {
		buf = l.wl.appendBody(buf[:0], w, i)
		key := l.wl.key(w, i)
		t0 := time.Now()
		backoff := crashRetryMin
	attempts:
		for attempt := 0; ; attempt++ {
			l.attempts.Add(1)
			if attempt > 0 {
				l.retries.Add(1)
			}
			a, err := l.post(ctx, *l.base.Load(), key, buf)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				switch {
				case errors.Is(err, syscall.ECONNREFUSED):
					l.refused.Add(1)
				case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
					errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
					l.reset.Add(1)
				default:
					l.netOther.Add(1)
				}
			case a.status == http.StatusCreated:
				if a.replayed {
					if attempt == 0 {
						l.firstReplays.Add(1) // a new key's first answer should not be a replay
					} else {
						l.retryReplays.Add(1) // committed before the kill, answered after it
					}
				}
				if attempt > 0 {
					l.retryAcked.Add(1)
				}
				hist.RecordValue(int64(time.Since(t0)))
				l.ackMu.Lock()
				l.acked = append(l.acked, ackRef{int32(w), i})
				l.ackMu.Unlock()
				break attempts
			case a.retryWith == "new_key":
				l.newKey.Add(1) // final and not applied: the next call has a new key
				break attempts
			case a.retryWith == "same_key" || a.status == http.StatusServiceUnavailable:
				switch a.status {
				case http.StatusServiceUnavailable:
					l.s503.Add(1)
				case http.StatusConflict:
					l.s409.Add(1)
				case http.StatusTooManyRequests:
					l.s429.Add(1)
				default:
					l.s500.Add(1)
				}
			default:
				l.fail(fmt.Errorf("POST key %s: status %d code %q retry_with %q: not an answer to retry", key, a.status, a.code, a.retryWith))
				return
			}
			if l.stop.Load() && time.Since(l.stopped) > 10*time.Second {
				l.abandoned.Add(1)
				return
			}
			if time.Since(t0) > crashKeyGiveUp {
				l.fail(fmt.Errorf("key %s not acknowledged within %v of retries (last: status %d, %v)", key, crashKeyGiveUp, a.status, err))
				return
			}
			d := backoff/2 + time.Duration(rng.Int64N(int64(backoff)))
			backoff = min(2*backoff, crashRetryMax)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
	}
}

// result is the keyed-load line: acknowledged requests over the whole run
// (downtime included) and what the other attempts got.
func (l *crashLoad) result(seconds float64, portChanges int, logs *crashLogs) *Result {
	h := newHist()
	for _, x := range l.hists {
		h.Merge(x)
	}
	m := Measured{Calls: uint64(l.ackedCount()), Items: uint64(l.ackedCount()), Seconds: seconds, Hist: h}
	r := m.Result("keyed-load", l.clients)
	r.NoFloorRatio = true
	r.Set("acked", l.ackedCount())
	r.Set("latency", "first attempt to 201, retries and downtime included")
	r.Set("attempts", l.attempts.Load())
	r.Set("retries", l.retries.Load())
	r.Set("acked_after_retry", l.retryAcked.Load())
	r.Set("replayed_on_retry", l.retryReplays.Load())
	r.Set("replayed_on_first_attempt", l.firstReplays.Load())
	r.Set("conn_refused", l.refused.Load())
	r.Set("conn_reset", l.reset.Load())
	r.Set("conn_other", l.netOther.Load())
	r.Set("status_503", l.s503.Load())
	r.Set("status_409", l.s409.Load())
	r.Set("status_429", l.s429.Load())
	r.Set("status_500", l.s500.Load())
	r.Set("final_new_key", l.newKey.Load())
	r.Set("abandoned_at_stop", l.abandoned.Load())
	if portChanges > 0 {
		r.Set("port_changes", portChanges)
	}
	if s := logs.summary(); s != "" {
		r.Set("idemd_warnings", s)
	}
	return &r
}

// verifyExactlyOnce re-posts a sample of acknowledged keys with the same
// body: each must replay its stored 201 (Idempotent-Replayed: true), and
// the batch's first and last documents must be there.
func verifyExactlyOnce(ctx context.Context, l *crashLoad, base string, marks []int, seed uint64) (*Result, error) {
	l.ackMu.Lock()
	acked := slices.Clone(l.acked)
	l.ackMu.Unlock()
	pick, beforeKill := crashSample(len(acked), marks, crashSampleKeys, rand.New(rand.NewPCG(seed, 0x73616d70))) // "samp"
	c := l.client
	var bad []string
	replayed, docs := 0, 0
	t0 := time.Now()
	for _, j := range pick {
		a := acked[j]
		w, i := int(a.w), a.i
		key := l.wl.key(w, i)
		ans, err := l.post(ctx, base, key, l.wl.appendBody(nil, w, i))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", key, err))
			continue
		case ans.status != http.StatusCreated || !ans.replayed:
			bad = append(bad, fmt.Sprintf("%s: status %d replayed=%v code %q", key, ans.status, ans.replayed, ans.code))
			continue
		}
		replayed++
		ok := true
		for _, d := range []int{0, l.wl.docs - 1} {
			id := string(l.wl.appendDocID(nil, w, i, d))
			st, err := getStatus(ctx, c, base+"/v1/tables/"+crashTable+"/docs/"+id)
			if err != nil || st != http.StatusOK {
				bad = append(bad, fmt.Sprintf("%s: document %s: status %d %v", key, id, st, err))
				ok = false
			}
		}
		if ok {
			docs++
		}
	}
	r := &Result{Case: "exactly-once", Concurrency: l.clients, Ops: uint64(len(pick)), Seconds: time.Since(t0).Seconds(),
		NoFloorRatio: true}
	r.Set("sampled", len(pick))
	r.Set("sampled_last_before_kill", beforeKill)
	r.Set("replayed_201", replayed)
	r.Set("documents_present", docs)
	r.Set("mismatches", len(bad))
	if len(pick) == 0 {
		return r, errors.New("exactly-once: no acknowledged key to sample")
	}
	if len(bad) > 0 {
		return r, fmt.Errorf("exactly-once: %d of %d sampled acknowledged keys did not replay their 201 with their documents: %s",
			len(bad), len(pick), strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return r, nil
}

// crashSample picks up to want distinct indexes of n acknowledged keys:
// the last one acknowledged before each kill (at most want/2; beforeKill
// says how many), then random ones.
func crashSample(n int, marks []int, want int, rng *rand.Rand) (out []int, beforeKill int) {
	want = min(want, n)
	seen := map[int]bool{}
	add := func(j int) {
		if j >= 0 && j < n && !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	for _, m := range marks {
		if len(out) >= want/2 {
			break
		}
		add(m - 1)
	}
	beforeKill = len(out)
	for len(out) < want {
		add(rng.IntN(n))
	}
	return out, beforeKill
}

func getStatus(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
