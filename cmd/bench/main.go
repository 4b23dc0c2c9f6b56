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

	"github.com/idemdb/idem/table"
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
	var (
		suiteList = fs.String("suite", "", "comma-separated suites to run, or all (default: a quick tour of all: "+defaultNames()+"; opt-in, run only when named: "+optionalNames()+")")
		duration  = fs.Duration("duration", 2*time.Second, "measured time per case, after a warm-up of min(duration/10, 200ms) (quick tour: "+quickDuration.String()+")")
		caseList  = fs.String("case", "", "comma-separated cases to run within the selected suites, as case or suite:case (suites that list cases only: receipts, http; e.g. receipts:session-10x10,receipts:keyed-10x); default: every case")
		concList  = fs.String("concurrency", "1,8,64", "comma-separated closed-loop worker counts (http defaults to 1,8,32)")
		jsonOut   = fs.Bool("json", false, "print one JSON object per result on stdout (tables go to stderr)")
		dir       = fs.String("dir", "", "directory for data (default: a temp dir under "+os.TempDir()+", removed afterwards)")
		valueB    = fs.Int("value-bytes", 200, "bytes per written value or record (wal, engine)")
		keys      = fs.Int("keys", 1_000_000, "keys in the store for the engine recovery case (quick tour: 100000)")
		receipts  = fs.Int("receipts", 1_000_000, "terminal receipts for the reopen case (quick tour: 100000)")
		capacity  = fs.Int("capacity", 20_000_000, "capacity: retained terminal receipts to fill the store with")
		replayN   = fs.Int("replay-keys", 4096, "terminal receipts (or peer key rows) that replay cases create first and cycle through (quick tour: 512)")
		batchDocs = fs.Int("batch-docs", 10, "documents per batch (twopc, receipts, http, peer, crashloop), each of about 190 bytes")
		pgDSN     = fs.String("pg", "", "PostgreSQL DSN (postgres://...) for the peer suite, on default settings; see cmd/bench/pg-throwaway.sh")
		pgTuned   = fs.String("pg-tuned", "", "PostgreSQL DSN of the same server tuned for this workload (cmd/bench/pg-throwaway.sh start tuned): the peer suite runs its cases on it too, as pg-tuned-*, and judges Idem's ratios against it instead of -pg's")
		httpCli   = fs.String("http-client", "lean", "load generator of the http suite and the pg-http peer: lean (one connection per worker, one write per request, the answer parsed in place, as wrk) or net (net/http's client)")
		outPath   = fs.String("out", "", "write a Markdown report (machine, tables, targets) here, with PNG charts beside it")
		cpuProf   = fs.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)")
		traceOut  = fs.String("trace", "", "write an execution trace of the whole run here (go tool trace; -pprof=sched shows who waited for a CPU)")

		crashKills    = fs.Int("crashloop-kills", 100, "crashloop: SIGKILLs of idemd under load (the suite stops after the last restart is healthy)")
		crashInterval = fs.String("crashloop-interval", "2s-5s", "crashloop: load time between a restart answering /healthz and the next SIGKILL: MIN-MAX (uniform, seeded) or one duration")
		crashClients  = fs.Int("crashloop-clients", 16, "crashloop: HTTP clients, each posting keyed -batch-docs batches back to back")
		crashSeed     = fs.Uint64("crashloop-seed", 1, "crashloop: seed of the kill intervals and of the exactly-once sample")
		crashMax      = fs.Duration("crashloop-max", time.Hour, "crashloop: wall-clock cap of the kill loop; it stops early (fewer kills, reported) when the next interval would pass it")
		crashCkpt     = fs.Int64("crashloop-checkpoint-bytes", 0, "crashloop: idemd -checkpoint-bytes (0: idemd's default, 64 MiB)")
		crashDocs     = fs.Int("crashloop-docs", 0, "crashloop: documents the batches write, ids reused round-robin, so the store stops growing (0: every batch inserts new documents)")
		crashRetain   = fs.Duration("crashloop-retention", 0, "crashloop: idemd -retention of terminal receipts (0: idemd's default, 24h); short with -crashloop-docs keeps the store's size steady")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench [flags]\n\nWithout -suite: a quick tour of every suite (%s per case, 100k-key stores).\n\nsuites:\n", quickDuration)
		for _, s := range allSuites() {
			fmt.Fprintf(fs.Output(), "  %-10s %s\n", s.Name, s.Doc)
		}
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	conc, err := parseConcurrency(*concList)
	if err != nil {
		return err
	}
	if *duration <= 0 || *valueB < 0 || *keys < 1 || *receipts < 1 || *capacity < capacityStages || *replayN < 1 || *batchDocs < 1 || *batchDocs > table.BatchDocsMax {
		return fmt.Errorf("need -duration > 0, -value-bytes >= 0, -keys, -receipts, -replay-keys >= 1, -capacity >= %d, -batch-docs in 1..%d", capacityStages, table.BatchDocsMax)
	}
	crash := CrashloopOptions{Kills: *crashKills, Clients: *crashClients, Seed: *crashSeed, MaxWall: *crashMax,
		CheckpointBytes: *crashCkpt, Docs: *crashDocs, Retention: *crashRetain}
	if crash.IntervalMin, crash.IntervalMax, err = parseCrashInterval(*crashInterval); err != nil {
		return fmt.Errorf("-crashloop-interval: %w", err)
	}
	if crash.Kills < 1 || crash.Clients < 1 || crash.MaxWall <= 0 || crash.CheckpointBytes < 0 || crash.Docs < 0 || crash.Retention < 0 {
		return errors.New("need -crashloop-kills, -crashloop-clients >= 1, -crashloop-max > 0, -crashloop-checkpoint-bytes, -crashloop-docs, -crashloop-retention >= 0")
	}
	suites, err := selectSuites(*suiteList)
	if err != nil {
		return err
	}
	cases, err := selectCases(*caseList, suites)
	if err != nil {
		return err
	}
	opts := Options{Duration: *duration, Concurrency: conc, ConcurrencySet: set["concurrency"],
		ValueBytes: *valueB, Keys: *keys, Receipts: *receipts, Capacity: *capacity, BatchDocs: *batchDocs, ReplayKeys: *replayN,
		JSON: *jsonOut, PG: *pgDSN, PGTuned: *pgTuned, HTTPClient: *httpCli, Crashloop: crash}
	// The quick tour: no suite named, so every suite runs briefly. Flags
	// given explicitly still win.
	if !set["suite"] {
		opts.Quick = true
		if !set["duration"] {
			opts.Duration = quickDuration
		}
		if !set["keys"] {
			opts.Keys = quickStoreSize
		}
		if !set["receipts"] {
			opts.Receipts = quickStoreSize
		}
		if !set["replay-keys"] {
			opts.ReplayKeys = quickReplayKeys
		}
	}

	for _, rec := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{*cpuProf, pprof.StartCPUProfile, pprof.StopCPUProfile}, {*traceOut, trace.Start, trace.Stop}} {
		if rec.path == "" {
			continue
		}
		stop, err := record(rec.path, rec.start, rec.stop)
		if err != nil {
			return err
		}
		defer stop()
	}

	base := *dir
	if base == "" {
		if base, err = os.MkdirTemp("", "idem-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(base)
	} else if err := os.MkdirAll(base, 0o750); err != nil {
		return err
	}

	tables := stdout
	if opts.JSON {
		tables = stderr // keep stdout machine-readable
	}
	rs := newRunState(opts, base, stdout, stderr)
	rs.selected, rs.cases = map[string]bool{}, cases
	for _, s := range suites {
		rs.selected[s.Name] = true
	}
	if opts.Quick && !opts.JSON {
		fmt.Fprintf(tables, "quick tour of every suite (%s per case, %d-key stores); name suites with -suite for full runs, -h for flags\n",
			opts.Duration, opts.Keys)
	}
	if load, ok := loadAverage(); ok && load > float64(runtime.NumCPU()) {
		fmt.Fprintf(stderr, "warning: load average %.1f on %d cores: other work on this machine will skew the numbers\n", load, runtime.NumCPU())
	}
	rs.loadStart, _ = loadAverage()
	start := time.Now()
	for _, s := range suites {
		err = runSuite(ctx, rs, s, tables)
		if err != nil {
			break
		}
	}
	rs.loadEnd, _ = loadAverage()
	if *outPath != "" {
		if werr := writeMarkdown(*outPath, rs, args, time.Since(start)); werr != nil && err == nil {
			err = werr
		} else if werr == nil {
			fmt.Fprintf(stderr, "report written to %s\n", *outPath)
		}
	}
	return err
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
