package receipt

import (
	"log/slog"
	"time"

	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/lease"
	"github.com/idemdb/idem/twopc"
)

// Options configure a Service. Zero fields take the defaults.
type Options struct {
	// Node is this process's owner ID (default "node-0"). Its incarnation
	// is bumped durably at every Open.
	Node string
	// Advertise is the address this node's peers reach it at, written in
	// its node record with each incarnation (lease.RegisterAt); empty for
	// a node that serves alone.
	Advertise string
	// SessionShard, when positive, is one more than this service's index
	// among the store shards of a sharded deployment (docs/cluster.md
	// "Shards"): the first random byte of every session ID it begins is
	// the index, so that any node routes the session's later requests
	// (api.sessionShardOf). 0: one store, IDs wholly random.
	SessionShard int
	// LeaseTTL is how long a claim stays valid without renewal (default 10s).
	LeaseTTL time.Duration
	// RenewInterval is the supervisor's tick, clamped to LeaseTTL/3.
	RenewInterval time.Duration
	// SafetyMargin is the lease time that must remain before an externally
	// visible step (default LeaseTTL/5).
	SafetyMargin time.Duration
	// Retention is how long terminal receipts are kept (default 24h).
	Retention time.Duration
	// TombstoneRetention is how long after its completion a receipt's key
	// stays protected (default TombstoneRetentionDefault): once Retention
	// ends the cleaner leaves a tombstone, and the key is refused as
	// idempotency_key_expired instead of executing again. Negative opts
	// out: an expired key is a new request, as in most idempotency
	// systems. A value not above Retention leaves no tombstones.
	TombstoneRetention time.Duration
	// ExecutorMax bounds concurrently executing receipts (default 256).
	ExecutorMax int
	// InflightPerPrincipalMax bounds one principal's requests inside the
	// service at once — keyed batches and session commits and steps,
	// executing, waiting for an executor slot or waiting with Prefer:
	// wait — and so the executor slots one principal can hold (quota.go).
	// Beyond it the principal's requests are 429, nobody else's. Default
	// InflightPerPrincipalDefault(ExecutorMax).
	InflightPerPrincipalMax int
	// WaitMax caps Request.Wait (default 30s).
	WaitMax time.Duration
	// WaitPoll is the polling step when waiting on another owner (default 50ms).
	WaitPoll time.Duration
	// MaintainInterval and CleanInterval pace the recovery and retention
	// loops (defaults LeaseTTL/2 and 1 minute). Negative disables the loop
	// (tests drive MaintainOnce/CleanOnce by hand).
	MaintainInterval time.Duration
	CleanInterval    time.Duration
	// LegacyTableOwner is the principal that Open gives the tables created
	// before tables had owners (docs/design.md §8: a principal is a tenant).
	// Default "anonymous", the principal of a server without tokens.
	LegacyTableOwner string
	// FirstPassMax bounds how long after Open each of those loops first
	// runs (default 1s): a process that lives less than an interval — one
	// killed every few seconds — must still recover its predecessor's
	// receipts and clean expired ones, or the store grows with every
	// restart. Negative: the first pass waits a whole interval.
	FirstPassMax time.Duration
	// PresumeAbort makes recovery abort a begun, undecided transaction
	// instead of committing it. The default (false) is twopc.CommitPrepared:
	// Begin makes every prepare durable in one write, so a successor may
	// finish the work (docs/design.md §12) without the client replaying the request.
	// (A twopc.UndecidedPolicy field cannot express that default: its zero value is
	// PresumeAbort.)
	PresumeAbort bool
	// ReplanContended: the store is shared by other processes (etcd), so
	// this process's document latches do not order every keyed batch. A
	// Begin whose refusal is contention — another node's intent on a
	// document, or one it just changed — is then tried again, jittered,
	// up to ContendedReplansMax times (replan.go). Off, such a batch is
	// answered pending at once (start.go contended: one process owns the
	// store, and an intent it meets belongs to a transaction whose
	// outcome is not known yet, not to another node's queue). idemd
	// -store etcd sets it.
	ReplanContended bool
	// AdoptStagger is how much later, per rank, maintenance on this node
	// adopts a dead node's receipt than the node ranked first for it
	// (fairness.go; default LeaseTTL/4, negative: no stagger).
	AdoptStagger time.Duration
	// SessionTTLMax caps the TTL an interactive session may ask for
	// (default SessionTTLMaxDefault).
	SessionTTLMax time.Duration
	// SessionsOpenMax bounds the sessions open on this node at once
	// (default SessionsOpenMaxDefault); a begin beyond it is 429.
	SessionsOpenMax int
	// SessionsPerPrincipalMax bounds the sessions one principal has open
	// on this node (quota.go); a begin beyond it is 429, with the earliest
	// expiry of the principal's own sessions as Retry-After. Default
	// SessionsPerPrincipalDefault(SessionsOpenMax).
	SessionsPerPrincipalMax int
	// Restore, if set, is the store's restore from a backup: keys first
	// sent before it that the store does not know are refused for
	// Retention after it (restorefence.go).
	Restore *RestoreFence
	// Clock is the time source (default lease.Real).
	Clock  lease.Clock
	Logger *slog.Logger

	// knobs are the test-only flows, set by WithTestKnobs alone.
	knobs testknobs.Receipt
}

// WithTestKnobs returns o with the test-only flows k (deferred resolution,
// a separate decision write). k's type is in an internal package, so only
// this repository's tests, harness and idemd's test flag can set them; a
// host cannot name the type, and they are no part of the API
// (internal/testknobs).
func WithTestKnobs(o Options, k testknobs.Receipt) Options {
	o.knobs = k
	return o
}

// QuotaShareDivisor is the share of a node-wide limit a principal's quota
// takes by default: a quarter, so that four principals at their quotas
// fill the node and any number below that leaves room for others. With the
// defaults: 4096 sessions / 4 = 1024 sessions per principal, and 256
// executor slots / 4 = 64 requests in flight per principal.
const QuotaShareDivisor = 4

// SessionsPerPrincipalDefault is SessionsPerPrincipalMax's default on a
// node whose SessionsOpenMax is nodeMax: a quarter of it, at least 1.
func SessionsPerPrincipalDefault(nodeMax int) int { return max(1, nodeMax/QuotaShareDivisor) }

// InflightPerPrincipalDefault is InflightPerPrincipalMax's default on a
// node whose ExecutorMax is slots: a quarter of them, at least 1.
func InflightPerPrincipalDefault(slots int) int { return max(1, slots/QuotaShareDivisor) }

// TombstoneRetentionDefault is how long a key stays protected after its
// receipt completed, by default.
const TombstoneRetentionDefault = 30 * 24 * time.Hour

// Bounds of the service's own loops.
const (
	// ExecuteAttemptsMax bounds the lookup/create rounds of one Execute.
	ExecuteAttemptsMax = 8
	// maintainPageMax bounds the entries one maintenance scan reads.
	maintainPageMax = 256
	// MaintainReceiptsMax bounds the entries — receipts' recovery entries
	// and open sessions' — one maintenance pass handles.
	MaintainReceiptsMax = 4096
	// ReleaseBatchMax bounds the decisions released by one Apply.
	ReleaseBatchMax = 256
	// releaseQueueMax bounds remembered, not-yet-released decisions; beyond
	// it the maintenance scan of txn/v1/dec finds them.
	releaseQueueMax = 65536
	// cleanBatchMax bounds the receipts one cleanup Apply deletes.
	cleanBatchMax = 256
	// CleanScanMax bounds the expiry entries one cleaner pass reads.
	CleanScanMax = 4096
	// MaintainLogEvery bounds how often maintenance logs one cause of the
	// receipts it passes over: its first occurrence at once, then at most
	// one line per cause per MaintainLogEvery, with the count since.
	MaintainLogEvery = time.Minute
	// MaintainLogCausesMax bounds the causes tracked for that; further
	// causes are counted together.
	MaintainLogCausesMax = 32
)

func (o Options) withDefaults() Options {
	if o.Node == "" {
		o.Node = "node-0"
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	o.RenewInterval = lease.ClampInterval(o.RenewInterval, o.LeaseTTL)
	if o.SafetyMargin <= 0 || o.SafetyMargin >= o.LeaseTTL/2 {
		o.SafetyMargin = o.LeaseTTL / 5
	}
	if o.AdoptStagger == 0 {
		o.AdoptStagger = o.LeaseTTL / 4
	} else if o.AdoptStagger < 0 {
		o.AdoptStagger = 0
	}
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.TombstoneRetention == 0 {
		o.TombstoneRetention = TombstoneRetentionDefault
	}
	if o.ExecutorMax <= 0 {
		o.ExecutorMax = 256
	}
	if o.WaitMax <= 0 {
		o.WaitMax = 30 * time.Second
	}
	if o.WaitPoll <= 0 {
		o.WaitPoll = 50 * time.Millisecond
	}
	if o.MaintainInterval == 0 {
		o.MaintainInterval = o.LeaseTTL / 2
	}
	if o.LegacyTableOwner == "" {
		o.LegacyTableOwner = "anonymous"
	}
	if o.FirstPassMax == 0 {
		o.FirstPassMax = defaultFirstPassMax
	}
	if o.CleanInterval == 0 {
		o.CleanInterval = time.Minute
	}
	if o.SessionTTLMax <= 0 {
		o.SessionTTLMax = SessionTTLMaxDefault
	}
	if o.SessionsOpenMax <= 0 {
		o.SessionsOpenMax = SessionsOpenMaxDefault
	}
	if o.SessionsPerPrincipalMax <= 0 {
		o.SessionsPerPrincipalMax = SessionsPerPrincipalDefault(o.SessionsOpenMax)
	}
	if o.InflightPerPrincipalMax <= 0 {
		o.InflightPerPrincipalMax = InflightPerPrincipalDefault(o.ExecutorMax)
	}
	if o.Clock == nil {
		o.Clock = lease.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// recoveryPolicy is what recovery decides for a begun, undecided transaction.
func (o Options) recoveryPolicy() twopc.UndecidedPolicy {
	if o.PresumeAbort {
		return twopc.PresumeAbort
	}
	return twopc.CommitPrepared
}
