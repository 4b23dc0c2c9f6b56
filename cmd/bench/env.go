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
	ValueBytes  int           // size of each written value / record
	Keys        int           // store size for recovery cases
	JSON        bool          // one JSON object per result line on stdout
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
}

func newEnv(ctx context.Context, run *runState, suite string) *Env {
	return &Env{Opts: run.opts, Ctx: ctx, suite: suite, run: run}
}

// Suite is the name of the running suite.
func (e *Env) Suite() string { return e.suite }

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
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(e.run.diag, "\r%-79s", line)
}

// ProgressDone erases the progress line.
func (e *Env) ProgressDone() {
	if e.Opts.JSON {
		return
	}
	fmt.Fprintf(e.run.diag, "\r%s\r", strings.Repeat(" ", 79))
}
