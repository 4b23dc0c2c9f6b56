"""Exactly-once batch writes against an Idem server (idemd).

    from idem import Client, IdempotencyKeyMismatchError
    c = Client("http://127.0.0.1:8420")
    c.create_table("orders")
    r = c.batch("orders", {"inserts": [{"id": "o-1", "doc": {"total": 12}}]}, key="order-1")

A call without a key gets one of its own, kept across its retries; retries
(2 by default, jittered 0.5 s·(1+n²) up to 5 s, or Retry-After) happen on
transport errors and every retry_with: same_key answer. Every problem is an
IdemError subclass, one per code.
"""

from ._client import Client, Result
from ._errors import CODES, ERRORS, IdemError, error_for
from ._errors import *  # noqa: F401,F403  (the per-code classes)

__all__ = ["Client", "Result", "IdemError", "ERRORS", "CODES", "error_for"] + [c.__name__ for c in ERRORS.values()]
