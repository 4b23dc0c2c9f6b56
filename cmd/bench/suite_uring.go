package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// The io_uring experiment (issue 41 part 5): is one record's write and
// fdatasync cheaper through io_uring — linked, one syscall — than through
// the two syscalls the WAL's writer makes? Both sides append records of
// -value-bytes to a growing file of their own, one writer each, as the
// fsync-serial floor does; their p50s are compared in alternating slices
// (pair.go). The WAL adopts io_uring only if it wins by uringWinMin in
// three runs (docs/benchmarks.md records the runs either way).
func init() {
	register(Suite{
		Name:     "uring",
		Rank:     5,
		Optional: true,
		Doc:      "opt-in: one record's write + fdatasync through io_uring (linked, one syscall) against two syscalls, interleaved",
		Run:      runURing,
	})
}

const (
	caseSyscallSerial = "syscall-serial"
	caseURingSerial   = "uring-serial"
	// uringWinMin is the p50 ratio (io_uring over syscalls) at or below
	// which io_uring counts as a win: 5 % is beyond this disk's slice to
	// slice noise in an interleaved pair, and less would not pay for a
	// second write path.
	uringWinMin = 0.95
)

func runURing(env *Env) error {
	rows := map[string]Result{}
	for _, c := range []string{caseSyscallSerial, caseURingSerial} {
		side, err := env.appendSide(c)
		if err != nil {
			return err
		}
		m, err := env.Loop(side.loop, side.op)
		if cerr := side.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		rows[c] = m.Result(c, 1)
	}
	a, err := env.appendSide(caseURingSerial)
	if err != nil {
		return err
	}
	b, err := env.appendSide(caseSyscallSerial)
	if err != nil {
		a.close()
		return err
	}
	pair, err := env.interleave(a, b)
	if err != nil {
		return err
	}
	r := rows[caseURingSerial]
	pair.set(&r, "uring_over_syscall_p50")
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("io_uring write+fdatasync p50 <= %.2f x two syscalls (adopt only if met in three runs)", uringWinMin),
		Got:   pair.describe("µs"),
		Met:   pair.Ratio() <= uringWinMin,
		Score: atMost(pair.Ratio(), uringWinMin),
	})
	env.Report(rows[caseSyscallSerial])
	env.Report(r)
	return nil
}

// appendSide opens a growing file for case c: each op appends one record
// at the file's end and makes it durable, through two syscalls or through
// one linked io_uring submission.
func (e *Env) appendSide(c string) (*benchSide, error) {
	dir, cleanup, err := e.DataDir(c)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, c+".log"), os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		cleanup()
		return nil, err
	}
	var ring *uring
	if c == caseURingSerial {
		if ring, err = newURing(); err != nil {
			f.Close()
			cleanup()
			return nil, err
		}
	}
	rec := e.Value()
	var off int64
	var syncs atomic.Uint64
	return &benchSide{
		loop: Loop{Case: c, Concurrency: 1, Fsyncs: syncs.Load},
		op: func(context.Context, int, uint64) error {
			err := appendDurable(f, ring, rec, off)
			if err == nil {
				off += int64(len(rec))
				syncs.Add(1)
			}
			return err
		},
		close: func() error {
			if ring != nil {
				ring.close()
			}
			err := f.Close()
			cleanup()
			return err
		},
	}, nil
}

// appendDurable writes rec at off and fdatasyncs: through ring when it is
// set, else with pwrite and fdatasync.
func appendDurable(f *os.File, ring *uring, rec []byte, off int64) error {
	if ring != nil {
		return ring.writeSync(f, rec, off)
	}
	if _, err := f.WriteAt(rec, off); err != nil {
		return err
	}
	return fdatasync(f)
}
