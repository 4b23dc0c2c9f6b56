package main

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"testing"
	"time"
)

// A case's window reports the process's CPU per op and the cores it kept
// busy, unless its server runs in another process, whose CPU it cannot see.
func TestLoop_ReportsTheProcessCPUUnlessTheServerIsOutside(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := &Env{Opts: Options{JSON: true, Duration: 50 * time.Millisecond}, Ctx: ctx, suite: "test"}
	var sink atomic.Uint64 // the work's results, so that none of it can be left out
	work := func(context.Context, int, uint64) error {
		buf := make([]byte, 64<<10)
		for range 4 {
			sum := sha256.Sum256(buf)
			sink.Add(uint64(sum[0]))
		}
		return nil
	}
	for _, outside := range []bool{false, true} {
		m, err := env.Loop(Loop{Case: "cpu", Concurrency: 2, ServerOutside: outside}, work)
		if err != nil {
			t.Fatal(err)
		}
		r := m.Result("cpu", 2)
		perOp, hasPerOp := r.Extra["cpu_us_per_op"].(float64)
		cores, hasCores := r.Extra["cpu_cores"].(float64)
		switch {
		case outside && (hasPerOp || hasCores):
			t.Errorf("server outside: reported %v µs/op on %v cores, want nothing", r.Extra["cpu_us_per_op"], r.Extra["cpu_cores"])
		case !outside && (!hasPerOp || perOp <= 0 || !hasCores || cores <= 0):
			t.Errorf("in process: cpu_us_per_op %v, cpu_cores %v, want both > 0", r.Extra["cpu_us_per_op"], r.Extra["cpu_cores"])
		}
	}
}
