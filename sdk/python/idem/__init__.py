"""Exactly-once batch writes against an Idem server (idemd).

    from idem import Client, IdempotencyKeyMismatchError
    c = Client("http://127.0.0.1:8420")
    c.create_table("orders")
    r = c.batch("orders", {"inserts": [{"id": "o-1", "doc": {"total": 12}}]}, key="order-1")

A call without a key gets one of its own, kept across its retries, each with
the same Repeatability-First-Sent (the first attempt's time, or first_sent),
so that a server restored from a backup refuses a key that may have executed
before the restore (KeyMayHaveExecutedError) instead of running it again; retries
(2 by default, jittered 0.5 s·(1+n²) up to 5 s, or Retry-After) happen on
transport errors and every retry_with: same_key answer. Every problem is an
IdemError subclass, one per code. A transaction_conflict abort (retry_with
new_key) is raised as it is — the key's first answer stands —
unless Client(conflict_retries=n) opts in to sending it again under a new
key. A session commit that aborted answers retry_with none and retry
"new_session" (IdemError.new_session_needed); Client.run_session runs a
function in a session and commits it, and with conflict_retries runs it
again in a new session after such an answer.

An interactive session (Client.begin_session) stages batches on one or more
tables, reads its own writes, and commits them all at once, exactly once —
or aborts, as leaving its with block without a commit does. Its commit is a
keyed call, retried as a batch (the session ID is its key unless key= names
one); get, info and abort are retried as idempotent calls; stage, which is
not idempotent, only on 429 overloaded (not run). With tables orders and
stock:

    with c.begin_session(ttl=60) as s:
        s.stage_tables({"orders": {"inserts": [{"id": "o-2", "doc": {"total": 5}}]},
                        "stock": {"transforms": [{"id": "w", "ops": [{"op": "$inc", "path": "n", "value": -1}],
                                                  "upsert": True}]}})
        print(s.get("orders", "o-2"))  # {'total': 5}: its own write, seen by nobody else yet
        r = s.commit()  # TransactionConflictError if a document it saw changed: nothing applied
    print(r.inserted, r.transformed)  # 1 1
"""

from ._client import Client, Result
from ._errors import CODES, ERRORS, IdemError, error_for
from ._errors import *  # noqa: F401,F403  (the per-code classes)
from ._session import Session, SessionInfo, StagedBatch

__all__ = (["Client", "Result", "Session", "SessionInfo", "StagedBatch", "IdemError", "ERRORS", "CODES", "error_for"]
           + [c.__name__ for c in ERRORS.values()])
