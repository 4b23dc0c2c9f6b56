package main

import (
	"context"

	"github.com/idemdb/idem/wal"
)

func init() {
	register(Suite{
		Name: "wal",
		Rank: 10,
		Doc:  "our wal: Reserve + Enqueue + Commit.Wait of value-bytes bodies (group commit)",
		Run:  runWAL,
	})
}

func runWAL(env *Env) error {
	for _, c := range env.Opts.Concurrency {
		if err := walAppend(env, c); err != nil {
			return err
		}
	}
	return nil
}

// walAppend measures durable appends through the full wal path: a queue
// slot, a place in the open group, and the wait for its fsync.
func walAppend(env *Env, concurrency int) error {
	dir, cleanup, err := env.DataDir("append")
	if err != nil {
		return err
	}
	defer cleanup()
	l, _, err := wal.Open(dir, wal.Options{})
	if err != nil {
		return err
	}
	// The body is shared and never modified, which is all the wal asks of
	// bodies in flight.
	body := env.Value()
	m, err := env.Loop(Loop{Case: "append", Concurrency: concurrency, Fsyncs: func() uint64 { return l.Stats().Fsyncs }},
		func(ctx context.Context, _ int, _ uint64) error {
			if err := l.Reserve(ctx); err != nil {
				return err
			}
			_, c, err := l.Enqueue(wal.KindBatch, body, nil)
			if err != nil {
				return err
			}
			return c.Wait(ctx)
		})
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	env.Report(m.Result("append", concurrency))
	return nil
}
