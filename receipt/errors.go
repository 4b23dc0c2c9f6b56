package receipt

import (
	"errors"

	"github.com/idemdb/idem/store"
)

// ErrTombstoneCorrupt reports a tombstone value that does not decode. It
// is store.ErrCorruption too (store.Kind); its own name tells which record.
var ErrTombstoneCorrupt = store.Kind("receipt: corrupt tombstone", store.ErrCorruption)

// ErrBadCursor reports a cursor that is not one List gave for this index.
var ErrBadCursor = errors.New("receipt: the cursor is not one this listing gave")

// Sentinel errors of the receipt layer's steps. Both stay inside the
// package: a caller of Execute never sees them, it gets an Answer.
var (
	// errRetry sends Execute back to looking the receipt up: the receipt
	// changed under the step (another writer won a race, or it became
	// immutable meanwhile). Execute retries up to ExecuteAttemptsMax times.
	errRetry = errors.New("receipt: retry lookup")
	// errNotOurs: another live owner holds the receipt's lease.
	errNotOurs = errors.New("receipt: held by another live owner")
)
