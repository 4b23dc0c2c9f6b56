package receipt

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/twopc"
)

// An operator may unstick a started receipt — one whose outcome recovery
// keeps failing to establish, or that a client waits on for too long —
// only the way recovery itself could: by writing a presumed-abort decision
// with the decision's create-if-absent. A decision that exists wins (it is
// published instead, as it would be anyway), so the action can never
// contradict one, and it never executes anything. Every write is fenced
// by the receipt's claim, which the action holds as recovery does: its own
// node's, or adopted from a dead or older incarnation; a live owner
// elsewhere is asked to be resolved there. The terminal record names who
// resolved it (Record.ResolvedBy), the log says so, and a metric counts it.

// Resolution is what Resolve did.
type Resolution struct {
	TxnID string
	// Outcome is the receipt's terminal outcome now; Decided says the
	// operator's presumed abort is what decided it (false: a decision
	// already existed, or the receipt was terminal before).
	Outcome string
	Decided bool
	// WasTerminal: nothing was written, the receipt was terminal already.
	WasTerminal bool
	Envelope    Envelope
}

// resolvedByMax bounds the principal name a resolution records.
const resolvedByMax = 255

// msgResolvedByOperator is the presumed abort's message when an operator
// decided it.
const msgResolvedByOperator = "an operator resolved the receipt: the transaction was aborted before it was decided (presumed abort)"

// Resolve settles started receipt txnID for operator by (a principal):
// presumed abort unless a decision exists. A pending receipt (not
// executed, it will run) and a receipt held live elsewhere are refused
// with *code.Error; a missing one is store.ErrNotFound.
func (s *Service) Resolve(ctx context.Context, txnID, by string) (Resolution, error) {
	if len(txnID) != 2*txnIDBytes || tombKey(txnID) == nil {
		return Resolution{}, store.ErrNotFound
	}
	if s.core.refusesWrites() != nil {
		return Resolution{}, errUnavailable()
	}
	rec, ver, err := s.core.load(ctx, txnID)
	if err != nil {
		return Resolution{}, err
	}
	switch rec.State {
	case Terminal:
		env := EnvelopeOf(rec, txnID)
		return Resolution{TxnID: txnID, Outcome: env.Outcome, WasTerminal: true, Envelope: env}, nil
	case Pending:
		return Resolution{}, code.Errorf(code.RequestInProgress, "receipt %s is pending: it has not executed and will; only a started receipt can be resolved", txnID)
	}
	f, mine := s.exec.beginFlight(txnID)
	if !mine {
		return Resolution{}, code.Errorf(code.RequestInProgress, "a request on this node is working on receipt %s; retry", txnID)
	}
	defer s.exec.endFlight(txnID, f)
	a := &attempt{id: txnID, rec: rec, ver: ver}
	if _, err := s.flow.hold(ctx, a, time.Time{}); err != nil {
		if errors.Is(err, errNotOurs) {
			return Resolution{}, code.Errorf(code.RequestInProgress, "receipt %s is held by its live owner %s: resolve it there, or once its lease expired", txnID, a.holder)
		}
		if errors.Is(err, errRetry) {
			return Resolution{}, code.Errorf(code.RequestInProgress, "receipt %s changed meanwhile; retry", txnID)
		}
		return Resolution{}, err
	}
	ans, err := s.recov.resolveHeld(ctx, a, by)
	if err != nil {
		return Resolution{}, err
	}
	if !ans.Terminal {
		return Resolution{}, code.Errorf(code.ReceiptPending, "resolving receipt %s: %s", txnID, ans.Message)
	}
	res := Resolution{TxnID: txnID, Outcome: ans.Outcome, Envelope: ans.Envelope, Decided: ans.Message == msgResolvedByOperator}
	s.core.stats.resolved.Add(1)
	s.core.opts.Logger.Warn("receipt: resolved by an operator", "txn_id", txnID, "by", by, "outcome", res.Outcome, "decided_by_operator", res.Decided)
	return res, nil
}

// resolveHeld is reconcile with the operator's policy: the decision in
// force if there is one, else presumed abort, recorded as the operator's.
func (r *recovery) resolveHeld(ctx context.Context, a *attempt, by string) (Answer, error) {
	return r.settleStarted(ctx, a, func(twopc.Status) twopc.Outcome {
		marked := *a.rec
		marked.ResolvedBy = by[:min(len(by), resolvedByMax)]
		a.rec = &marked
		return twopc.Aborted{Code: code.TransactionAborted, Message: msgResolvedByOperator}
	})
}
