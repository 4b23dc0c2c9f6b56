package idem

import (
	"fmt"

	"github.com/idemdb/idem/sdk/go/idemapi"
)

// Error is a problem the server answered (application/problem+json).
type Error struct {
	Status        int
	Code          idemapi.ErrorCode
	Detail        string
	Retryable     bool
	RetryWith     string // "same_key", "new_key", "none", or "" on an unkeyed answer
	TransactionID string // the transaction the key is bound to, if any
	Outcome       string // committed, aborted, not_applied, pending, or ""
	// Retry names what must be made anew to try again, beyond the key:
	// "new_session" on a session commit that aborted or was not applied
	// (RetryWith is then "none": a session has one commit). "" otherwise.
	Retry string
}

// NewSessionNeeded reports whether the answer says that only a new
// session can try again (Retry "new_session"); Client.RunSession acts on
// it when Options.ConflictRetries allows.
func (e *Error) NewSessionNeeded() bool { return e.Retry == "new_session" }

// conflictAborted reports whether err is a batch's proven abort for a
// conflict, which a new key may try again: transaction_conflict, outcome
// aborted (nothing applied), retry_with new_key.
func conflictAborted(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == idemapi.ErrorCodeTransactionConflict && e.Outcome == "aborted" && e.RetryWith == "new_key"
}

func (e *Error) Error() string {
	return fmt.Sprintf("idem: %d %s: %s", e.Status, e.Code, e.Detail)
}

// Is matches a sentinel of the same code: errors.Is(err, idem.ErrTableNotFound).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == 0 && t.Code == e.Code
}

func sentinel(c idemapi.ErrorCode) *Error { return &Error{Code: c} }

// One sentinel per problem code of the API (TestErrors_OneSentinelPerCode
// holds the list to the spec's).
var (
	ErrInvalidRequest        = sentinel(idemapi.ErrorCodeInvalidRequest)
	ErrInvalidKey            = sentinel(idemapi.ErrorCodeInvalidIdempotencyKey)
	ErrUnauthenticated       = sentinel(idemapi.ErrorCodeUnauthenticated)
	ErrForbidden             = sentinel(idemapi.ErrorCodeForbidden)
	ErrTableNotFound         = sentinel(idemapi.ErrorCodeTableNotFound)
	ErrDocumentNotFound      = sentinel(idemapi.ErrorCodeDocumentNotFound)
	ErrReceiptNotFound       = sentinel(idemapi.ErrorCodeReceiptNotFound)
	ErrNotFound              = sentinel(idemapi.ErrorCodeNotFound)
	ErrMethodNotAllowed      = sentinel(idemapi.ErrorCodeMethodNotAllowed)
	ErrTransactionConflict   = sentinel(idemapi.ErrorCodeTransactionConflict)
	ErrTransactionAborted    = sentinel(idemapi.ErrorCodeTransactionAborted)
	ErrRequestInProgress     = sentinel(idemapi.ErrorCodeIdempotencyRequestInProgress)
	ErrPayloadTooLarge       = sentinel(idemapi.ErrorCodePayloadTooLarge)
	ErrUnsupportedMediaType  = sentinel(idemapi.ErrorCodeUnsupportedMediaType)
	ErrKeyMismatch           = sentinel(idemapi.ErrorCodeIdempotencyKeyMismatch)
	ErrKeyExpired            = sentinel(idemapi.ErrorCodeIdempotencyKeyExpired)
	ErrFirstSentTooOld       = sentinel(idemapi.ErrorCodeFirstSentTooOld)
	ErrHeaderFieldsTooLarge  = sentinel(idemapi.ErrorCodeHeaderFieldsTooLarge)
	ErrOverloaded            = sentinel(idemapi.ErrorCodeOverloaded)
	ErrInternal              = sentinel(idemapi.ErrorCodeInternal)
	ErrNotImplemented        = sentinel(idemapi.ErrorCodeNotImplemented)
	ErrReceiptPending        = sentinel(idemapi.ErrorCodeIdempotencyReceiptPending)
	ErrUnavailable           = sentinel(idemapi.ErrorCodeUnavailable)
	ErrSessionNotFound       = sentinel(idemapi.ErrorCodeSessionNotFound)
	ErrSessionAborted        = sentinel(idemapi.ErrorCodeSessionAborted)
	ErrSessionCommitted      = sentinel(idemapi.ErrorCodeSessionCommitted)
	ErrTableSettingsConflict = sentinel(idemapi.ErrorCodeTableSettingsConflict)
	ErrRequestTimeout        = sentinel(idemapi.ErrorCodeRequestTimeout)
	// ErrStoreFull: the store is near its space quota; retry later with the
	// same key.
	ErrStoreFull = sentinel(idemapi.ErrorCodeStoreFull)
	// ErrKeyMayHaveExecuted: the server's store was restored from a
	// backup and this key, unknown to it and first sent before the
	// restore, may have executed in the window the backup lost; it was not
	// executed. Check for its effect; send it with a new key if absent.
	ErrKeyMayHaveExecuted = sentinel(idemapi.ErrorCodeKeyMayHaveExecuted)
	// ErrSessionCrossShard: on a deployment of several store shards, a
	// session step named a table of another shard than the session's;
	// nothing was staged. Begin a session per shard's tables.
	ErrSessionCrossShard = sentinel(idemapi.ErrorCodeSessionCrossShard)
)

// sentinels lists them, for the test that holds them to the server's codes.
var sentinels = []*Error{ErrInvalidRequest, ErrInvalidKey, ErrUnauthenticated, ErrForbidden, ErrTableNotFound, ErrDocumentNotFound,
	ErrReceiptNotFound, ErrNotFound, ErrMethodNotAllowed, ErrTransactionConflict, ErrTransactionAborted,
	ErrRequestInProgress, ErrPayloadTooLarge, ErrUnsupportedMediaType, ErrKeyMismatch, ErrKeyExpired, ErrFirstSentTooOld, ErrHeaderFieldsTooLarge,
	ErrOverloaded, ErrInternal, ErrNotImplemented, ErrReceiptPending, ErrUnavailable,
	ErrSessionNotFound, ErrSessionAborted, ErrSessionCommitted, ErrTableSettingsConflict, ErrRequestTimeout,
	ErrStoreFull, ErrKeyMayHaveExecuted, ErrSessionCrossShard}
