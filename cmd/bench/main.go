// Command bench measures Idem's layers next to the physical floors of the
// machine it runs on, in one run, so every number can be read as a ratio
// (docs/design.md §11, §12).
//
//	go run ./cmd/bench -suite wal,engine -duration 2s -concurrency 1,8,64 -json
//
// Each suite is one suite_<name>.go file that registers itself; the floors
// (floor.go) are measured once per run and printed with every suite.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is main without the process: the test drives it with its own args
// and writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	opts, err := f.options(fs)
	if err != nil {
		return err
	}
	suites, err := selectSuites(*f.suiteList)
	if err != nil {
		return err
	}
	cases, err := selectCases(*f.caseList, suites)
	if err != nil {
		return err
	}
	stopRecording, err := startRecording(*f.cpuProf, *f.traceOut)
	if err != nil {
		return err
	}
	defer stopRecording()
	base, cleanup, err := dataDir(*f.dir)
	if err != nil {
		return err
	}
	defer cleanup()

	tables := stdout
	if opts.JSON {
		tables = stderr // keep stdout machine-readable
	}
	rs := newRunState(opts, base, stdout, stderr)
	rs.selected, rs.cases = map[string]bool{}, cases
	for _, s := range suites {
		rs.selected[s.Name] = true
	}
	start := time.Now()
	err = runSuites(ctx, rs, suites, tables, stderr)
	if *f.outPath != "" {
		if werr := writeMarkdown(*f.outPath, rs, args, time.Since(start)); werr != nil && err == nil {
			err = werr
		} else if werr == nil {
			fmt.Fprintf(stderr, "report written to %s\n", *f.outPath)
		}
	}
	return err
}

// runSuites runs the suites in order, stopping at the first that fails,
// with the load average read around them (the report says how busy the
// machine was).
func runSuites(ctx context.Context, rs *runState, suites []Suite, tables, stderr io.Writer) error {
	opts := rs.opts
	if opts.Quick && !opts.JSON {
		fmt.Fprintf(tables, "quick tour of every suite (%s per case, %d-key stores); name suites with -suite for full runs, -h for flags\n",
			opts.Duration, opts.Keys)
	}
	if load, ok := loadAverage(); ok && load > float64(runtime.NumCPU()) {
		fmt.Fprintf(stderr, "warning: load average %.1f on %d cores: other work on this machine will skew the numbers\n", load, runtime.NumCPU())
	}
	rs.loadStart, _ = loadAverage()
	var err error
	for _, s := range suites {
		if err = runSuite(ctx, rs, s, tables); err != nil {
			break
		}
	}
	rs.loadEnd, _ = loadAverage()
	return err
}

// startRecording starts the CPU profile and the execution trace the flags
// ask for; the function it returns stops both.
func startRecording(cpuProf, traceOut string) (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, rec := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{cpuProf, pprof.StartCPUProfile, pprof.StopCPUProfile}, {traceOut, trace.Start, trace.Stop}} {
		if rec.path == "" {
			continue
		}
		stop, err := record(rec.path, rec.start, rec.stop)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}

// dataDir is -dir, created if missing, or a temp dir the cleanup removes.
func dataDir(dir string) (base string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o750)
	}
	if base, err = os.MkdirTemp("", "idem-bench-"); err != nil {
		return "", nil, err
	}
	return base, func() { os.RemoveAll(base) }, nil
}

// The quick tour's scale.
const (
	quickDuration   = 300 * time.Millisecond
	quickStoreSize  = 100_000
	quickReplayKeys = 512
)

// runSuite prints the floors, runs the suite and prints its table, also
// when the suite failed part way (what was measured is still worth seeing).
func runSuite(ctx context.Context, rs *runState, s Suite, tables io.Writer) error {
	env := newEnv(ctx, rs, s.Name)
	floors, err := env.ensureFloors()
	if err != nil {
		return fmt.Errorf("floors: %w", err)
	}
	for _, r := range floors.all() {
		env.Report(r)
	}
	goroutines := runtime.NumGoroutine()
	err = s.Run(env)
	settle(goroutines)
	env.printTable(tables)
	rs.suites = append(rs.suites, suiteRun{Name: s.Name, Doc: s.Doc, Results: env.results, Skipped: env.skipped, Err: err})
	if err != nil {
		return fmt.Errorf("suite %s: %w", s.Name, err)
	}
	return nil
}

// settleMax bounds how long a suite's leftovers may take to wind down.
const (
	settleMax  = 10 * time.Second
	settlePoll = 10 * time.Millisecond
)

// settle waits, up to settleMax, until the process runs no more goroutines
// than it did before the suite. The embedded etcd's peer connections
// outlive its Close by about 3.5 s (until their reads time out), and what
// they free or run meanwhile lands in the next suite's measurements: a
// reopen's heap cost after the etcd suite read negative.
func settle(before int) {
	deadline := time.Now().Add(settleMax)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(settlePoll)
	}
}

func parseConcurrency(list string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad -concurrency entry %q", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty -concurrency list")
	}
	return out, nil
}

// record starts writing a profile or trace of the run to path; the
// function it returns stops it and closes the file.
func record(path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { stop(); f.Close() }, nil
}
