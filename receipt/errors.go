package receipt

import "errors"

// Sentinel errors of the receipt layer. Both stay inside the package: a
// caller of Execute never sees them, it gets an Answer.
var (
	// errRetry sends Execute back to looking the receipt up: the receipt
	// changed under the step (another writer won a race, or it became
	// immutable meanwhile). Execute retries up to ExecuteAttemptsMax times.
	errRetry = errors.New("receipt: retry lookup")
	// errNotOurs: another live owner holds the receipt's lease.
	errNotOurs = errors.New("receipt: held by another live owner")
)
