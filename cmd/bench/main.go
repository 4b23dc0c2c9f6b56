// Command bench measures Idem's layers next to the physical floors of the
// machine it runs on, in one run, so every number can be read as a ratio
// (DESIGN §11, §12).
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
	var (
		suiteList = fs.String("suite", "", "comma-separated suites to run (default: all registered: "+suiteNames()+")")
		duration  = fs.Duration("duration", 2*time.Second, "measured time per case, after a warm-up of min(duration/10, 200ms)")
		concList  = fs.String("concurrency", "1,8,64", "comma-separated closed-loop worker counts")
		jsonOut   = fs.Bool("json", false, "print one JSON object per result on stdout (tables go to stderr)")
		dir       = fs.String("dir", "", "directory for data (default: a temp dir under "+os.TempDir()+", removed afterwards)")
		valueB    = fs.Int("value-bytes", 200, "bytes per written value or record")
		keys      = fs.Int("keys", 1_000_000, "keys in the store for recovery cases")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench [flags]\n\nsuites:\n")
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
	conc, err := parseConcurrency(*concList)
	if err != nil {
		return err
	}
	if *duration <= 0 || *valueB < 0 || *keys < 1 {
		return fmt.Errorf("need -duration > 0, -value-bytes >= 0, -keys >= 1")
	}
	suites, err := selectSuites(*suiteList)
	if err != nil {
		return err
	}
	opts := Options{Duration: *duration, Concurrency: conc, ValueBytes: *valueB, Keys: *keys, JSON: *jsonOut}

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
	for _, s := range suites {
		if err := runSuite(ctx, rs, s, tables); err != nil {
			return err
		}
	}
	return nil
}

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
	err = s.Run(env)
	env.printTable(tables)
	if err != nil {
		return fmt.Errorf("suite %s: %w", s.Name, err)
	}
	return nil
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
