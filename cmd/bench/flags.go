package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/idemdb/idem/table"
)

// benchFlags are the command line's flags, parsed into Options by options.
type benchFlags struct {
	suiteList     *string
	duration      *time.Duration
	caseList      *string
	concList      *string
	jsonOut       *bool
	dir           *string
	keepDirs      *bool
	valueB        *int
	keys          *int
	receipts      *int
	capacity      *int
	replayN       *int
	batchDocs     *int
	pgDSN         *string
	pgTuned       *string
	httpCli       *string
	outPath       *string
	cpuProf       *string
	caseProf      *string
	traceOut      *string
	crashKills    *int
	crashInterval *string
	crashClients  *int
	crashSeed     *uint64
	crashMax      *time.Duration
	crashCkpt     *int64
	crashDocs     *int
	crashRetain   *time.Duration
	crashMap      *bool
}

// defineFlags declares every flag on fs and its usage text.
func defineFlags(fs *flag.FlagSet) *benchFlags {
	f := &benchFlags{
		suiteList: fs.String("suite", "", "comma-separated suites to run, or all (default: a quick tour of all: "+defaultNames()+"; opt-in, run only when named: "+optionalNames()+")"),
		duration:  fs.Duration("duration", 2*time.Second, "measured time per case, after a warm-up of min(duration/10, 200ms) (quick tour: "+quickDuration.String()+")"),
		caseList:  fs.String("case", "", "comma-separated cases to run within the selected suites, as case or suite:case (suites that list cases only: receipts, http; e.g. receipts:session-10x10,receipts:keyed-10x); default: every case"),
		concList:  fs.String("concurrency", "1,8,64", "comma-separated closed-loop worker counts (http defaults to 1,8,32)"),
		jsonOut:   fs.Bool("json", false, "print one JSON object per result on stdout (tables go to stderr)"),
		dir:       fs.String("dir", "", "directory for data (default: a temp dir under "+os.TempDir()+", removed afterwards)"),
		keepDirs:  fs.Bool("keep-dirs", false, "keep each case's data directory under -dir instead of removing it (to open a filled store again by hand)"),
		valueB:    fs.Int("value-bytes", 200, "bytes per written value or record (wal, engine)"),
		keys:      fs.Int("keys", 1_000_000, "keys in the store for the engine recovery case (quick tour: 100000)"),
		receipts:  fs.Int("receipts", 1_000_000, "terminal receipts for the reopen case (quick tour: 100000)"),
		capacity:  fs.Int("capacity", 20_000_000, "capacity: retained terminal receipts to fill the store with"),
		replayN:   fs.Int("replay-keys", 4096, "terminal receipts (or peer key rows) that replay cases create first and cycle through (quick tour: 512)"),
		batchDocs: fs.Int("batch-docs", 10, "documents per batch (twopc, receipts, http, peer, crashloop), each of about 190 bytes"),
		pgDSN:     fs.String("pg", "", "PostgreSQL DSN (postgres://...) for the peer suite, on default settings; see cmd/bench/pg-throwaway.sh"),
		pgTuned:   fs.String("pg-tuned", "", "PostgreSQL DSN of the same server tuned for this workload (cmd/bench/pg-throwaway.sh start tuned): the peer suite runs its cases on it too, as pg-tuned-*, and judges Idem's ratios against it instead of -pg's"),
		httpCli:   fs.String("http-client", "lean", "load generator of the http suite and the pg-http peer: lean (one connection per worker, one write per request, the answer parsed in place, as wrk) or net (net/http's client)"),
		outPath:   fs.String("out", "", "write a Markdown report (machine, tables, targets) here, with PNG charts beside it"),
		cpuProf:   fs.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)"),
		caseProf:  fs.String("cpuprofile-cases", "", "write a CPU profile of each case's measured window into this directory, as <suite>-<case>-c<N>.prof (not with -cpuprofile: one CPU profile at a time)"),
		traceOut:  fs.String("trace", "", "write an execution trace of the whole run here (go tool trace; -pprof=sched shows who waited for a CPU)"),

		crashKills:    fs.Int("crashloop-kills", 100, "crashloop: SIGKILLs of idemd under load (the suite stops after the last restart is healthy)"),
		crashInterval: fs.String("crashloop-interval", "2s-5s", "crashloop: load time between a restart answering /healthz and the next SIGKILL: MIN-MAX (uniform, seeded) or one duration"),
		crashClients:  fs.Int("crashloop-clients", 16, "crashloop: HTTP clients, each posting keyed -batch-docs batches back to back"),
		crashSeed:     fs.Uint64("crashloop-seed", 1, "crashloop: seed of the kill intervals and of the exactly-once sample"),
		crashMax:      fs.Duration("crashloop-max", time.Hour, "crashloop: wall-clock cap of the kill loop; it stops early (fewer kills, reported) when the next interval would pass it"),
		crashCkpt:     fs.Int64("crashloop-checkpoint-bytes", 0, "crashloop: idemd -checkpoint-bytes (0: idemd's default, 64 MiB)"),
		crashDocs:     fs.Int("crashloop-docs", 0, "crashloop: documents the batches write, ids reused round-robin, so the store stops growing (0: every batch inserts new documents)"),
		crashMap:      fs.Bool("crashloop-map-checkpoints", true, "crashloop: idemd -map-checkpoints, its default (false: each start reads its checkpoint files instead of mapping them)"),
		crashRetain:   fs.Duration("crashloop-retention", 0, "crashloop: idemd -retention of terminal receipts (0: idemd's default, 24h); short with -crashloop-docs keeps the store's size steady"),
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench [flags]\n\nWithout -suite: a quick tour of every suite (%s per case, 100k-key stores).\n\nsuites:\n", quickDuration)
		for _, s := range allSuites() {
			fmt.Fprintf(fs.Output(), "  %-10s %s\n", s.Name, s.Doc)
		}
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}

	return f
}

// options validates the flags and turns them into Options. The quick tour
// (no -suite) scales every case down, except what a flag names explicitly.
func (f *benchFlags) options(fs *flag.FlagSet) (Options, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	conc, err := parseConcurrency(*f.concList)
	if err != nil {
		return Options{}, err
	}
	if *f.duration <= 0 || *f.valueB < 0 || *f.keys < 1 || *f.receipts < 1 || *f.capacity < capacityStages || *f.replayN < 1 || *f.batchDocs < 1 || *f.batchDocs > table.BatchDocsMax {
		return Options{}, fmt.Errorf("need -duration > 0, -value-bytes >= 0, -keys, -receipts, -replay-keys >= 1, -capacity >= %d, -batch-docs in 1..%d", capacityStages, table.BatchDocsMax)
	}
	if *f.caseProf != "" && *f.cpuProf != "" {
		return Options{}, errors.New("-cpuprofile-cases and -cpuprofile: Go keeps one CPU profile at a time, name one")
	}
	if *f.caseProf != "" {
		if st, err := os.Stat(*f.caseProf); err != nil || !st.IsDir() {
			return Options{}, fmt.Errorf("-cpuprofile-cases %s: not a directory", *f.caseProf)
		}
	}
	crash, err := f.crashloop()
	if err != nil {
		return Options{}, err
	}
	opts := Options{Duration: *f.duration, Concurrency: conc, ConcurrencySet: set["concurrency"],
		ValueBytes: *f.valueB, Keys: *f.keys, Receipts: *f.receipts, Capacity: *f.capacity, BatchDocs: *f.batchDocs, ReplayKeys: *f.replayN,
		JSON: *f.jsonOut, PG: *f.pgDSN, PGTuned: *f.pgTuned, HTTPClient: *f.httpCli, CaseProfiles: *f.caseProf, KeepDirs: *f.keepDirs, Crashloop: crash}
	if set["suite"] {
		return opts, nil
	}
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
	return opts, nil
}

// crashloop validates the -crashloop-* flags.
func (f *benchFlags) crashloop() (CrashloopOptions, error) {
	crash := CrashloopOptions{Kills: *f.crashKills, Clients: *f.crashClients, Seed: *f.crashSeed, MaxWall: *f.crashMax,
		CheckpointBytes: *f.crashCkpt, Docs: *f.crashDocs, Retention: *f.crashRetain, MapCheckpoints: *f.crashMap}
	var err error
	if crash.IntervalMin, crash.IntervalMax, err = parseCrashInterval(*f.crashInterval); err != nil {
		return crash, fmt.Errorf("-crashloop-interval: %w", err)
	}
	if crash.Kills < 1 || crash.Clients < 1 || crash.MaxWall <= 0 || crash.CheckpointBytes < 0 || crash.Docs < 0 || crash.Retention < 0 {
		return crash, errors.New("need -crashloop-kills, -crashloop-clients >= 1, -crashloop-max > 0, -crashloop-checkpoint-bytes, -crashloop-docs, -crashloop-retention >= 0")
	}
	return crash, nil
}
