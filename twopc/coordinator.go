package twopc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/internal/testknobs"
	"github.com/idemdb/idem/store"
)

// BeginRetriesMax bounds how often Begin re-prepares after a document
// changed between a participant's read and the atomic write.
const BeginRetriesMax = 4

// Options configure a Coordinator.
type Options struct {
	// Now is the clock for record timestamps (informational only).
	Now func() time.Time

	// knobs are the test-only flows, set by WithTestKnobs alone.
	knobs testknobs.TwoPC
}

// WithTestKnobs returns o with the test-only flows k (resolution deferred
// to Resolve). k's type is in an internal package, so only this
// repository can name it; they are no part of the API (internal/testknobs).
func WithTestKnobs(o Options, k testknobs.TwoPC) Options {
	o.knobs = k
	return o
}

// Coordinator runs transactions against one Store.
type Coordinator struct {
	store   store.Store
	resolve Resolver
	opts    Options
	// debtPaid counts the decided transactions a Begin resolved because
	// their intents held its documents (debt.go).
	debtPaid atomic.Uint64
}

// DebtPaid is how many decided transactions' leftover intents Begins met
// and resolved themselves (debt.go).
func (c *Coordinator) DebtPaid() uint64 { return c.debtPaid.Load() }

// New returns a coordinator. resolve rebuilds participants for Resolve and
// Recover.
func New(st store.Store, resolve Resolver, opts Options) *Coordinator {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Coordinator{store: st, resolve: resolve, opts: opts}
}

// Txn is a transaction to begin.
type Txn struct {
	ID           string
	Participants []Participant
	// Result, called after every participant prepared, encodes the result
	// a commit will report. It is stored with the record so that recovery
	// can publish the same result.
	Result func() ([]byte, error)
}

// BeginResult says how Begin ended when it did not return an error.
type BeginResult struct {
	// Prepared: the record and every prepare are durable, written at
	// Version (every key of the Begin write, `with`'s included, has it).
	Prepared bool
	Version  store.Version
	// Refused: a participant voted no. Nothing was written; the caller
	// decides Aborted with this reason (Decide) to make it durable.
	Refused *Aborted
	// Contended: the refusal is contention, not a real conflict — a
	// document held by another transaction's intent, or one that kept
	// changing under BeginRetriesMax fresh prepares (Contender). A later
	// Begin, once the other transaction is decided, may be prepared.
	Contended bool
	// Decided: the transaction was decided before (nothing was written).
	Decided Outcome
}

// Begin writes the coordinator record and every participant's prepare in one
// atomic Apply together with `with`. It is create-if-absent on both the
// record and the decision, so it never resets a begun or decided transaction:
// for a decided one it returns the decision, for a begun, undecided one
// ErrInProgress. A failed condition of `with` is returned as the engine's
// *ConditionError; ambiguity as store.ErrAmbiguous.
func (c *Coordinator) Begin(ctx context.Context, txn Txn, with *store.Batch) (BeginResult, error) {
	for attempt := 0; ; attempt++ {
		last := attempt+1 >= BeginRetriesMax
		b, err := c.stageBegin(ctx, txn, with)
		var ce *code.Error
		if errors.As(err, &ce) {
			res, again, err := c.votedNo(ctx, txn, ce, last)
			if again {
				continue
			}
			return res, err
		}
		if err != nil {
			return BeginResult{}, err
		}
		if err := fault.Inject(fault.TwoPCBeginBefore); err != nil {
			return BeginResult{}, err
		}
		v, err := c.applyStep(ctx, StepBegin, b)
		if err == nil {
			for _, p := range txn.Participants {
				if pp, ok := p.(Preparer); ok {
					pp.Prepared(txn.ID, v)
				}
			}
			if err := fault.Inject(fault.TwoPCBeginAfter); err != nil {
				return BeginResult{}, err
			}
			return BeginResult{Prepared: true, Version: v}, nil
		}
		res, again, err := c.notBegun(ctx, txn, err, last)
		if !again {
			return res, err
		}
	}
}

// votedNo answers a participant's "no" vote (ce). A participant may refuse
// because of this very transaction (its own open intents, or documents it
// already changed): a begun or decided transaction answers as such, never
// with a fresh vote. A vote read from a document that a decided
// transaction's leftover intent still holds is tried again once that
// debt is paid (debt.go), unless this was the last attempt.
func (c *Coordinator) votedNo(ctx context.Context, txn Txn, ce *code.Error, last bool) (res BeginResult, again bool, err error) {
	if res, found, err := c.existing(ctx, txn.ID); found {
		return res, false, err
	}
	if !last {
		paid, err := c.payDebtOn(ctx, txn)
		if err != nil || paid {
			return BeginResult{}, paid, err
		}
	}
	return BeginResult{Refused: &Aborted{Code: ce.Code, Message: ce.Message}}, false, nil
}

// existing answers a Begin of a transaction that exists already: its
// decision, or ErrInProgress while it is begun and undecided. found is
// false when it is neither (or the lookup failed: err).
func (c *Coordinator) existing(ctx context.Context, id string) (res BeginResult, found bool, err error) {
	st, err := c.Lookup(ctx, id)
	switch {
	case err != nil:
		return BeginResult{}, true, err
	case st.Decision != nil:
		return BeginResult{Decided: st.Decision}, true, nil
	case st.Begun:
		return BeginResult{}, true, ErrInProgress
	}
	return BeginResult{}, false, nil
}

// notBegun answers a Begin write that failed with err: the transaction
// begun or decided before; a condition of `with`; or a participant's
// document held or changed — prepared afresh (again) when that may now
// succeed and this was not the last attempt, else refused.
func (c *Coordinator) notBegun(ctx context.Context, txn Txn, err error, last bool) (res BeginResult, again bool, _ error) {
	key, ok := store.FailedKey(err)
	if !ok {
		return BeginResult{}, false, err
	}
	if string(key) == string(recordKey(txn.ID)) || string(key) == string(decisionKey(txn.ID)) {
		if res, found, err := c.existing(ctx, txn.ID); found {
			return res, false, err
		}
		return BeginResult{}, false, ErrInProgress // its record failed the write: it exists, or did
	}
	refusal, retry, contended, mine := refusalOf(txn, key)
	if !mine {
		return BeginResult{}, false, err // a condition of `with`
	}
	if contended && !last {
		paid, perr := c.payDebtAt(ctx, txn, key)
		if perr != nil {
			return BeginResult{}, false, perr
		}
		retry = retry || paid
	}
	if retry && !last {
		return BeginResult{}, true, nil
	}
	return BeginResult{Refused: &Aborted{Code: refusal.Code, Message: refusal.Message}, Contended: contended}, false, nil
}

// withFirst is the Begin write b with `with`'s conditions checked before
// the transaction's own: a store reports the first failed condition in
// batch order, and the caller's (a receipt created if absent) says more
// than a 2PC record that exists because of it. A create sent before any
// lookup (receipt.Execute on a remote store) that finds its receipt then
// learns so from this one write, instead of reading the decision back.
func withFirst(with, b *store.Batch) *store.Batch {
	if with == nil || len(with.Conds) == 0 {
		return b.Merge(with)
	}
	conds := make([]store.Condition, 0, len(with.Conds)+len(b.Conds))
	b.Conds = append(append(conds, with.Conds...), b.Conds...)
	return b.Merge(&store.Batch{Ops: with.Ops})
}

// refusalOf asks the participants whose key failed: the refusal, whether
// a fresh Prepare may succeed at once, and whether it is contention
// (Contender) rather than a real conflict.
func refusalOf(txn Txn, key []byte) (refusal *code.Error, retry, contended, mine bool) {
	for _, p := range txn.Participants {
		if refusal, retry, mine := p.Refusal(key); mine {
			c, ok := p.(Contender)
			return refusal, retry, ok && c.Contended(key), true
		}
	}
	return nil, false, false, false
}

// stageBegin is Begin's write, unapplied: every participant prepared,
// the record, and `with` (withFirst). A participant's "no" is its
// *code.Error.
func (c *Coordinator) stageBegin(ctx context.Context, txn Txn, with *store.Batch) (*store.Batch, error) {
	b, _, err := c.beginBatch(ctx, txn)
	if err != nil {
		return nil, err
	}
	return withFirst(with, b), nil
}

// beginBatch prepares every participant and returns the Begin write with
// the commit result it records.
func (c *Coordinator) beginBatch(ctx context.Context, txn Txn) (*store.Batch, []byte, error) {
	rec := record{Schema: schemaV1, Created: c.opts.Now().UnixMilli(),
		Participants: make([]partRecord, 0, len(txn.Participants))}
	prepared := make([]*store.Batch, len(txn.Participants))
	conds, ops := 2+withSlack, 1+withSlack
	for i, p := range txn.Participants {
		pb, err := p.Prepare(ctx, txn.ID)
		if err != nil {
			return nil, nil, err
		}
		prepared[i] = pb
		conds, ops = conds+len(pb.Conds), ops+len(pb.Ops)
		rec.Participants = append(rec.Participants, partRecord{ID: p.ID(), Ref: p.Ref()})
	}
	b := new(store.Batch).Grow(conds, ops).Absent(recordKey(txn.ID)).Absent(decisionKey(txn.ID))
	for _, pb := range prepared {
		b.Merge(pb)
	}
	if txn.Result != nil {
		res, err := txn.Result()
		if err != nil {
			return nil, nil, err
		}
		rec.Result = res
	}
	val, err := encodeRecord(rec)
	if err != nil {
		return nil, nil, err
	}
	return b.Put(recordKey(txn.ID), val), rec.Result, nil
}

// Decide writes the decision for txnID create-if-absent, atomically with
// `with` and — unless resolution is deferred (testknobs.TwoPC) — with the
// resolution of every participant in parts (the coordinator record is then
// deleted in the same write). parts may be nil to resolve from the durable record.
//
// It returns ErrDecisionConflict if a decision already exists (read it with
// Learn), the engine's *ConditionError for a failed condition of `with`, and
// an error wrapping store.ErrAmbiguous when the write's outcome is unknown.
func (c *Coordinator) Decide(ctx context.Context, txnID string, parts []Participant, o Outcome, with *store.Batch) error {
	_, err := c.DecideAt(ctx, txnID, parts, o, with)
	return err
}

// DecideAt is Decide that also returns the version of the decision write
// (which every key of `with` gets).
func (c *Coordinator) DecideAt(ctx context.Context, txnID string, parts []Participant, o Outcome, with *store.Batch) (store.Version, error) {
	b, err := c.stageDecision(ctx, txnID, parts, o, with)
	if err != nil {
		return 0, err
	}
	if err := fault.Inject(fault.TwoPCDecideBefore); err != nil {
		return 0, err
	}
	v, err := c.applyStep(ctx, StepDecide, b)
	if err != nil {
		if key, ok := store.FailedKey(err); ok && string(key) == string(decisionKey(txnID)) {
			return 0, ErrDecisionConflict
		}
		return 0, err
	}
	return v, fault.Inject(fault.TwoPCDecideAfter)
}

// stageDecision is Decide's write, unapplied: the decision o, the
// resolution of parts (read from the durable record when nil) and `with`.
func (c *Coordinator) stageDecision(ctx context.Context, txnID string, parts []Participant, o Outcome, with *store.Batch) (*store.Batch, error) {
	if parts == nil && !c.opts.knobs.DeferResolution {
		var err error
		if parts, err = c.participantsOf(ctx, txnID); err != nil {
			return nil, err
		}
	}
	b, err := c.decisionBatch(txnID, o, func(p Participant, commit bool) (*store.Batch, error) {
		return p.Resolve(ctx, txnID, commit)
	}, parts)
	if err != nil {
		return nil, err
	}
	return b.Merge(with), nil
}

// decisionBatch is the create-if-absent decision o and — unless
// resolution is deferred (testknobs.TwoPC) — each participant's resolution
// (from resolve) with the coordinator record's deletion.
func (c *Coordinator) decisionBatch(txnID string, o Outcome, resolve func(Participant, bool) (*store.Batch, error), parts []Participant) (*store.Batch, error) {
	val, err := encodeDecision(o, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if c.opts.knobs.DeferResolution {
		return new(store.Batch).Absent(decisionKey(txnID)).Put(decisionKey(txnID), val), nil
	}
	_, commit := o.(Committed)
	resolved := make([]*store.Batch, len(parts))
	conds, ops := 1+withSlack, 2+withSlack
	for i, p := range parts {
		rb, err := resolve(p, commit)
		if err != nil {
			return nil, err
		}
		resolved[i] = rb
		conds, ops = conds+len(rb.Conds), ops+len(rb.Ops)
	}
	b := new(store.Batch).Grow(conds, ops).Absent(decisionKey(txnID)).Put(decisionKey(txnID), val)
	for _, rb := range resolved {
		b.Merge(rb)
	}
	return b.Delete(recordKey(txnID)), nil
}

// withSlack is room left in a Begin or Decide batch for the caller's `with`
// (a receipt's writes: about eight ops), so that merging it rarely grows
// the batch again.
const withSlack = 8

// DecideOrLearn decides o and, if another writer decided first, reads the
// winner. It returns the outcome in force and whether it was ours. When the
// winner cannot be read — or our own write was ambiguous — the error wraps
// ErrOutcomeUnknown: never treat that as an abort.
func (c *Coordinator) DecideOrLearn(ctx context.Context, txnID string, parts []Participant, o Outcome, with *store.Batch) (Outcome, bool, error) {
	err := c.Decide(ctx, txnID, parts, o, with)
	switch {
	case err == nil:
		return o, true, nil
	case errors.Is(err, ErrDecisionConflict):
		if fault.Planted(fault.BugConflictAsAbort) { // planted only under -tags idem_selftest
			// Planted bug: treats the conflict as proof of abort.
			return Aborted{Code: code.TransactionAborted, Message: "decision conflict"}, true, nil
		}
		won, lerr := c.Learn(ctx, txnID)
		if lerr != nil {
			return nil, false, lerr
		}
		return won, false, nil
	case errors.Is(err, store.ErrAmbiguous):
		return nil, false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return nil, false, err
}

// Learn reads the decision of txnID. Anything short of a readable decision
// is ErrOutcomeUnknown.
func (c *Coordinator) Learn(ctx context.Context, txnID string) (Outcome, error) {
	o, _, err := c.learnAt(ctx, txnID)
	return o, err
}

// learnAt is Learn that also returns the version of the decision record.
func (c *Coordinator) learnAt(ctx context.Context, txnID string) (Outcome, store.Version, error) {
	it, err := c.store.Get(ctx, decisionKey(txnID))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: reading decision of %s: %w", ErrOutcomeUnknown, txnID, err)
	}
	d, err := decodeDecision(it.Key, it.Value)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: decoding decision of %s: %w", ErrOutcomeUnknown, txnID, err)
	}
	return d.outcome(), it.Version, nil
}

// Status is what the store says about a transaction.
type Status struct {
	Begun      bool     // a coordinator record exists (participants may hold intents)
	Decision   Outcome  // nil if undecided
	Unresolved []string // participants whose intents are not yet resolved
	Result     []byte   // commit result stored at prepare
	Created    time.Time
	// Unprepared: the record holds no durable prepare (a direct chain's
	// first link, kept without its decision link): only an abort may be
	// presumed for it (PresumedFor).
	Unprepared bool
}

// Lookup reads a transaction's record and decision.
func (c *Coordinator) Lookup(ctx context.Context, txnID string) (Status, error) {
	var st Status
	it, err := c.store.Get(ctx, recordKey(txnID))
	switch {
	case err == nil:
		rec, err := decodeRecord(it.Key, it.Value)
		if err != nil {
			return Status{}, fmt.Errorf("twopc: decode record %s: %w", txnID, err)
		}
		st.Begun, st.Result, st.Created, st.Unprepared = true, rec.Result, time.UnixMilli(rec.Created), rec.Unprepared
		for _, p := range rec.Participants {
			if !p.Resolved {
				st.Unresolved = append(st.Unresolved, p.ID)
			}
		}
	case !errors.Is(err, store.ErrNotFound):
		return Status{}, err
	}
	dt, err := c.store.Get(ctx, decisionKey(txnID))
	switch {
	case err == nil:
		d, err := decodeDecision(dt.Key, dt.Value)
		if err != nil {
			return Status{}, fmt.Errorf("twopc: decode decision %s: %w", txnID, err)
		}
		st.Decision = d.outcome()
	case !errors.Is(err, store.ErrNotFound):
		return Status{}, err
	}
	return st, nil
}

// Committed reports whether txnID committed; it is the DecisionReader that
// lets document reads resolve intents on the fly.
func (c *Coordinator) Committed(ctx context.Context, txnID string) (committed, decided bool, err error) {
	it, err := c.store.Get(ctx, decisionKey(txnID))
	if errors.Is(err, store.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	d, err := decodeDecision(it.Key, it.Value)
	if err != nil {
		return false, false, err
	}
	return d.Commit, true, nil
}

// participantsOf rebuilds the unresolved participants from the record.
func (c *Coordinator) participantsOf(ctx context.Context, txnID string) ([]Participant, error) {
	it, err := c.store.Get(ctx, recordKey(txnID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // never begun, or already resolved
	}
	if err != nil {
		return nil, err
	}
	rec, err := decodeRecord(it.Key, it.Value)
	if err != nil {
		return nil, fmt.Errorf("twopc: decode record %s: %w", txnID, err)
	}
	var out []Participant
	for _, pr := range rec.Participants {
		if pr.Resolved {
			continue
		}
		p, err := c.participantAt(it.Key, pr)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
