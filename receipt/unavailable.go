package receipt

import (
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// healthReporter is the optional part of a Store that says whether it
// still accepts writes (engine.DB does: after an I/O error it fail-stops
// until reopened).
type healthReporter interface{ Health() error }

// refusesWrites returns the store's reason to refuse writes, or nil.
func (c *core) refusesWrites() error {
	h, ok := c.store.(healthReporter)
	if !ok {
		return nil
	}
	err := h.Health()
	if errors.Is(err, store.ErrFailStopped) || errors.Is(err, store.ErrClosed) {
		return err
	}
	return nil
}

// unavailableMessage is the detail of every write refused by a store that
// fail-stopped or closed.
const unavailableMessage = "the store refuses writes (it fail-stopped after an I/O error, or is shutting down) until idemd restarts; retry with the same key"

// answerUnavailable refuses a keyed request that a fail-stopped store
// cannot serve. What became of the key is known: nothing (not_applied)
// when there is no receipt, or a receipt that is not terminal (pending),
// which the next incarnation finishes.
func answerUnavailable(txnID string, exists bool) Answer {
	outcome := OutcomeNotApplied
	if exists {
		outcome = OutcomePending
	}
	return Answer{Envelope: fromCode(code.Unavailable, unavailableMessage, txnID, outcome), RetryAfter: unavailableRetryAfter}
}

// unavailableRetryAfter is the Retry-After of an unavailable answer: about
// how long a supervisor takes to restart idemd.
const unavailableRetryAfter = 5 * time.Second

// errUnavailable is the *code.Error of a fast-path write refused by a
// store that accepts no writes.
func errUnavailable() error { return code.Errorf(code.Unavailable, "%s", unavailableMessage) }
