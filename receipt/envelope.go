package receipt

import (
	"encoding/json"

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
	// Retry, when set, names what a client must make anew to try again,
	// beyond the key: RetryNewSession for a session's commit that did not
	// commit (its RetryWith is then none: the session is ended, and a
	// commit under any key answers the same).
	Retry string
}

// RetryNewSession is Envelope.Retry of a session commit that aborted or
// was not applied: the way forward is a new session.
const RetryNewSession = "new_session"

// sessionCommitEnvelope is e as a session's commit answers it (issue 37):
// a session has one commit, so an outcome other than committed can be
// tried again only in a new session — not with a new key, which would
// replay the same answer. It is applied where the answer is made and
// stored (storedFor), never on reading a stored one back: a commit
// receipt written before this rule replays what it first answered.
func sessionCommitEnvelope(e Envelope) Envelope {
	if e.Outcome == OutcomeAborted || e.Outcome == OutcomeNotApplied {
		e.RetryWith, e.Retry = code.None, RetryNewSession
	}
	return e
}

// storedFor is env as rec stores it: a session commit's in its session
// form.
func storedFor(rec *Record, env Envelope) *StoredEnvelope {
	if rec.Session != "" {
		env = sessionCommitEnvelope(env)
	}
	return env.stored()
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
		Retryable: e.Retryable, RetryWith: string(e.RetryWith), Result: e.Result, Retry: e.Retry}
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
		e := Envelope{Status: se.Status, Outcome: se.Outcome, Code: code.Code(se.Code), Message: se.Message,
			Retryable: se.Retryable, RetryWith: code.RetryWith(se.RetryWith), TxnID: txnID, Result: se.Result, Retry: se.Retry}
		return e
	}
	if r.Outcome == OutcomeCommitted {
		return Envelope{Status: 201, Outcome: OutcomeCommitted, RetryWith: code.None, TxnID: txnID,
			Result: json.RawMessage(legacyCommittedResult)}
	}
	return fromCode(code.TransactionAborted, legacyAbortedMessage, txnID, OutcomeAborted)
}
