package main

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// casePGKeyedHot is peer:pg-keyed-hot (issue 37): the pipelined brandur
// flow of pg-keyed-pipe whose second transaction also increments one shared
// row (UPDATE … SET n = n + 1), the twin of receipts:keyed-hot. The row
// lock serializes the transactions, each holding it through its commit's
// fsync: about one commit per commit latency, the anchor Idem's chained
// increments must beat.
const casePGKeyedHot = "pg-keyed-hot"

// PostgreSQL's SQLSTATEs of a transaction aborted for contention: counted
// in aborts_per_op, as Idem's transaction_conflict answers are.
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
)

// peerKeyedHotCases runs pg-keyed-hot at each concurrency.
func peerKeyedHotCases(env *Env, pool *pgxpool.Pool, prof peerProfile, concs []int) ([]*Result, error) {
	var out []*Result
	for _, c := range concs {
		r, err := peerKeyedHotCase(env, pool, prof, c)
		if err != nil {
			return out, err
		}
		out = append(out, &r)
	}
	return out, nil
}

func peerKeyedHotCase(env *Env, pool *pgxpool.Pool, prof peerProfile, concurrency int) (Result, error) {
	_, _ = pool.Exec(env.Ctx, "CHECKPOINT") // as peerCase: the last case's writes
	if err := warmPool(env.Ctx, pool, concurrency); err != nil {
		return Result{}, err
	}
	wl := newWorkload(env.Opts.BatchDocs)
	var aborts atomic.Uint64
	m, err := env.Loop(Loop{Case: prof.caseName(casePGKeyedHot), Concurrency: concurrency, ServerOutside: true},
		func(ctx context.Context, w int, i uint64) error {
			r := wl.peerRequest(w, i)
			err := peerKeyedHot(ctx, pool, &r)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == pgSerializationFailure || pe.Code == pgDeadlockDetected) {
				aborts.Add(1)
				return nil
			}
			return err
		})
	if err != nil {
		return Result{}, err
	}
	r := m.Result(prof.caseName(casePGKeyedHot), concurrency)
	setAborts(&r, aborts.Load())
	return r, nil
}

// peerKeyedHot is peerKeyedPipe with the increment: the pending key, then
// the documents, the response and the increment as one implicit
// transaction. The increment goes last, so the row lock is held for the
// least time: from the UPDATE through the commit.
func peerKeyedHot(ctx context.Context, pool *pgxpool.Pool, r *peerRequest) error {
	return peerKeyedPipeThen(ctx, pool, r, peerSQL.incHot)
}
