"""Interactive sessions: staged batches, read back by the session alone, committed exactly once."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ._client import Result, _result, _seg
from ._errors import IdemError

if TYPE_CHECKING:
    from ._client import Client


@dataclass(frozen=True)
class StagedBatch:
    """What one table's batch of a stage step did."""
    table: str
    inserted: int
    deleted: int
    transformed: int


@dataclass(frozen=True)
class SessionInfo:
    """A session as the server reports it."""
    session_id: str
    state: str                          # open, committed (its commit was requested) or aborted
    reason: Optional[str]               # aborted: aborted, expired or owner_lost
    created_at: datetime
    expires_at: datetime                # an open session is aborted after it
    stages: int                         # steps staged
    documents: int                      # documents the open session read or wrote
    writes: int                         # documents the open session wrote
    result: Dict[str, int]              # what its staged batches did: inserted, deleted, transformed
    commit_key: Optional[str]           # committed: its commit's Idempotency-Key …
    transaction_id: Optional[str]       # … and transaction
    retained_until: Optional[datetime]  # ended: kept until then
    staged: Tuple[StagedBatch, ...] = ()  # a stage answer only: each table's batch, by table name
    commit_outcome: Optional[str] = None  # committed: how its commit ended (committed, aborted, not_applied, pending)
    commit_code: Optional[str] = None     # … and why, when it did not commit


class Session:
    """An interactive session: batches staged on one or more tables, read
    back by the session alone, then applied all at once and exactly once by
    commit() — or not at all (abort(), or its TTL).

    As a context manager it aborts the session when the block is left
    without a commit (an abort never undoes a commit already asked for).
    """

    def __init__(self, client: "Client", session_id: str):
        self._client = client
        self.id = session_id
        self._committed = False

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._committed:
            try:
                self.abort()
            except (IdemError, OSError):
                pass  # best effort: never hide what left the block; the TTL ends it anyway

    def stage(self, table: str, batch: Dict[str, Any]) -> SessionInfo:
        """Stage batch on table as one step: computed at once on the
        session's view (its own writes over the committed state), visible to
        nobody else before the commit. A refused batch leaves the session as
        it was.

        A step is not idempotent and has no key: it is retried only on 429
        overloaded (not run). After a transport error or a 5xx whether it
        was taken is unknown: info().stages says.
        """
        return self._stage({**batch, "table": table})

    def stage_tables(self, batches: Dict[str, Dict[str, Any]]) -> SessionInfo:
        """Stage several tables' batches ({table: batch}) as one step, all or
        none, in the order of the tables' names; as stage()."""
        return self._stage({"tables": batches})

    def _stage(self, body: Dict[str, Any]) -> SessionInfo:
        _, _, out = self._client._call("POST", f"/v1/sessions/{_seg(self.id)}/batch", body, {}, unapplied_only=True)
        return _info(out)

    def get(self, table: str, doc_id: str) -> Any:
        """Document doc_id of table as the session sees it: its own write if
        it made one, else the committed document — whose version the session
        records, so that its commit is a TransactionConflictError if the
        document changes meanwhile."""
        _, _, out = self._client._call(
            "GET", f"/v1/sessions/{_seg(self.id)}/tables/{_seg(table)}/docs/{_seg(doc_id)}", None, {})
        return out.get("doc")

    def info(self) -> SessionInfo:
        """The session as stored."""
        _, _, out = self._client._call("GET", f"/v1/sessions/{_seg(self.id)}", None, {})
        return _info(out)

    def commit(self, key: Optional[str] = None, wait: Optional[float] = None) -> Result:
        """Apply everything the session staged, exactly once, conditioned on
        every document version it saw.

        A keyed call, retried as Client.batch is, under key (None: none is
        sent, and the session ID is the key); a session has one commit, which
        a retry under any key replays. wait: as Client.batch's. Raises
        TransactionConflictError (aborted: a document it saw changed),
        SessionAbortedError (it ended before its commit was asked), …
        """
        headers = {}
        if key:
            headers["Idempotency-Key"] = key
        if wait:
            headers["Prefer"] = f"wait={math.ceil(wait)}"
        _, hdrs, out = self._client._call("POST", f"/v1/sessions/{_seg(self.id)}/commit", {}, headers)
        self._committed = True
        return _result(hdrs, out, key or self.id)

    def abort(self) -> SessionInfo:
        """End the session without a commit: nothing it staged applies.
        Aborting an aborted session answers it as it is; a committed one
        raises SessionCommittedError."""
        _, _, out = self._client._call("DELETE", f"/v1/sessions/{_seg(self.id)}", None, {})
        return _info(out)


def _info(out: dict) -> SessionInfo:
    commit = out.get("commit") or {}
    return SessionInfo(
        session_id=out["session_id"], state=out["state"], reason=out.get("reason"),
        created_at=_time(out["created_at"]), expires_at=_time(out["expires_at"]),
        stages=int(out.get("stages", 0)), documents=int(out.get("documents", 0)), writes=int(out.get("writes", 0)),
        result={k: int((out.get("result") or {}).get(k, 0)) for k in ("inserted", "deleted", "transformed")},
        commit_key=commit.get("idempotency_key"), transaction_id=commit.get("transaction_id"),
        retained_until=_time(out["retained_until"]) if out.get("retained_until") else None,
        staged=tuple(StagedBatch(str(b["table"]), int(b.get("inserted", 0)), int(b.get("deleted", 0)),
                                 int(b.get("transformed", 0))) for b in out.get("staged") or ()),
        commit_outcome=commit.get("outcome"), commit_code=commit.get("code"))


_RFC3339 = re.compile(r"^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def _time(s: str) -> datetime:
    """An RFC 3339 time as the server writes it (fromisoformat before 3.11
    takes neither Z nor every fraction)."""
    m = _RFC3339.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    frac = "." + m.group(2)[:6].ljust(6, "0") if m.group(2) else ""
    return datetime.fromisoformat(m.group(1) + frac + ("+00:00" if m.group(3) == "Z" else m.group(3)))
