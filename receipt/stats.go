package receipt

import (
	"sync/atomic"

	"github.com/idemdb/idem/lease"
)

// Stats are cumulative counters of a Service, for metrics and tests.
type Stats struct {
	Executed       uint64 // receipts this process ran through Begin
	Committed      uint64 // terminal envelopes published with outcome committed
	Aborted        uint64 // ... aborted
	NotApplied     uint64 // ... not_applied
	Replayed       uint64 // stored envelopes returned to a retry
	Mismatches     uint64 // 422 idempotency_key_mismatch answers
	InProgress     uint64 // 409 in-progress answers
	PendingAnswers uint64 // 503 idempotency_receipt_pending answers
	Overloaded     uint64 // 429 answers (executor full)
	Adopted        uint64 // receipts taken from another owner or incarnation
	Fenced         uint64 // writes rejected because another owner holds the receipt
	RecoveryPasses uint64 // maintenance passes
	Recovered      uint64 // receipts made terminal by maintenance
	Released       uint64 // retained decisions released
	Cleaned        uint64 // receipts deleted by the retention cleaner
	Tombstoned     uint64 // ... of which left a tombstone
	TombsCleaned   uint64 // tombstones deleted once their key's protection ended
	Folded         uint64 // expiry entries folded into chunks (expfold.go)
	Expired        uint64 // 409 idempotency_key_expired answers
	Resolved       uint64 // started receipts an operator resolved (Resolve)
	// Replanned counts creates planned from cached table metadata whose
	// Begin was refused, planned again from a fresh read (createfirst.go).
	Replanned uint64
	// ContendedPending counts keyed Begins whose documents were still held
	// by another transaction after the waits allowed: answered pending,
	// nothing stored, never a stored refusal (start.go contended).
	ContendedPending uint64
	// DocWaits counts batches that waited for documents another batch
	// here was committing (doclatch.go); DocWaitsExpired those whose wait
	// ran out (DocWaitMax): a keyed batch is then deferred as a pending
	// receipt, a key-less one refused (transaction_conflict).
	DocWaits, DocWaitsExpired uint64
	// Replans counts Begins tried again after a refusal that was
	// contention (replan.go): another node's transaction held or had just
	// changed a document, on a store several nodes share.
	Replans uint64
	// DebtPaid counts decided transactions whose leftover intents a Begin
	// here met on its documents and resolved itself (twopc/debt.go)
	// instead of refusing the batch.
	DebtPaid     uint64
	ExecutorBusy int64 // executor slots in use now
	// ExecutorBusyReceipts and ExecutorBusySessions split ExecutorBusy by
	// what holds the slots: receipts (keyed batches and session commits),
	// and the steps of open sessions.
	ExecutorBusyReceipts int64
	ExecutorBusySessions int64
	SessionsBegun        uint64 // sessions begun here
	SessionsCommitted    uint64 // commits requested (each one a receipt)
	SessionsAborted      uint64 // sessions ended without a commit: by the client, expiry or a lost owner
	SessionsExpired      uint64 // ... of which by expiry or a lost owner
	SessionsOpen         int64  // sessions this process holds open now
	// Refused counts 429 refusals by the limit hit, indexed by Refusal.
	Refused [refusalKinds]uint64
}

type counters struct {
	executed, committed, aborted, notApplied, replayed, mismatches, inProgress,
	pending, overloaded, adopted, fenced, passes, recovered, released, cleaned atomic.Uint64
	tombstoned, tombsCleaned, folded, expired, resolved   atomic.Uint64
	docWaitsExpired, replans, replanned, contendedPending atomic.Uint64
	sessBegun, sessCommitted, sessAborted, sessExpired    atomic.Uint64
	refused                                               [refusalKinds]atomic.Uint64
}

func (s *Service) Stats() Stats {
	c := &s.core.stats
	var refused [refusalKinds]uint64
	for i := range refused {
		refused[i] = c.refused[i].Load()
	}
	return Stats{Refused: refused,
		Executed: c.executed.Load(), Committed: c.committed.Load(), Aborted: c.aborted.Load(),
		NotApplied: c.notApplied.Load(), Replayed: c.replayed.Load(), Mismatches: c.mismatches.Load(),
		InProgress: c.inProgress.Load(), PendingAnswers: c.pending.Load(), Overloaded: c.overloaded.Load(),
		Adopted: c.adopted.Load(), Fenced: c.fenced.Load(), RecoveryPasses: c.passes.Load(),
		Recovered: c.recovered.Load(), Released: c.released.Load(), Cleaned: c.cleaned.Load(),
		Tombstoned: c.tombstoned.Load(), TombsCleaned: c.tombsCleaned.Load(), Folded: c.folded.Load(), Expired: c.expired.Load(), Resolved: c.resolved.Load(),
		DocWaits: s.exec.docs.waited.Load(), DocWaitsExpired: c.docWaitsExpired.Load(), Replans: c.replans.Load(),
		Replanned: c.replanned.Load(), ContendedPending: c.contendedPending.Load(),
		DebtPaid:             s.core.coord.DebtPaid(),
		ExecutorBusy:         int64(len(s.exec.slots)),
		ExecutorBusyReceipts: s.exec.busy[lease.KindReceipt].Load(),
		ExecutorBusySessions: s.exec.busy[lease.KindSession].Load(),
		SessionsBegun:        c.sessBegun.Load(), SessionsCommitted: c.sessCommitted.Load(),
		SessionsAborted: c.sessAborted.Load(), SessionsExpired: c.sessExpired.Load(),
		SessionsOpen: int64(s.core.active.LenOf(lease.KindSession)),
	}
}

func (c *core) countTerminal(e Envelope) {
	switch e.Outcome {
	case OutcomeCommitted:
		c.stats.committed.Add(1)
	case OutcomeAborted:
		c.stats.aborted.Add(1)
	case OutcomeNotApplied:
		c.stats.notApplied.Add(1)
	}
}
