package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
)

// Per-case CPU profiles (-cpuprofile-cases DIR): one profile per measured
// window, DIR/<suite>-<case>-c<N>.prof. A whole-run profile (-cpuprofile)
// also holds the setup, the warm-ups and whatever a suite does between
// cases (etcd's compaction and defragmentation for the space figures),
// which drowns the case one wants to split; a window's profile holds only
// what ran while the case was measured, every goroutine of the process
// included (an embedded etcd's members too).

// caseProfile starts the CPU profile of loop l's measured window in dir ("":
// none) and returns what stops it. A profile that cannot start is reported
// and skipped: it must not fail the measurement.
func (e *Env) caseProfile(dir string, l Loop) func() {
	if dir == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(fmt.Sprintf("%s-%s-c%d.prof", e.suite, l.Case, l.Concurrency))
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(e.run.diag, "warning: -cpuprofile-cases: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(e.run.diag, "warning: -cpuprofile-cases: %v\n", err)
		}
	}
}
