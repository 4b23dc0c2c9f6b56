package receipt

import (
	"time"

	"github.com/idemdb/idem/lease"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/table"
)

// Answer is what Execute returns: an envelope and how it was produced.
type Answer struct {
	Envelope
	// Terminal: the envelope is the receipt's stored, final answer.
	Terminal bool
	// Replayed: the stored envelope of an earlier execution.
	Replayed bool
	// State of the receipt when the answer is not terminal.
	State State
	// RetryAfter suggests when to retry a non-terminal answer.
	RetryAfter time.Duration
	// Holder is the live owner of a receipt in progress in another process
	// (an idempotency_request_in_progress answer): the process a server
	// may forward the request to (Service.Locate). Zero otherwise.
	Holder lease.Owner
	// Original describes the receipt the key is bound to when this request
	// is refused for not being that receipt's request (a key mismatch).
	// It belongs to the original request, not to this one: this request
	// was not applied, whatever became of the original.
	Original *Original
	// Expiry is how long the answer replays and the key stays protected:
	// set on terminal answers, fresh or replayed, and on a refusal of an
	// expired key (ProtectUntil only).
	Expiry Expiry
}

// Expiry is the promise a keyed answer carries (docs/design.md §4 retention,
// tombstone.go): until ReplayUntil the same request replays this answer;
// until ProtectUntil the key never executes again. Both are lower bounds:
// the cleaner may act later, never sooner. Zero: no promise is made.
type Expiry struct {
	ReplayUntil  time.Time
	ProtectUntil time.Time
}

// expiryOf is the promise terminal rec makes.
func (c *core) expiryOf(rec *Record) Expiry {
	if rec == nil || rec.State != Terminal || rec.RetainUntil == 0 {
		return Expiry{}
	}
	return Expiry{ReplayUntil: time.UnixMilli(rec.RetainUntil), ProtectUntil: time.UnixMilli(c.protectUntil(rec))}
}

// Original is the state of the receipt a mismatched request collided
// with, or — State Expired — what the tombstone of an expired key keeps.
type Original struct {
	TxnID   string
	State   State
	Outcome string // the terminal outcome; "" while the receipt is not terminal
	// Of an expired key only: when its receipt completed, until when the
	// key stays refused, and whether this request is the one it ran.
	Completed    time.Time
	ProtectUntil time.Time
	SameRequest  bool
	// Diff, on a mismatch, says which of this request's entries differ
	// from the original's (nil: the receipt kept no digests).
	Diff *Diff
}

// Details of the answers that say a retry with the same key converges.
// Each is written once, here.
const (
	// msgPublishUnknown: the write that creates the receipt had an unknown
	// outcome (it may or may not exist).
	msgPublishUnknown = "publishing the receipt had an unknown outcome; retry with the same key"
	// msgRefusalUnknown: the write that makes a refusal durable together
	// with the new receipt had an unknown outcome.
	msgRefusalUnknown = "publishing the outcome had an unknown result; retry with the same key"
	// msgOutcomeUnknown: a step on an existing receipt had an unknown
	// outcome, or the lease could not be confirmed.
	msgOutcomeUnknown = "the outcome is not known yet; retry with the same key"
	// msgTxnOutcomeUnknown: the decision in force could not be established
	// (twopc.ErrOutcomeUnknown).
	msgTxnOutcomeUnknown = "the transaction's outcome is not known yet; retry with the same key"
	// msgContended: the batch's documents are still held by another
	// transaction after the waits allowed; nothing was stored.
	msgContended = "a document of the batch is still held by another transaction; nothing was stored: retry with the same key"
	// msgKeptChanging: ExecuteAttemptsMax lookups each found the receipt
	// changed.
	msgKeptChanging = "the receipt kept changing under this request; retry with the same key"
)

// retryAfter is the Retry-After suggested to a client whose request is in
// flight: a fraction of the lease TTL, at least a second.
func (c *core) retryAfter() time.Duration { return max(time.Second, c.opts.LeaseTTL/10) }

// Transient answers: never stored.
func answerInvalid(c code.Code, msg string) Answer {
	return Answer{Envelope: fromCode(c, msg, "", "")}
}

func answerInProgress(txnID string, st State, retryAfter time.Duration) Answer {
	return Answer{Envelope: fromCode(code.RequestInProgress, "a request with this key is in progress; retry later or wait with Prefer: wait=N", txnID, OutcomePending),
		State: st, RetryAfter: retryAfter}
}

func answerPending(txnID string, st State, why string, retryAfter time.Duration) Answer {
	return Answer{Envelope: fromCode(code.ReceiptPending, why, txnID, OutcomePending), State: st, RetryAfter: retryAfter}
}

// answerRefused answers a request refused before any work (a quota):
// transient, no receipt, no outcome, the refusal's Retry-After.
func answerRefused(ce *code.Error) Answer {
	return Answer{Envelope: fromCode(ce.Code, ce.Message, "", ""), RetryAfter: ce.RetryAfter}
}

func answerOverloaded(txnID string, retryAfter time.Duration) Answer {
	return Answer{Envelope: fromCode(code.Overloaded, "the executor is full; the request is recorded and will run: retry with the same key", txnID, OutcomePending),
		State: Pending, RetryAfter: retryAfter}
}

// answerExpired refuses a key whose receipt was cleaned: it never executes
// again while its tombstone lasts. The transaction ID is the key's (the
// binding makes it the same for any request with the key). The outcome
// is this request's, not_applied, as for a mismatch: the original's is in
// Original, with whether this request is the one it ran.
func answerExpired(t *Tombstone, fp [32]byte) Answer {
	same := [tombFingerprintBytes]byte(fp[:tombFingerprintBytes]) == t.Fingerprint
	return Answer{Envelope: fromCode(code.KeyExpired, "this Idempotency-Key's receipt expired; the key stays spent until "+
		t.ProtectUntil.UTC().Format(time.RFC3339)+": send a new request with a new key", t.TxnID, OutcomeNotApplied),
		Original: &Original{TxnID: t.TxnID, State: Expired, Outcome: t.Outcome, Completed: t.Completed,
			ProtectUntil: t.ProtectUntil, SameRequest: same},
		Expiry: Expiry{ProtectUntil: t.ProtectUntil}}
}

// answerTooOld refuses a new request first sent before the key memory
// reaches back: it may have executed and been forgotten. Transient: no
// receipt is made, and the answer carries the key's transaction ID.
func answerTooOld(txnID string, firstSent time.Time, memory time.Duration) Answer {
	return Answer{Envelope: fromCode(code.FirstSentTooOld, "the request was first sent at "+firstSent.UTC().Format(time.RFC3339)+
		", longer ago than this server remembers keys ("+memory.String()+"): it may have been applied; send it again with a new key if it was not", txnID, OutcomeNotApplied)}
}

// answerMismatch refuses a request whose key is bound to another request.
// Its envelope carries no transaction ID: this request has none, and the
// original's belongs in Original, beside its own state.
func answerMismatch(txnID string, rec *Record, b *table.Batch) Answer {
	o := &Original{TxnID: txnID, State: rec.State, Diff: diffEntries(rec.Entries, b)}
	if rec.State == Terminal {
		o.Outcome = EnvelopeOf(rec, txnID).Outcome // legacy schemas too
	}
	return Answer{Envelope: fromCode(code.KeyMismatch, "this Idempotency-Key was used with a different request", "", OutcomeNotApplied),
		Original: o}
}
