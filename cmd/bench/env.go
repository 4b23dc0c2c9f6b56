package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"
)

// Options are the command-line settings every suite sees.
type Options struct {
	Duration    time.Duration // measured time per case, after warm-up
	Concurrency []int         // closed-loop worker counts
	// ConcurrencySet: -concurrency was given, so suites with their own
	// default list (http: 1,8,32) use Concurrency instead.
	ConcurrencySet bool
	ValueBytes     int    // size of each written value / record
	Keys           int    // store size for recovery cases
	Receipts       int    // terminal receipts for the reopen case
	Capacity       int    // retained receipts the capacity suite fills its store with
	BatchDocs      int    // documents per batch (twopc, receipts, http, peer)
	ReplayKeys     int    // pre-created keys that replay cases cycle through
	JSON           bool   // one JSON object per result line on stdout
	PG             string // PostgreSQL DSN for the peer suite; "" skips it
	// PGTuned is the tuned PostgreSQL's DSN (pg-throwaway.sh start tuned):
	// its rows are pg-tuned-*, and Idem's ratios are judged against it.
	PGTuned string
	// HTTPClient is the http suite's load generator: lean or net
	// (loadclient.go); the pg-http peer uses the same.
	HTTPClient string
	// Quick marks the no-flag tour: short cases and scaled-down stores.
	Quick bool
	// CaseProfiles is -cpuprofile-cases: a directory for one CPU profile
	// per measured window (caseprofile.go); "" for none.
	CaseProfiles string
	// KeepDirs is -keep-dirs: DataDir's cleanup leaves the case's
	// directory, so a store a case filled can be opened again by hand.
	KeepDirs bool
	// Crashloop holds the -crashloop-* flags of the opt-in crashloop suite.
	Crashloop CrashloopOptions
}

// runState is shared by all suites of one invocation: the floors are
// measured once per run and reused, so every suite's ratios divide by the
// same numbers.
type runState struct {
	opts    Options
	baseDir string
	fs      string
	out     io.Writer // JSON lines, or the tables
	diag    io.Writer // progress lines; the tables too when out carries JSON
	value   []byte

	floorOnce sync.Once
	floors    *Floors
	floorErr  error

	selected map[string]bool            // suites of this invocation
	cases    map[string]map[string]bool // -case: per suite, the cases to run; nil runs every case
	suites   []suiteRun                 // finished suites, in run order (for -out)
	all      []Result                   // every reported result, floors included

	loadStart, loadEnd float64 // 1-minute load average around the run

	progressMu   sync.Mutex
	progressLast time.Time
}

// suiteRun is one finished suite: what it reported and how it ended.
type suiteRun struct {
	Name    string
	Doc     string
	Results []Result
	Skipped string // reason, when the suite did not run
	Err     error
}

func newRunState(opts Options, baseDir string, out, diag io.Writer) *runState {
	// Random bytes, so no layer can look better by compressing.
	value := make([]byte, opts.ValueBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(r.Uint32())
	}
	return &runState{opts: opts, baseDir: baseDir, fs: fsType(baseDir), out: out, diag: diag, value: value}
}

// Env is what a suite's Run gets: the options, a data-dir factory, the
// closed-loop runner (Loop), the floors of this run and Report.
type Env struct {
	Opts Options
	Ctx  context.Context

	suite   string
	run     *runState
	results []Result
	skipped string
	// slice, when set, is an interleaved pair's slice instead of
	// pairSlice(-duration): a test of the alternation itself, whose sides
	// do nothing, need not spin through pairSliceMin's 16 windows.
	slice time.Duration
}

func newEnv(ctx context.Context, run *runState, suite string) *Env {
	return &Env{Opts: run.opts, Ctx: ctx, suite: suite, run: run}
}

// Suite is the name of the running suite.
func (e *Env) Suite() string { return e.suite }

// Selected reports whether suite name runs in this invocation. Suites use it
// to leave out a heavy case that another selected suite measures (receipts
// leaves reopen to recovery and renewal to renewal), so `-suite all` runs
// each case once.
func (e *Env) Selected(name string) bool { return e.run.selected[name] }

// Want reports whether the running suite should measure case name: always,
// unless -case narrowed it (selectCases). Only suites that list their
// Cases ask.
func (e *Env) Want(name string) bool {
	return e.run.cases == nil || e.run.cases[e.suite][name]
}

// Earlier returns the results reported so far in this run by suite (not
// its floor lines), for cross-suite ratios such as Idem against the peer.
func (e *Env) Earlier(suite string) []Result {
	var out []Result
	for _, r := range e.run.all {
		if r.Suite == suite && !r.Floor {
			out = append(out, r)
		}
	}
	return out
}

// Skip records that the suite did not run, with the reason: a line in the
// table and, with -json, a JSON line carrying "skipped":true.
func (e *Env) Skip(reason string) {
	e.skipped = reason
	r := Result{Suite: e.suite, Case: "skipped", NoFloorRatio: true}
	r.Set("skipped", true)
	r.Set("reason", reason)
	if e.Opts.JSON {
		line, err := r.json(e.run)
		if err != nil {
			panic(err)
		}
		e.run.out.Write(append(line, '\n'))
	}
}

// Value is a shared read-only value of -value-bytes random bytes. Callers
// must not modify it.
func (e *Env) Value() []byte { return e.run.value }

// DataDir creates a fresh, empty directory for one case under the run's
// base directory. cleanup removes it; suites defer it so a long run does not
// pile up gigabytes of logs.
func (e *Env) DataDir(name string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp(e.run.baseDir, e.suite+"-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	if e.Opts.KeepDirs {
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Floors returns this run's physical floors (measured before the first
// suite ran).
func (e *Env) Floors() *Floors { return e.run.floors }

// Progress overwrites the progress line on stderr. It is silent with -json,
// where stderr may be captured next to machine-read output.
func (e *Env) Progress(format string, args ...any) {
	if e.Opts.JSON {
		return
	}
	// At most ten updates a second: a build loop may report every batch.
	e.run.progressMu.Lock()
	defer e.run.progressMu.Unlock()
	now := time.Now()
	if now.Sub(e.run.progressLast) < 100*time.Millisecond {
		return
	}
	e.run.progressLast = now
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(e.run.diag, "\r%-79.79s", line)
}

// ProgressDone erases the progress line.
func (e *Env) ProgressDone() {
	if e.Opts.JSON {
		return
	}
	e.run.progressMu.Lock()
	defer e.run.progressMu.Unlock()
	e.run.progressLast = time.Time{}
	fmt.Fprintf(e.run.diag, "\r%s\r", strings.Repeat(" ", 79))
}
