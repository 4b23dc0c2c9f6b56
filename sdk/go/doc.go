// Package idem is the Go client of an Idem server (idemd): exactly-once
// batch writes over HTTP, with the ergonomics of the SDKs users know.
//
//   - A keyed call gets an Idempotency-Key of its own when the caller gives
//     none, and keeps it across its retries: a retry is the same request.
//   - Retries are bounded (Options.MaxRetries, 2 by default) with jittered
//     exponential backoff, 0.5 s·(1+n²) up to 5 s, or the server's
//     Retry-After when it says more. They happen on transport errors and on
//     every problem whose retry_with is same_key: 409 request in progress,
//     429 overloaded, 503 receipt pending or unavailable, 500 internal.
//   - Every problem is an *Error carrying its code, retryable, retry_with,
//     transaction ID and outcome; errors.Is matches it against the one
//     sentinel per code (ErrTableNotFound, ErrKeyMismatch, …).
//   - A Result says whether it was replayed (Idempotent-Replayed) and
//     names its transaction.
//
// The HTTP layer underneath is generated from api/openapi.yaml (package
// idemapi). Cancellation and deadlines are the context's.
package idem
