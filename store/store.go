package store

import "context"

// Store is the contract every layer above the engine programs against.
//
// Ownership: Items returned by Get and Scan may share memory with the store
// and must not be modified; they stay valid as long as the caller keeps
// them (the store never changes bytes it handed out). Get's Item.Key may
// be the very slice the caller passed. A value the local
// engine read from its value log is a fresh copy, the caller's alone; one
// from RAM is shared. Apply copies what it needs from the batch before it
// returns; the caller may reuse the batch afterwards.
//
// A value that cannot be read back whole (a damaged value-log record) is
// an error wrapping ErrCorruption, never other bytes and never ErrNotFound.
type Store interface {
	// Get returns the current value of key: the value of the last Apply
	// that returned nil (reads never see a batch that has not), or
	// ErrNotFound. Other errors: ErrClosed; a remote store may also return
	// ctx.Err(), or ErrUnavailable when it could not be reached within its
	// own bound; nothing is known after either.
	Get(ctx context.Context, key []byte) (Item, error)
	// Scan returns up to limit items with start ≤ key < end in key order. A
	// nil end means no upper bound. limit must be in 1..Limits().ScanItemsMax,
	// else the error is ErrInvalidScan (CheckScan). One Scan is a
	// point-in-time view: it sees every op of a batch or none of them.
	// Successive Scans (pages) are not one view: a batch may land between
	// them. Other errors as Get.
	Scan(ctx context.Context, start, end []byte, limit int) ([]Item, error)
	// Apply checks the batch's conditions and, if all hold, writes its puts
	// and deletes atomically and durably, returning the batch's version.
	//
	//   nil                  every op is durable and visible to reads
	//   *ConditionError      (errors.Is ErrConditionFailed) nothing was written
	//   ErrAmbiguous         the outcome is unknown: treat it as pending
	//   ErrFailStopped       nothing was written; the store refuses writes
	//                        until it is reopened (engine.DB) or until an
	//                        operator clears the cause (etcd's NOSPACE)
	//   ErrClosed, ErrInvalidBatch (Check), ctx.Err() before submission:
	//                        nothing written
	Apply(ctx context.Context, b *Batch) (Version, error)
	// Limits says what one call accepts. Every layer above sizes its
	// batches and scans from it, never from a constant of its own: a
	// replicated store accepts far less per call (etcd: 128 ops per Txn,
	// 1.5 MiB per request) than the local one.
	Limits() Limits
	// Capabilities says what the store offers beyond this contract
	// (capabilities.go). A wrapper answers for itself: it forwards a
	// capability only if every call through it still passes through the
	// wrapper, else it leaves it out.
	Capabilities() Capabilities
}

// Version is the log index of the batch that last wrote a key (on etcd,
// its revision). Versions are strictly increasing across batches; 0 means
// "never written". (On etcd, concurrent batches sent in one grouped Txn
// share its revision: a batch after another, in real time, still gets a
// higher one, and each key's version is its last writer's.) A batch that
// changes nothing — it only deletes absent keys — may answer the version
// of the last batch that did: etcd gives such a Txn no revision of its own.
type Version uint64

// Item is one key with its value and version.
type Item struct {
	Key     []byte
	Value   []byte
	Version Version
}
