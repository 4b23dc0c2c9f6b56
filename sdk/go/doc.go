// Package idem is the Go client of an Idem server (idemd): exactly-once
// batch writes over HTTP, with the ergonomics of the SDKs users know.
//
//   - A keyed call gets an Idempotency-Key of its own when the caller gives
//     none, and keeps it across its retries: a retry is the same request.
//     Every attempt carries the same Repeatability-First-Sent (the first
//     attempt's time, or BatchOptions.FirstSent): a server restored from a
//     backup refuses, rather than runs again, a key that may have executed
//     before the restore (ErrKeyMayHaveExecuted).
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
//   - A transaction_conflict abort (retry_with new_key: nothing applied)
//     is returned as it is: the key's first answer stands. Options.
//     ConflictRetries opts in to sending the batch again under a new key,
//     that many times at most (Result.Key names the key that committed).
//   - A session commit that aborted answers retry_with none and Retry
//     "new_session" (Error.NewSessionNeeded): a session has one commit.
//     Client.RunSession runs a function in a session and commits it; with
//     ConflictRetries it runs it again in a new session after such an
//     answer. Session.Info's CommitOutcome says how a commit ended.
//
// An interactive session (Client.BeginSession) stages batches on one or
// more tables, reads its own writes, and commits them all at once, exactly
// once — or aborts. Its commit is a keyed call, retried as Batch is (the
// session ID is its key unless CommitOptions.Key names one); reads, Info
// and Abort are retried as idempotent calls; a staged step, which is not
// idempotent, only when the server answers that it did not run it. With a
// client c and tables orders and stock:
//
//	sess, err := c.BeginSession(ctx, &idem.SessionOptions{TTL: time.Minute})
//	if err != nil {
//		log.Fatal(err)
//	}
//	step := map[string]any{
//		"orders": map[string]any{"inserts": []any{map[string]any{"id": "o-2", "doc": map[string]any{"total": 5}}}},
//		"stock":  map[string]any{"transforms": []any{map[string]any{"id": "w", "ops": []any{map[string]any{"op": "$inc", "path": "n", "value": -1}}, "upsert": true}}},
//	}
//	if _, err := sess.StageTables(ctx, step); err != nil {
//		log.Fatal(err) // a refused step leaves the session as it was
//	}
//	doc, _ := sess.Get(ctx, "orders", "o-2") // its own write: nobody else sees it before the commit
//	fmt.Fprintln(out, string(doc))           // {"total":5}
//	res, err := sess.Commit(ctx, nil)
//	if err != nil {
//		log.Fatal(err) // ErrTransactionConflict: a document it saw changed; nothing applied
//	}
//	fmt.Fprintln(out, res.Inserted, res.Transformed) // 1 1
//
// The HTTP layer underneath is generated from api/openapi.yaml (package
// idemapi). Cancellation and deadlines are the context's.
package idem
