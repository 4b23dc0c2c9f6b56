package receipt

import (
	"sync"
	"sync/atomic"

	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// lifecycle is what every receipt goes through, whatever request made it:
// creation, start, decision, adoption, reconciliation, release and
// cleanup, with the executor capacity, the local flights, the lease
// heartbeat and the active set they share (doc.go maps the steps to
// files). Its steps work on an attempt and take what executes a receipt
// from a planner; they know nothing of keyed batches, so an interactive
// session's commit — which goes through the same receipt-first retained
// 2PC (docs/design.md §14) — can reuse them, sharing recovery, renewal, cleanup
// and capacity with keyed requests instead of copying them.
//
// Concurrency. Every receipt this process works on has at most one local
// flight (flights): the goroutine that holds it is the only one here that
// writes the receipt; duplicates wait on the flight. Across processes,
// ownership is the lease claim and every receipt write is fenced by it.
type lifecycle struct {
	store store.Store
	coord *twopc.Coordinator
	clock lease.Clock
	owner lease.Owner
	opts  Options

	active *lease.ActiveSet
	hb     *lease.Heartbeat
	exec   chan struct{}   // executor slots
	busy   [2]atomic.Int64 // slots in use, by lease.Kind
	drain  drainMeter      // the slots' measured pace (executor.go)
	quotas quotas          // per-principal bounds (quota.go)
	// sessionLocks serialise the steps of one session in this process
	// (striped by ID: bounded, whatever the number of sessions); across
	// processes the session record's version and claim fence them.
	sessionLocks [sessionLockStripes]stripeLock
	stagings     stagingCache // folded stagings of the sessions held here
	dropMu       sync.Mutex
	dropQ        []stepDrop // ended sessions whose steps maintenance deletes

	flights flightSet
	// docs are the latches of documents new receipts here are
	// committing (doclatch.go): contention on a document is waited out.
	docs docLatches

	// replan plans a pending receipt from the request it stores, for a
	// successor or a retry that executes it (Service.planStored).
	replan planner

	// cleanMu serialises this process's cleaner passes (CleanOnce, the
	// loop's ticks): each renews the job lease, which would fence the
	// other's writes, and two folds would race for the same entries.
	cleanMu sync.Mutex

	releaseMu sync.Mutex
	releaseQ  []string
	decCursor []byte // maintenance scan position in txn/v1/dec (under releaseMu)

	stats       counters
	maintainLog *causeLog // what maintenance passed over, sampled
}

func newLifecycle(st store.Store, coord *twopc.Coordinator, owner lease.Owner, opts Options) lifecycle {
	return lifecycle{
		store:        st,
		coord:        coord,
		clock:        opts.Clock,
		owner:        owner,
		opts:         opts,
		active:       lease.NewActiveSet(),
		hb:           &lease.Heartbeat{Store: st, Clock: opts.Clock, TTL: opts.LeaseTTL, Margin: opts.SafetyMargin},
		exec:         make(chan struct{}, opts.ExecutorMax),
		quotas:       newQuotas(),
		maintainLog:  newCauseLog(MaintainLogEvery, MaintainLogCausesMax),
		sessionLocks: newStripeLocks(),
	}
}
