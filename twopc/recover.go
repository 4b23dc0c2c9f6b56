package twopc

import (
	"context"
	"errors"
	"time"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// UndecidedPolicy says what recovery decides for a begun, undecided
// transaction; callers name it (RecoverOptions.Undecided, PresumedOutcome).
// The zero value is PresumeAbort — the safe rule, so a caller that names
// none aborts rather than commits — but it is not the product's default:
// the receipt layer chooses CommitPrepared unless receipt.Options.PresumeAbort
// is set.
type UndecidedPolicy int

const (
	// PresumeAbort decides abort (docs/design.md §6): the classic rule.
	PresumeAbort UndecidedPolicy = iota
	// CommitPrepared decides commit, with the result stored at prepare.
	// docs/design.md §12 allows it for a transaction whose every prepare is durable,
	// which Begin guarantees for every record it writes (record and prepares
	// are one atomic Apply). The receipt layer uses it so that a successor
	// finishes a crashed owner's work instead of undoing it.
	CommitPrepared
)

// Recovery bounds.
const (
	RecoverPageMax = 256   // records read per scan
	RecoverTxnsMax = 10000 // transactions handled per Recover call
)

// RecoverOptions configure one recovery pass.
type RecoverOptions struct {
	// Undecided is what the pass decides for a begun, undecided
	// transaction (see UndecidedPolicy).
	Undecided UndecidedPolicy
	// Eligible says whether this process may decide and resolve txnID now
	// (for example: the owner's lease expired). nil means all are eligible.
	Eligible func(txnID string, created time.Time) bool
}

// RecoverStats counts what one pass did.
type RecoverStats struct {
	Scanned   int // coordinator records seen
	Decided   int // decisions written by this pass
	Committed int // of which commit
	Aborted   int // of which abort
	Resolved  int // participants resolved
	Deferred  int // not eligible, outcome could not be established, or resolution contended
}

// Recover finishes every begun transaction it may: an undecided one is
// decided by opts.Undecided through the same create-if-absent as everyone else
// (so it can never contradict a decision made concurrently), and a decided
// one has its participants resolved. Decisions stay retained.
func (c *Coordinator) Recover(ctx context.Context, opts RecoverOptions) (RecoverStats, error) {
	var st RecoverStats
	start := recordPrefix
	end := store.PrefixEnd(recordPrefix)
	for st.Scanned < RecoverTxnsMax {
		page := min(RecoverPageMax, c.store.Limits().ScanItemsMax)
		items, err := c.store.Scan(ctx, start, end, page)
		if err != nil {
			return st, err
		}
		for _, it := range items {
			st.Scanned++
			id := string(it.Key[len(recordPrefix):])
			rec, err := decodeRecord(it.Key, it.Value)
			if err != nil {
				return st, err
			}
			if opts.Eligible != nil && !opts.Eligible(id, time.UnixMilli(rec.Created)) {
				st.Deferred++
				continue
			}
			if err := c.recoverOne(ctx, id, rec, opts.Undecided, &st); err != nil {
				if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, store.ErrAmbiguous) || errors.Is(err, ErrResolveContended) {
					st.Deferred++
					continue
				}
				return st, err
			}
		}
		if len(items) < page {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	return st, nil
}

func (c *Coordinator) recoverOne(ctx context.Context, id string, rec record, policy UndecidedPolicy, st *RecoverStats) error {
	status, err := c.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if status.Decision == nil {
		o := PresumedFor(policy, status)
		_, won, err := c.DecideOrLearn(ctx, id, nil, o, nil)
		if err != nil {
			return err
		}
		if won {
			st.Decided++
			if _, ok := o.(Committed); ok {
				st.Committed++
			} else {
				st.Aborted++
			}
			if !c.opts.knobs.DeferResolution {
				st.Resolved += len(status.Unresolved)
				return nil
			}
		}
	}
	n, err := c.Resolve(ctx, id)
	st.Resolved += n
	return err
}

// PresumedFor is what recovery decides, by policy, for the undecided
// transaction st describes: PresumedOutcome with its stored result, but an
// abort whatever the policy when no prepare of it is durable
// (st.Unprepared), since committing it would publish a result nothing
// applied.
func PresumedFor(policy UndecidedPolicy, st Status) Outcome {
	if st.Unprepared {
		policy = PresumeAbort
	}
	return PresumedOutcome(policy, st.Result)
}

// PresumedOutcome is what recovery decides, by policy, for an undecided
// transaction whose commit result (stored at prepare) is result.
func PresumedOutcome(policy UndecidedPolicy, result []byte) Outcome {
	if policy == CommitPrepared {
		return Committed{Result: result}
	}
	return Aborted{Code: code.TransactionAborted, Message: "the transaction was aborted by recovery before it was decided (presumed abort)"}
}
