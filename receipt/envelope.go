package receipt

import (
	"encoding/json"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/twopc"
)

// Outcome values of an envelope.
const (
	OutcomeCommitted  = "committed"   // the batch applied
	OutcomeAborted    = "aborted"     // the coordinator proved it did not apply
	OutcomeNotApplied = "not_applied" // rejected before execution started
	OutcomePending    = "pending"     // not known yet: retry with the same key
)

// Envelope is a complete answer to a keyed request.
type Envelope struct {
	Status    int
	Outcome   string
	Code      code.Code // empty when committed
	Message   string
	Retryable bool
	RetryWith code.RetryWith
	TxnID     string
	Result    json.RawMessage // committed: {"inserted":n,"deleted":n,"transformed":n}
}

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
	// Original describes the receipt the key is bound to when this request
	// is refused for not being that receipt's request (a key mismatch).
	// It belongs to the original request, not to this one: this request
	// was not applied, whatever became of the original.
	Original *Original
}

// Original is the state of the receipt a mismatched request collided with.
type Original struct {
	TxnID   string
	State   State
	Outcome string // the terminal outcome; "" while the receipt is not terminal
}

func fromCode(c code.Code, msg, txnID, outcome string) Envelope {
	info := code.Lookup(c)
	return Envelope{Status: info.Status, Outcome: outcome, Code: c, Message: msg,
		Retryable: info.Retryable, RetryWith: info.RetryWith, TxnID: txnID}
}

// envelopeOf is the terminal envelope of a coordinator outcome.
func envelopeOf(o twopc.Outcome, txnID string) Envelope {
	switch o := o.(type) {
	case twopc.Committed:
		return Envelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: code.None, TxnID: txnID, Result: o.Result}
	case twopc.Aborted:
		return fromCode(o.Code, o.Message, txnID, OutcomeAborted)
	}
	panic("receipt: unknown outcome")
}

func notApplied(e *code.Error, txnID string) Envelope {
	return fromCode(e.Code, e.Message, txnID, OutcomeNotApplied)
}

func (e Envelope) stored() *StoredEnvelope {
	return &StoredEnvelope{Status: e.Status, Outcome: e.Outcome, Code: string(e.Code), Message: e.Message,
		Retryable: e.Retryable, RetryWith: string(e.RetryWith), Result: e.Result}
}

// Legacy fallback (schema 1, broad outcome only).
const (
	legacyCommittedResult = `{}`
	legacyAbortedMessage  = "the transaction was aborted"
)

// EnvelopeOf is the answer a terminal record stores; schema-1 records get
// the generic fallback.
func EnvelopeOf(r *Record, txnID string) Envelope {
	if se := r.Envelope; se != nil {
		return Envelope{Status: se.Status, Outcome: se.Outcome, Code: code.Code(se.Code), Message: se.Message,
			Retryable: se.Retryable, RetryWith: code.RetryWith(se.RetryWith), TxnID: txnID, Result: se.Result}
	}
	if r.Outcome == OutcomeCommitted {
		return Envelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: code.None, TxnID: txnID,
			Result: json.RawMessage(legacyCommittedResult)}
	}
	return fromCode(code.TransactionAborted, legacyAbortedMessage, txnID, OutcomeAborted)
}

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

func answerOverloaded(txnID string, retryAfter time.Duration) Answer {
	return Answer{Envelope: fromCode(code.Overloaded, "the executor is full; the request is recorded and will run: retry with the same key", txnID, OutcomePending),
		State: Pending, RetryAfter: retryAfter}
}

// answerMismatch refuses a request whose key is bound to another request.
// Its envelope carries no transaction ID: this request has none, and the
// original's belongs in Original, beside its own state.
func answerMismatch(txnID string, rec *Record) Answer {
	o := &Original{TxnID: txnID, State: rec.State}
	if rec.State == Terminal {
		o.Outcome = EnvelopeOf(rec, txnID).Outcome // legacy schemas too
	}
	return Answer{Envelope: fromCode(code.KeyMismatch, "this Idempotency-Key was used with a different request", "", OutcomeNotApplied),
		Original: o}
}
