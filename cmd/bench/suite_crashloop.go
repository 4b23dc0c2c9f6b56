package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
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
	MapCheckpoints           bool          // idemd -map-checkpoints
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
	// crashBoundRatio and crashBoundSlack are issue 38's aim: the median
	// time to healthy of the last crashMedianOf restarts at most
	// crashBoundRatio × that of the first, plus crashBoundSlack.
	crashBoundRatio = 1.5
	crashBoundSlack = 500 * time.Millisecond
)

// crashStart is one start of idemd and how long it took to answer.
type crashStart struct {
	kill      int           // the SIGKILL it followed; 0 is the first start
	uptime    time.Duration // load time the killed process served
	listen    time.Duration // process start to the "idemd: listening" line
	healthy   time.Duration // process start to the first /healthz 200
	walBytes  int64         // <data>/wal once healthy
	opened    *openReport   // what the open reported (nil: not logged)
	dataBytes int64         // the whole data dir once healthy
	ckptBytes int64         // the checkpoint files on disk, every link kept (0: none yet)
	ckpts     int           // checkpoint links present (a base's parts count once)
	newest    string        // the newest checkpoint's name ("": none)
	ckptTmps  int           // ckpt-*.tmp files present (a checkpoint cut short by a kill)
}

// replayed is the log bytes the open replayed (-1: not logged).
func (s crashStart) replayed() int64 {
	if s.opened == nil {
		return -1
	}
	return s.opened.replayedBytes
}

// loadedMB is what the open read at most: the checkpoint files and the
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

// crashRun is one run of the suite: the idemd binary and data dir, the
// process serving now, and the load on it.
type crashRun struct {
	env         *Env
	ctx         context.Context
	o           CrashloopOptions
	bin, data   string
	extra       []string // idemd flags beyond the suite's own
	logs        *crashLogs
	health      *http.Client
	proc        *idemdProc
	load        *crashLoad
	portChanges int
}

func runCrashloop(env *Env) error {
	ctx, cancel := context.WithCancel(env.Ctx)
	defer cancel()
	r := &crashRun{env: env, ctx: ctx, o: env.Opts.Crashloop, logs: newCrashLogs(), health: newHealthClient()}
	defer r.health.CloseIdleConnections()
	cleanup, err := r.prepare()
	defer cleanup()
	if err != nil {
		return err
	}
	// Whatever way the suite ends, no idemd survives it.
	defer func() {
		if r.proc != nil {
			r.proc.kill()
		}
	}()
	first, err := r.start("127.0.0.1:0", 0)
	if err != nil {
		return err
	}
	if err := createTable(ctx, r.health, r.proc.base()); err != nil {
		return err
	}
	r.load = newCrashLoad(env, r.o)
	r.load.base.Store(new(r.proc.base()))
	loadStart := time.Now()
	r.load.start(ctx)
	defer r.load.stopAndWait()
	starts, marks, capped, err := r.killLoop(first)
	r.load.stopAndWait()
	loadSeconds := time.Since(loadStart).Seconds()
	env.ProgressDone()
	if err == nil {
		err = r.load.err()
	}
	results := crashResults(r.o, first, starts, r.load, loadSeconds, capped, r.portChanges, r.logs)
	if err == nil {
		var check *Result
		check, err = r.verify(marks)
		if check != nil {
			results = append(results, check)
		}
	}
	env.reportAll(results)
	return err
}

// prepare builds idemd and makes the data dir; cleanup removes both.
func (r *crashRun) prepare() (cleanup func(), err error) {
	var cleans []func()
	cleanup = func() {
		for _, c := range slices.Backward(cleans) {
			c()
		}
	}
	buildDir, cleanBuild, err := r.env.DataDir("build")
	if err != nil {
		return cleanup, err
	}
	cleans = append(cleans, cleanBuild)
	r.env.Progress("%s: building idemd (-tags nofailpoint)", r.env.Suite())
	r.bin, err = buildIdemd(r.ctx, buildDir)
	r.env.ProgressDone()
	if err != nil {
		return cleanup, err
	}
	data, cleanData, err := r.env.DataDir("data")
	if err != nil {
		return cleanup, err
	}
	r.data, cleans = data, append(cleans, cleanData)
	if r.o.CheckpointBytes > 0 {
		r.extra = append(r.extra, "-checkpoint-bytes", strconv.FormatInt(r.o.CheckpointBytes, 10))
	}
	if r.o.Retention > 0 {
		r.extra = append(r.extra, "-retention", r.o.Retention.String())
	}
	r.extra = append(r.extra, "-map-checkpoints="+strconv.FormatBool(r.o.MapCheckpoints))
	return cleanup, nil
}

// start launches idemd on addr (the previous one's, so clients keep their
// URL; a fresh port if it is taken) and waits for /healthz.
func (r *crashRun) start(addr string, kill int) (crashStart, error) {
	p, err := launchIdemd(r.ctx, r.bin, r.data, addr, r.extra, r.logs)
	if err != nil && addr != "127.0.0.1:0" && strings.Contains(err.Error(), "address already in use") {
		r.portChanges++
		p, err = launchIdemd(r.ctx, r.bin, r.data, "127.0.0.1:0", r.extra, r.logs)
	}
	if err != nil {
		return crashStart{}, err
	}
	r.proc = p
	healthy, err := p.waitHealthy(r.ctx, r.health)
	if err != nil {
		return crashStart{}, err
	}
	s := crashStart{kill: kill, listen: p.listen, healthy: healthy, opened: p.opened.Load()}
	s.walBytes, s.dataBytes = dirBytes(filepath.Join(r.data, "wal")), dirBytes(r.data)
	s.ckpts, s.newest, s.ckptBytes, s.ckptTmps = checkpointFiles(r.data)
	return s, nil
}

// serve lets the load run for d on the current process, or fails.
func (r *crashRun) serve(d time.Duration, label func() string) error {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-tick.C:
			r.env.Progress("%s", label())
		case <-r.load.failed:
			return r.load.err()
		case <-r.proc.exited:
			return fmt.Errorf("idemd exited on its own under load (%v)\n%s", r.proc.err, r.proc.tail.String())
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// killLoop SIGKILLs and restarts idemd under the load -crashloop-kills
// times (or until -crashloop-max), then lets the last crash's retries
// drain. starts[k-1] followed kill k; marks are the keys acknowledged at
// each kill.
func (r *crashRun) killLoop(first crashStart) (starts []crashStart, marks []int, capped bool, err error) {
	env, o := r.env, r.o
	rng := rand.New(rand.NewPCG(o.Seed, 0x6b696c6c)) // "kill"
	loopStart, last := time.Now(), first
	for k := 1; k <= o.Kills; k++ {
		d := o.IntervalMin + time.Duration(rng.Int64N(int64(o.IntervalMax-o.IntervalMin)+1))
		if time.Since(loopStart)+d > o.MaxWall {
			capped = true
			break
		}
		killAt := time.Now().Add(d)
		err = r.serve(d, func() string {
			return fmt.Sprintf("%s: kill %d/%d in %.1fs; last healthy in %.0f ms, wal %.0f MB; %d acked", env.Suite(), k, o.Kills,
				time.Until(killAt).Seconds(), ms(last.healthy), mb(last.walBytes), r.load.ackedCount())
		})
		if err != nil {
			return starts, marks, capped, err
		}
		marks = append(marks, r.load.ackedCount())
		if err = r.proc.kill(); err != nil {
			return starts, marks, capped, err
		}
		s, err := r.start(r.proc.addr, k)
		if err != nil {
			return starts, marks, capped, fmt.Errorf("restart after kill %d: %w", k, err)
		}
		s.uptime = d
		starts, last = append(starts, s), s
		r.load.base.Store(new(r.proc.base()))
		env.Progress("%s: kill %d/%d: healthy in %.0f ms, wal %.0f MB, data %.0f MB, %d acked", env.Suite(), k, o.Kills,
			ms(s.healthy), mb(s.walBytes), mb(s.dataBytes), r.load.ackedCount())
	}
	// Let the retries of the last crash complete on the last process, so
	// their keys are acknowledged too.
	if len(starts) > 0 {
		err = r.serve(min(o.IntervalMin, 2*time.Second), func() string { return env.Suite() + ": draining the load" })
	}
	return starts, marks, capped, err
}

// verify stops idemd gracefully, restarts it and replays the exactly-once
// sample.
func (r *crashRun) verify(marks []int) (*Result, error) {
	r.env.Progress("%s: SIGTERM, restart, replaying the sample", r.env.Suite())
	defer r.env.ProgressDone()
	r.health.CloseIdleConnections()
	if err := r.proc.term(); err != nil {
		return nil, err
	}
	clean, err := r.start(r.proc.addr, 0)
	if err != nil {
		return nil, fmt.Errorf("restart after the graceful stop: %w", err)
	}
	check, verr := verifyExactlyOnce(r.ctx, r.load, r.proc.base(), marks, r.o.Seed, r.o.Retention)
	check.Set("healthy_after_clean_stop_ms", round(ms(clean.healthy), 1))
	r.load.tr.CloseIdleConnections()
	r.health.CloseIdleConnections()
	if terr := r.proc.term(); terr != nil && verr == nil {
		verr = terr
	}
	r.proc = nil
	return check, verr
}
