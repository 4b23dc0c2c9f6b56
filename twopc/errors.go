package twopc

import "errors"

var (
	// ErrDecisionConflict means another writer decided first. It is not proof
	// of abort: read the winner with Learn.
	ErrDecisionConflict = errors.New("twopc: decision conflict: another writer decided first")
	// ErrOutcomeUnknown means the outcome could not be established (the
	// decision could not be read, or its write was ambiguous). The
	// transaction must stay pending until recovery learns it. From an
	// ambiguous write it wraps store.ErrAmbiguous as well; from a decision
	// that could not be read it does not, and must not: the read's own
	// error (fail-stopped, closed, damaged) is what a caller classifies
	// (receipt's classifyStep), not an unknown outcome of a write.
	ErrOutcomeUnknown = errors.New("twopc: outcome unknown")
	// ErrInProgress means the transaction was begun and is not decided yet.
	ErrInProgress = errors.New("twopc: transaction begun and undecided")
	// ErrUnresolved means Release was asked for a transaction whose
	// participants still hold intents.
	ErrUnresolved = errors.New("twopc: participants not yet resolved")
	// ErrResolveContended means Resolve gave up after ResolveConflictsMax
	// of its writes failed their conditions. Nothing is lost: the decision
	// stands, the participants marked resolved stay resolved, the others
	// keep their intents (reads resolve them on the fly), and a later
	// Resolve or Recover carries on where this one stopped.
	ErrResolveContended = errors.New("twopc: resolve gave up under contention")
	// ErrDecisionChanged means a decided record was found changed while
	// its coordinator record stood: a decision is written once
	// (create-if-absent) and deleted only by Release, which requires the
	// coordinator record gone. The store holds data this package never
	// writes — corruption, or a writer outside it. Nothing was written.
	ErrDecisionChanged = errors.New("twopc: invariant broken: a decided record changed")
)
