package receipt

import (
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/table"
	"github.com/idemdb/idem/twopc"
)

// core is what every component of the Service shares and none owns: the
// store and the coordinator every receipt is written through, the clock,
// this process's identity, the active set of leases held here and the
// heartbeat that renews them, the counters and the sampled log of what
// maintenance passed over. Its methods read (receipts, tombstones,
// listings), count and shape answers; none writes to the store, so any
// component may call them without taking part in another's concurrency.
//
// The Service is a facade over its components, each with explicit links
// to the ones it calls (doc.go gives the route of one keyed request):
//
//	core       shared state, reads and accounting (this file)
//	executor   slots, flights, document latches, quotas (executor.go)
//	flow       the steps of one receipt on an attempt (flow.go)
//	recovery   maintenance, reconciliation, operator resolution (recovery.go)
//	retention  cleaning, folding, tombstones, release (retention.go)
//	sessions   interactive sessions (session_hold.go)
//	plans      what executes a receipt (plan.go)
type core struct {
	store  store.Store
	coord  *twopc.Coordinator
	tables *table.Tables
	clock  lease.Clock
	owner  lease.Owner
	opts   Options

	active *lease.ActiveSet
	hb     *lease.Heartbeat

	stats       counters
	maintainLog *causeLog // what maintenance passed over, sampled
}

func newCore(st store.Store, coord *twopc.Coordinator, tables *table.Tables, owner lease.Owner, opts Options) *core {
	return &core{
		store:       st,
		coord:       coord,
		tables:      tables,
		clock:       opts.Clock,
		owner:       owner,
		opts:        opts,
		active:      lease.NewActiveSet(),
		hb:          &lease.Heartbeat{Store: st, Clock: opts.Clock, TTL: opts.LeaseTTL, Margin: opts.SafetyMargin},
		maintainLog: newCauseLog(MaintainLogEvery, MaintainLogCausesMax),
	}
}
