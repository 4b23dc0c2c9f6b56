package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
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
	replayed  int64         // log bytes the open replayed (-1: not logged)
	dataBytes int64         // the whole data dir once healthy
	ckptBytes int64         // the checkpoint files on disk, every link kept (0: none yet)
	ckpts     int           // checkpoint links present (a base's parts count once)
	newest    string        // the newest checkpoint's name ("": none)
	ckptTmps  int           // ckpt-*.tmp files present (a checkpoint cut short by a kill)
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
		s := crashStart{kill: kill, listen: p.listen, healthy: healthy, replayed: p.replayed.Load()}
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
	check, verr := verifyExactlyOnce(ctx, load, proc.base(), marks, o.Seed, o.Retention)
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
