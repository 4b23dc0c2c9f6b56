"""The client: keyed batches and sessions with the retries the API's answers ask for."""

from __future__ import annotations

import email.utils
import json
import math
import random
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from ._errors import IdemError, error_for

if TYPE_CHECKING:
    from ._session import Session

DEFAULT_MAX_RETRIES = 2          # Stripe's: a call is tried at most three times
BACKOFF_BASE = 0.5               # retry n waits BACKOFF_BASE·(1+n²) s …
BACKOFF_MAX = 5.0                # … at most this, jittered by ±25 %
ANSWER_BYTES_MAX = 8 << 20       # an envelope or a document


@dataclass(frozen=True)
class Result:
    """A committed batch."""
    inserted: int
    deleted: int
    transformed: int
    replayed: bool            # the stored answer of an earlier execution
    transaction_id: str       # the transaction the key is bound to
    key: str                  # the Idempotency-Key used (made by the client if not given)


class Client:
    """A client of one idemd at base_url (http://host:port).

    token: the bearer token (None: none). timeout: seconds per attempt.
    max_retries: retries per call (negative: none). backoff: replaces the
    wait before retry n (from 1); the server's Retry-After wins when longer.
    conflict_retries: opt-in (0, the default: off — the key's first answer
    stands): after a transaction_conflict abort (retry_with new_key: nothing
    applied), send the batch again under a new key, at most this many times;
    and let run_session begin a new session after a commit that answers
    retry new_session. Each retry is a new request; Result.key names the one
    that committed.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0,
                 max_retries: int = DEFAULT_MAX_RETRIES, backoff: Optional[Callable[[int], float]] = None,
                 conflict_retries: int = 0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self._backoff = backoff
        self.conflict_retries = conflict_retries

    def create_table(self, table: str, shards: int = 0) -> bool:
        """Create table; False if it existed already."""
        body = {"shards": shards} if shards > 0 else {}
        status, _, _ = self._call("PUT", f"/v1/tables/{_seg(table)}", body, {})
        return status == 201

    def batch(self, table: str, batch: Dict[str, Any], key: Optional[str] = None,
              wait: Optional[float] = None, first_sent: Optional[float] = None) -> Result:
        """Send batch to table as one keyed, exactly-once call.

        key: the Idempotency-Key (None: a new one for this call, kept across
        its retries). wait: ask the server to wait up to this many seconds
        for a receipt in progress (Prefer: wait). first_sent: when this key
        was first sent, a Unix time (None: this call's first attempt), sent
        on every attempt as Repeatability-First-Sent; pass the first call's
        time when retrying a key across calls, so that a server restored
        from a backup refuses a key that may have executed before the
        restore (KeyMayHaveExecuted) instead of executing it again. Raises
        an IdemError subclass for a problem.
        """
        n = 0
        first = first_sent if first_sent is not None else time.time()
        while True:
            key = key or secrets.token_hex(16)
            # An HTTP-date, fixed before the first attempt: identical on every retry.
            headers = {"Idempotency-Key": key,
                       "Repeatability-First-Sent": email.utils.formatdate(first, usegmt=True)}
            if wait:
                headers["Prefer"] = f"wait={math.ceil(wait)}"
            try:
                _, hdrs, out = self._call("POST", f"/v1/tables/{_seg(table)}/batch", batch, headers)
                return _result(hdrs, out, key)
            except IdemError as e:
                if not e.conflict_aborted or n >= self.conflict_retries:
                    raise
            n += 1
            time.sleep(self.backoff(n))
            key, first = None, time.time()  # the opted-in retry: a new request, a new key

    def run_session(self, fn: Callable[["Session"], None], ttl: Optional[float] = None,
                    key: Optional[str] = None, wait: Optional[float] = None) -> Result:
        """Run fn in a new session and commit what it staged.

        If fn raises, the session is aborted and the exception propagates. A
        commit that answers retry new_session (aborted: a document it saw
        changed) can be tried again only in a new session: with
        conflict_retries (opt-in) run_session begins one and runs fn again, at
        most that many times — fn must stage from what it reads in the session
        it is given. Retries commit under the new session's ID.
        """
        n = 0
        while True:
            s = self.begin_session(ttl)
            with s:
                fn(s)
                try:
                    return s.commit(key if n == 0 else None, wait)
                except IdemError as e:
                    if not e.new_session_needed or n >= self.conflict_retries:
                        raise
            n += 1
            time.sleep(self.backoff(n))

    def doc(self, table: str, doc_id: str) -> Any:
        """Document doc_id of table, as stored."""
        _, _, out = self._call("GET", f"/v1/tables/{_seg(table)}/docs/{_seg(doc_id)}", None, {})
        return out.get("doc")

    def begin_session(self, ttl: Optional[float] = None, table: Optional[str] = None) -> "Session":
        """Begin an interactive session (see Session).

        ttl: how long it lives unless it ends first, in seconds (rounded up;
        None: the server's default, 30 s). table: the session's first table;
        on a deployment of several store shards the session lives on its
        shard and may use only that shard's tables (others:
        SessionCrossShardError); no effect with one store. Retried as an
        idempotent call: a retry after a lost answer may leave a session
        unused, which its TTL ends.
        """
        from ._session import Session  # it builds on this module
        body = {"ttl_seconds": math.ceil(ttl)} if ttl else {}
        if table:
            body["table"] = table
        _, _, out = self._call("POST", "/v1/sessions", body, {})
        return Session(self, out["session_id"])

    def session(self, session_id: str) -> "Session":
        """A handle on session session_id, begun earlier by this process or
        another (a commit through it learns a commit's outcome after a
        crash). Sends nothing."""
        from ._session import Session
        return Session(self, session_id)

    def _call(self, method: str, path: str, body: Optional[dict], headers: Dict[str, str],
              unapplied_only: bool = False) -> Tuple[int, Dict[str, str], dict]:
        """Send until an answer is final or the retries are spent.

        unapplied_only: the call must not run twice and has no key (a
        session's stage step): only an answer that it did not run (429
        overloaded) is retried, never a transport error or another problem,
        after which whether it ran may be unknown.
        """
        data = None if body is None else json.dumps(body).encode()
        n = 0
        while True:
            wait = 0.0
            try:
                return self._send(method, path, data, headers)
            except IdemError as e:
                if unapplied_only:
                    if e.code != "overloaded":
                        raise
                # A keyed answer says how to retry; an unkeyed one only whether to.
                elif e.retry_with != "same_key" and (e.retry_with or not e.retryable):
                    raise
                err: Exception = e
                wait = getattr(e, "_retry_after", 0.0)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                if unapplied_only:
                    raise  # the answer was lost: whether the call ran is unknown
                err = e  # a transport error: the same request again, so the same key
            if n >= self.max_retries:
                raise err
            n += 1
            time.sleep(max(wait, self.backoff(n)))

    def backoff(self, n: int) -> float:
        if self._backoff is not None:
            return self._backoff(n)
        return min(BACKOFF_BASE * (1 + n * n), BACKOFF_MAX) * (0.75 + 0.5 * random.random())

    def _send(self, method: str, path: str, data: Optional[bytes], headers: Dict[str, str]) -> Tuple[int, Dict[str, str], dict]:
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in headers.items():
            req.add_header(k, v)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read(ANSWER_BYTES_MAX)
                return resp.status, dict(resp.headers.items()), json.loads(raw or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read(ANSWER_BYTES_MAX)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"code": "internal", "detail": f"not a problem answer: {raw[:200]!r}"}
            err = error_for(e.code, body)
            try:
                err._retry_after = float(e.headers.get("Retry-After") or 0)  # type: ignore[attr-defined]
            except ValueError:
                err._retry_after = 0.0  # type: ignore[attr-defined]
            raise err from None


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _result(hdrs: Dict[str, str], out: dict, key: str) -> Result:
    """The Result of a keyed call's committed answer."""
    return Result(int(out.get("inserted", 0)), int(out.get("deleted", 0)), int(out.get("transformed", 0)),
                  hdrs.get("Idempotent-Replayed") == "true", hdrs.get("Idem-Transaction-Id", ""), key)

