package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/idemdb/idem/engine"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/receipt"
	"github.com/idemdb/idem/store"
)

func init() {
	register(Suite{
		Name: "renewal",
		Rank: 70,
		Doc:  "lease.Supervisor: renewing an active set of 10 000 held leases in bounded batches (leases/s, Applies per pass)",
		Run:  renewalCase,
	})
}

const (
	// renewalSetSize is the active set of issue 4's fairness test.
	renewalSetSize = 10_000
	// renewalTTL is the service's default lease TTL.
	renewalTTL = 10 * time.Second
	// renewalClaimBatch is the claims published per Apply while building.
	renewalClaimBatch = 1000
)

// renewalCase builds an active set of renewalSetSize leases (claims
// published in the store exactly as receipt creation publishes them) and
// measures the renewal supervisor: one call is one round, the clock moved
// on by one renewal interval and ⌈set/BatchMax⌉ passes, after which every
// lease must have been renewed once. The clock is simulated, so every lease
// is due in every round and a round measures only the renewal work.
func renewalCase(env *Env) error {
	dir, cleanup, err := env.DataDir("renewal")
	if err != nil {
		return err
	}
	defer cleanup()
	db, err := engine.Open(dir, engine.Options{Logger: discardLogger})
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := env.Ctx
	owner, err := lease.Register(ctx, db, "bench-node")
	if err != nil {
		return err
	}
	clock := lease.NewSim(time.Now())
	set := lease.NewActiveSet()
	hb := &lease.Heartbeat{Store: db, Clock: clock, TTL: renewalTTL, Margin: renewalTTL / 5}
	sup := lease.NewSupervisor(set, hb, lease.SupervisorOptions{}) // driven by hand, never started

	if err := publishClaims(env, db, owner, clock, set); err != nil {
		return err
	}

	batchMax := lease.RenewBatchMax
	passes := (set.Len() + batchMax - 1) / batchMax
	s0 := sup.Stats()
	m, err := env.Loop(Loop{Case: "renewal", Concurrency: 1, ItemsPerCall: set.Len(), Fsyncs: func() uint64 { return db.Stats().WAL.Fsyncs }},
		func(ctx context.Context, _ int, _ uint64) error {
			clock.Advance(sup.Interval())
			renewed := 0
			for range passes {
				rep := sup.Pass(ctx)
				renewed += rep.Renewed
				if rep.Fenced > 0 || rep.Uncertain > 0 {
					return fmt.Errorf("renewal pass: %d fenced, %d uncertain", rep.Fenced, rep.Uncertain)
				}
			}
			if renewed != set.Len() {
				return fmt.Errorf("a round of %d passes renewed %d of %d leases", passes, renewed, set.Len())
			}
			return nil
		})
	if err != nil {
		return err
	}
	r := renewalResult(m, set.Len(), passes, s0, sup.Stats())
	env.Report(r)
	return nil
}

// publishClaims claims renewalSetSize leases in batches of
// renewalClaimBatch, as many receipts' first attempts would, and adds
// each to the active set once its claim is durable.
func publishClaims(env *Env, db *engine.DB, owner lease.Owner, clock *lease.Sim, set *lease.ActiveSet) error {
	env.Progress("%s/renewal publishing %d claims", env.Suite(), renewalSetSize)
	defer env.ProgressDone()
	for lo := 0; lo < renewalSetSize; lo += renewalClaimBatch {
		until := clock.Now().Add(renewalTTL)
		b := new(store.Batch)
		var helds []*lease.Held
		for i := lo; i < min(lo+renewalClaimBatch, renewalSetSize); i++ {
			id := receipt.Bind(benchPrincipal, benchTable, "renewal-"+strconv.Itoa(i))
			helds = append(helds, lease.ClaimNew(b, id, owner, until))
		}
		v, err := db.Apply(env.Ctx, b)
		if err != nil {
			return err
		}
		for _, h := range helds {
			h.Confirmed(v, until)
			set.Add(h)
		}
	}
	return nil
}

// renewalResult is the case's row: leases renewed per second, and
// Applies per pass from the supervisor's counters over the window.
func renewalResult(m Measured, setLen, passes int, s0, s1 lease.SupervisorStats) Result {
	batchMax := lease.RenewBatchMax
	r := m.Result("renewal", 1)
	r.NoFloorRatio = true // leases renewed per second, many per Apply
	r.Set("active_set", setLen)
	r.Set("batch_max", batchMax)
	r.Set("passes_per_round", passes)
	r.Set("latency_per", "round of every lease")
	dp, dw, dr := s1.Passes-s0.Passes, s1.Writes-s0.Writes, s1.Renewed-s0.Renewed
	applies := 0.0
	if dp > 0 {
		applies = float64(dw) / float64(dp)
		r.Set("applies_per_pass", round(applies, 3))
	}
	if dw > 0 {
		r.Set("leases_per_apply", round(float64(dr)/float64(dw), 1))
	}
	r.Targets = append(r.Targets, Target{
		Want:  fmt.Sprintf("one Apply per renewal pass; every lease renewed within ceil(%d/%d) = %d passes", setLen, batchMax, passes),
		Got:   fmt.Sprintf("%.3f Applies per pass, every round renewed all %d", applies, setLen),
		Met:   dp > 0 && applies <= 1.0,
		Score: atMost(applies, 1.0),
	})
	return r
}
