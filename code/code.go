// Package code is the registry of Idem's error codes (docs/design.md §8): each code's
// HTTP status, whether a retry can succeed, with which key, and the title of
// its problem details (the api renders them from here). Every layer
// reports failures as *code.Error so that the code survives from where it
// arises (preflight, a participant's vote, the coordinator) to the stored
// receipt envelope and the HTTP problem body, without anyone classifying by
// message text.
package code

import (
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code.
type Code string

// The codes of docs/design.md §8, plus transaction_aborted (presumed abort and the
// schema-1 legacy fallback), payload_too_large (413), receipt_not_found,
// the router's not_found and method_not_allowed, unsupported_media_type
// (415: a body that is not JSON), and unavailable (503 from /healthz when
// the store fail-stopped), and the interactive sessions' session_not_found
// (404), session_aborted and session_committed (409: the session ended,
// by abort, expiry or its owner's death, or by its commit),
// table_settings_conflict (409: a create of an existing table asked for
// settings other than the table's), and store_full (503: on etcd, the
// backend is near its space quota; new keys and sessions wait),
// key_may_have_executed (409: the restore fence), and session_cross_shard
// (409: a session step on a table of another store shard).
const (
	InvalidRequest      Code = "invalid_request"
	InvalidKey          Code = "invalid_idempotency_key"
	Unauthenticated     Code = "unauthenticated"
	Forbidden           Code = "forbidden"
	TableNotFound       Code = "table_not_found"
	DocumentNotFound    Code = "document_not_found"
	TransactionConflict Code = "transaction_conflict"
	TransactionAborted  Code = "transaction_aborted"
	RequestInProgress   Code = "idempotency_request_in_progress"
	KeyMismatch         Code = "idempotency_key_mismatch"
	KeyExpired          Code = "idempotency_key_expired"
	FirstSentTooOld     Code = "first_sent_too_old"
	Overloaded          Code = "overloaded"
	ReceiptPending      Code = "idempotency_receipt_pending"
	PayloadTooLarge     Code = "payload_too_large"
	UnsupportedMedia    Code = "unsupported_media_type"
	HeadersTooLarge     Code = "header_fields_too_large"
	RequestTimeout      Code = "request_timeout"
	NotImplemented      Code = "not_implemented"
	ReceiptNotFound     Code = "receipt_not_found"
	NotFound            Code = "not_found"
	MethodNotAllowed    Code = "method_not_allowed"
	Unavailable         Code = "unavailable"
	SessionNotFound     Code = "session_not_found"
	SessionAborted      Code = "session_aborted"
	SessionCommitted    Code = "session_committed"
	Internal            Code = "internal"

	TableSettingsConflict Code = "table_settings_conflict"
	// StoreFull: the store is near its space quota (etcd's backend above
	// its high-water mark, or its NOSPACE alarm raised): new keys and
	// sessions are refused, nothing was written, while what was started
	// finishes and cleanup frees space.
	StoreFull Code = "store_full"
	// KeyMayHaveExecuted: the store was restored from a backup, and this
	// key, unknown to it and first sent before the restore, may have
	// executed in the window the backup lost; it is not executed, and
	// retrying it cannot tell (docs/design.md §15).
	KeyMayHaveExecuted Code = "key_may_have_executed"
	// SessionCrossShard: a session step named a table of another store
	// shard than the session's (docs/cluster.md "Shards"): its commit would
	// span two etcd clusters, which no Txn can. Nothing was staged.
	SessionCrossShard Code = "session_cross_shard"
)

// RetryWith says how a client may retry.
type RetryWith string

const (
	SameKey RetryWith = "same_key" // retry with the same Idempotency-Key
	NewKey  RetryWith = "new_key"  // the key's answer is final; a new attempt needs a new key
	None    RetryWith = "none"     // retrying cannot help
)

// Info is what a code means to a client.
type Info struct {
	Status    int // HTTP status
	Retryable bool
	RetryWith RetryWith
	Title     string // the problem's title (RFC 9457): a short, fixed summary of the code
}

var registry = map[Code]Info{
	InvalidRequest:      {400, false, None, "Invalid request"},
	InvalidKey:          {400, false, None, "Invalid Idempotency-Key"},
	Unauthenticated:     {401, false, None, "Unauthenticated"},
	Forbidden:           {403, false, None, "Forbidden"},
	TableNotFound:       {404, false, NewKey, "Table not found"},
	DocumentNotFound:    {404, false, NewKey, "Document not found"},
	TransactionConflict: {409, true, NewKey, "Transaction conflict"},
	TransactionAborted:  {409, true, NewKey, "Transaction aborted"},
	RequestInProgress:   {409, true, SameKey, "Request in progress"},
	KeyMismatch:         {422, false, None, "Idempotency-Key reused with a different request"},
	KeyExpired:          {409, false, NewKey, "Idempotency-Key expired"},
	FirstSentTooOld:     {412, false, NewKey, "First sent before the server's memory of keys"},
	Overloaded:          {429, true, SameKey, "Overloaded"},
	ReceiptPending:      {503, true, SameKey, "Outcome pending"},
	PayloadTooLarge:     {413, false, None, "Payload too large"},
	UnsupportedMedia:    {415, false, None, "Unsupported media type"},
	HeadersTooLarge:     {431, false, None, "Request header fields too large"},
	RequestTimeout:      {408, true, SameKey, "Request timeout"},
	NotImplemented:      {501, false, None, "Not implemented"},
	ReceiptNotFound:     {404, false, None, "Receipt not found"},
	NotFound:            {404, false, None, "Not found"},
	MethodNotAllowed:    {405, false, None, "Method not allowed"},
	Unavailable:         {503, true, SameKey, "Service unavailable"},
	SessionNotFound:     {404, false, None, "Session not found"},
	SessionAborted:      {409, false, None, "Session aborted"},
	SessionCommitted:    {409, false, None, "Session committed"},
	Internal:            {500, true, SameKey, "Internal error"},

	TableSettingsConflict: {409, false, None, "Table exists with other settings"},
	StoreFull:             {503, true, SameKey, "Store full"},
	KeyMayHaveExecuted:    {409, false, None, "Key may have executed before a restore"},
	SessionCrossShard:     {409, false, None, "Session spans store shards"},
}

// Lookup returns a code's meaning; unknown codes read as internal.
func Lookup(c Code) Info {
	if i, ok := registry[c]; ok {
		return i
	}
	return registry[Internal]
}

// Known reports whether c is registered.
func Known(c Code) bool { _, ok := registry[c]; return ok }

// All lists every registered code.
func All() []Code {
	out := make([]Code, 0, len(registry))
	for c := range registry {
		out = append(out, c)
	}
	return out
}

// Error is a failure with a code and a human message.
type Error struct {
	Code    Code
	Message string
	// RetryAfter is when a retry may succeed, for a refusal that knows
	// (an overloaded answer: when the limit it hit frees up); zero: the
	// answer's default. The api sends it as Retry-After, so that no layer
	// parses it out of Message.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}
