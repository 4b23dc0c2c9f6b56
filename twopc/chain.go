package twopc

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/fault"
	"github.com/idemdb/idem/store"
)

// StagedResolver is implemented by participants that can resolve what
// their last Prepare staged without reading it back, which a decision
// chained right behind the prepare needs: when it is built, the intents are
// not written yet.
type StagedResolver interface {
	// ResolveStaged returns the writes that apply (commit) or discard the
	// intents the last Prepare staged for txnID, with no conditions on
	// them (nothing comes between the two links of a chain). ok is false
	// if the last Prepare was not txnID's.
	ResolveStaged(txnID string, commit bool) (b *store.Batch, ok bool)
}

// Chained says where BeginCommit's two links were written.
type Chained struct {
	// Begun is the first link's version: record and prepares (or, for
	// DirectCommitters, no 2PC write at all) with beginWith. It is
	// Decided when the chain was one link (direct, with beginWith empty).
	Begun   store.Version
	Decided store.Version // the decision link: decision, resolution, decideWith
	Result  []byte        // the committed result, as recorded at Begin
}

// BeginCommit is Begin followed by Decide(Committed) in one durable wait,
// for a store whose writes share one log (store.Chainer) and participants
// that are StagedResolvers: the Begin write (record, every prepare,
// beginWith) and the Decide write (create-if-absent decision, every
// resolution, decideWith) are sequenced back to back as two links of one
// chain, and one fsync makes both durable.
//
// The records are exactly Begin's and Decide's, and log order keeps the
// prepares ahead of the decision: a crash may keep the Begin link alone —
// a begun, undecided transaction, which recovery decides as it would after
// a crash between Begin and Decide — but never the decision without them.
// decideWith, if set, is called with the commit result once every
// participant prepared, for writes to make atomically with the decision
// (the receipt layer's terminal envelope). It must not condition on keys
// beginWith writes: nothing can come between the links.
//
// ok=false with a nil error means nothing was written: the store or a
// participant cannot chain, a participant voted no, or a condition failed
// (the transaction already begun or decided, a conflicting intent, a
// condition of beginWith or decideWith). The caller then goes through Begin
// and Decide, which tell those cases apart. An ambiguous write returns an
// error wrapping ErrOutcomeUnknown and store.ErrAmbiguous.
func (c *Coordinator) BeginCommit(ctx context.Context, txn Txn, beginWith *store.Batch, decideWith func(result []byte) (*store.Batch, error)) (Chained, bool, error) {
	if c.store.Capabilities().Chain == nil {
		return Chained{}, false, nil
	}
	for _, p := range txn.Participants {
		_, staged := p.(StagedResolver)
		_, direct := p.(DirectCommitter)
		if !staged && !direct {
			return Chained{}, false, nil
		}
	}
	for attempt := 0; ; attempt++ {
		ch, ok, contended, err := c.beginCommitOnce(ctx, txn, beginWith, decideWith)
		if !contended || attempt == ChainContendedRetriesMax {
			return ch, ok, err
		}
	}
}

// ChainContendedRetriesMax bounds the chains BeginCommit tries again after
// one failed only on a document another transaction held or changed
// meanwhile. Nothing was written, and the holder's chain is usually done
// by the time this one is prepared again; falling back to Begin and Decide
// at once would hold this transaction's intents across two waits instead
// of one — the longer window in which every other chain on the same
// document fails too. (Measured: on a counter four clients increment, two
// chains in three failed and fell back.) A conflict that lasts is still
// what Begin reports, the participant's no.
const ChainContendedRetriesMax = 2

// beginCommitOnce is one try of BeginCommit; contended says it failed only
// on a document's condition (an intent held, or a version changed), which
// a fresh prepare may pass.
func (c *Coordinator) beginCommitOnce(ctx context.Context, txn Txn, beginWith *store.Batch,
	decideWith func(result []byte) (*store.Batch, error)) (ch Chained, ok, contended bool, err error) {
	links, result, direct, refused, err := c.stageChain(ctx, txn, beginWith, decideWith)
	if refused || err != nil {
		return Chained{}, false, false, err // Begin reports the vote
	}
	if err := fault.Inject(fault.TwoPCChainBefore); err != nil {
		return Chained{}, false, false, err
	}
	vs, err := ApplySteps(ctx, c.store, links)
	if err != nil {
		contended, err := notWritten(err)
		return Chained{}, false, contended, err
	}
	for _, p := range txn.Participants {
		if pp, ok := p.(Preparer); ok && !direct {
			pp.Prepared(txn.ID, vs[0])
		}
	}
	ch = Chained{Begun: vs[0], Decided: vs[len(vs)-1], Result: result}
	return ch, true, false, fault.Inject(fault.TwoPCChainAfter)
}

// stageChain is BeginCommit's chain, unapplied: the begin link (record,
// prepares or, direct, none, and beginWith) and the decision link
// (decision, resolutions or direct commits, decideWith's writes); refused
// when a participant voted no.
func (c *Coordinator) stageChain(ctx context.Context, txn Txn, beginWith *store.Batch,
	decideWith func(result []byte) (*store.Batch, error)) (links []Step, result []byte, direct, refused bool, err error) {
	begin, decide, result, direct, err := c.directChain(ctx, txn, beginWith)
	if !direct {
		begin, decide, result, err = c.stagedChain(ctx, txn, beginWith)
	}
	if err != nil {
		return nil, nil, direct, isVote(err), voteless(err)
	}
	if decideWith != nil {
		with, err := decideWith(result)
		if err != nil {
			return nil, nil, direct, false, err
		}
		decide.Merge(with)
	}
	if len(begin.Ops) == 0 {
		// A direct chain with nothing of the caller's to publish first:
		// its first link would only hold conditions, which the decision
		// link can check itself.
		return []Step{{Name: StepDecideLink, Batch: decide.Merge(&store.Batch{Conds: begin.Conds}), Chain: true}}, result, direct, false, nil
	}
	return []Step{{Name: StepBeginLink, Batch: begin, Chain: true}, {Name: StepDecideLink, Batch: decide, Linked: true}}, result, direct, false, nil
}

// isVote reports whether a staging error is a participant's "no" vote (a
// *code.Error), which a single write or a chain leaves to Begin to report.
func isVote(err error) bool {
	var refusal *code.Error
	return errors.As(err, &refusal)
}

// voteless is err, unless it is a vote (isVote): then nil.
func voteless(err error) error {
	if isVote(err) {
		return nil
	}
	return err
}

// notWritten classifies the error of a chain's (or CommitOnce's) write: a
// failed condition wrote nothing and is no error — contended if it was a
// document's, which a fresh prepare may pass; an ambiguous write's outcome
// is unknown.
func notWritten(err error) (contended bool, _ error) {
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		key, _ := store.FailedKey(err)
		return store.NSIntent.Has(key) || store.NSTable.Has(key), nil
	case errors.Is(err, store.ErrAmbiguous):
		return false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return false, err
}

// stagedChain returns BeginCommit's two links for participants that stage
// intents: Begin's write (record, every prepare, beginWith) and the
// decision with every participant's staged resolution.
func (c *Coordinator) stagedChain(ctx context.Context, txn Txn, beginWith *store.Batch) (begin, decide *store.Batch, result []byte, err error) {
	for _, p := range txn.Participants {
		if _, ok := p.(StagedResolver); !ok {
			return nil, nil, nil, fmt.Errorf("twopc: participant %s can neither commit directly nor resolve what it staged", p.ID())
		}
	}
	if begin, result, err = c.beginBatch(ctx, txn); err != nil {
		return nil, nil, nil, err
	}
	decide, err = c.decisionBatch(txn.ID, Committed{Result: result}, func(p Participant, commit bool) (*store.Batch, error) {
		b, staged := p.(StagedResolver).ResolveStaged(txn.ID, commit)
		if !staged {
			return nil, fmt.Errorf("twopc: participant %s lost what it staged for %s", p.ID(), txn.ID)
		}
		return b, nil
	}, txn.Participants)
	if err != nil {
		return nil, nil, nil, err
	}
	return begin.Merge(beginWith), decide, result, nil
}
