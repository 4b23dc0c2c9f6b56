package twopc

import (
	"errors"

	"github.com/idemdb/idem/code"
)

// Outcome is a decided transaction's result: Committed or Aborted. Errors are
// never outcomes.
type Outcome interface{ isOutcome() }

// Committed carries the result the transaction produced.
type Committed struct {
	Result []byte
}

// Aborted carries the exact reason, e.g. transaction_conflict.
type Aborted struct {
	Code    code.Code
	Message string
}

func (Committed) isOutcome() {}
func (Aborted) isOutcome()   {}

var (
	// ErrDecisionConflict means another writer decided first. It is not proof
	// of abort: read the winner with Learn.
	ErrDecisionConflict = errors.New("twopc: decision conflict: another writer decided first")
	// ErrOutcomeUnknown means the outcome could not be established (the
	// decision could not be read, or its write was ambiguous). The
	// transaction must stay pending until recovery learns it.
	ErrOutcomeUnknown = errors.New("twopc: outcome unknown")
	// ErrInProgress means the transaction was begun and is not decided yet.
	ErrInProgress = errors.New("twopc: transaction begun and undecided")
	// ErrUnresolved means Release was asked for a transaction whose
	// participants still hold intents.
	ErrUnresolved = errors.New("twopc: participants not yet resolved")
	// ErrNoTransaction means neither a record nor a decision exists.
	ErrNoTransaction = errors.New("twopc: no such transaction")
)
