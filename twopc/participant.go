package twopc

import (
	"context"

	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/store"
)

// Participant is one shard holding a transaction's intents. Participants do
// not write: they return the batch that makes their step durable, and the
// coordinator applies it (together with its own record) atomically. A remote
// participant can implement Prepare by making its vote durable itself and
// returning an empty batch.
type Participant interface {
	// ID names the participant uniquely within a transaction.
	ID() string
	// Ref encodes whatever the Resolver needs to rebuild the participant
	// after a restart.
	Ref() []byte
	// Prepare checks for conflicts and returns the writes that stage txnID's
	// intents, with the conditions under which they are valid. A *code.Error
	// is a "no" vote; any other error is an error.
	Prepare(ctx context.Context, txnID string) (*store.Batch, error)
	// Resolve returns the writes that apply (commit=true) or discard txnID's
	// intents. It is idempotent: an empty batch means nothing is left.
	Resolve(ctx context.Context, txnID string, commit bool) (*store.Batch, error)
	// Refusal explains a failed condition on one of this participant's keys
	// as its vote: the code to abort with, and whether a fresh Prepare may
	// succeed (a document changed under us, rather than an open intent).
	// ok=false means the key is not this participant's.
	Refusal(key []byte) (refusal *code.Error, retry bool, ok bool)
}

// Resolver rebuilds a participant from its Ref, for resolution after the
// process that began the transaction is gone.
type Resolver func(ref []byte) (Participant, error)

// Preparer is implemented by participants that want to know the version at
// which Begin made their intents durable (to resolve without reading them).
type Preparer interface {
	Prepared(txnID string, v store.Version)
}

// Contender is implemented by participants that can tell contention from a
// real conflict (docs/design.md §15, hot documents): a failed condition on
// key that another transaction's intent holds, or a document that changed
// while nothing the participant computed depends on the version it read,
// is contention — worth a fresh Begin once the other transaction is
// decided. A session's read set that changed is a real conflict, never
// contention.
type Contender interface {
	Contended(key []byte) bool
}

// IntentHolder is implemented by participants whose failed condition can
// be another transaction's open intent: HolderOf names the transaction
// whose intent is at key now (ok false: none, or key is not an intent).
// Begin uses it to pay visibility debt it meets (debt.go).
type IntentHolder interface {
	HolderOf(ctx context.Context, key []byte) (txnID string, ok bool, err error)
	// IntentKeys appends the keys of the intents this participant's
	// documents would carry: where leftover intents of decided
	// transactions may have made its prepare read a stale document.
	IntentKeys(dst [][]byte) [][]byte
}
