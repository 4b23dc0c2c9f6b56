package twopc

import "github.com/idemdb/idem/code"

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
