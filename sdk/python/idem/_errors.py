"""One exception class per problem code of the API.

The table below is the API's own (api/openapi.yaml, schema ErrorCode);
tests/test_spec.py fails when the two differ, so that a spec change without
an SDK change cannot land.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

# code: (status, retryable, retry_with)
CODES: Dict[str, tuple] = {
    "invalid_request": (400, False, "none"),
    "invalid_idempotency_key": (400, False, "none"),
    "unauthenticated": (401, False, "none"),
    "forbidden": (403, False, "none"),
    "table_not_found": (404, False, "new_key"),
    "document_not_found": (404, False, "new_key"),
    "receipt_not_found": (404, False, "none"),
    "not_found": (404, False, "none"),
    "method_not_allowed": (405, False, "none"),
    "transaction_conflict": (409, True, "new_key"),
    "transaction_aborted": (409, True, "new_key"),
    "idempotency_request_in_progress": (409, True, "same_key"),
    "payload_too_large": (413, False, "none"),
    "unsupported_media_type": (415, False, "none"),
    "idempotency_key_mismatch": (422, False, "none"),
    "idempotency_key_expired": (409, False, "new_key"),
    "first_sent_too_old": (412, False, "new_key"),
    "header_fields_too_large": (431, False, "none"),
    "request_timeout": (408, True, "same_key"),
    "overloaded": (429, True, "same_key"),
    "internal": (500, True, "same_key"),
    "not_implemented": (501, False, "none"),
    "unavailable": (503, True, "same_key"),
    "idempotency_receipt_pending": (503, True, "same_key"),
    "session_not_found": (404, False, "none"),
    "session_aborted": (409, False, "none"),
    "session_committed": (409, False, "none"),
    "table_settings_conflict": (409, False, "none"),
    "store_full": (503, True, "same_key"),
    "key_may_have_executed": (409, False, "none"),
    "session_cross_shard": (409, False, "none"),
}


class IdemError(Exception):
    """A problem the server answered (application/problem+json)."""

    code: str = ""

    def __init__(self, status: int, code: str, detail: str, retryable: bool, retry_with: str,
                 transaction_id: Optional[str], outcome: Optional[str], retry: Optional[str] = None):
        super().__init__(f"idem: {status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.retryable = retryable
        self.retry_with = retry_with  # "same_key", "new_key", "none", or "" on an unkeyed answer
        self.transaction_id = transaction_id
        self.outcome = outcome  # committed, aborted, not_applied, pending, or None
        # What must be made anew to try again, beyond the key: "new_session" on
        # a session commit that aborted or was not applied (retry_with is then
        # "none": a session has one commit); None otherwise.
        self.retry = retry

    @property
    def new_session_needed(self) -> bool:
        """Only a new session can try again; Client.run_session acts on it when opted in."""
        return self.retry == "new_session"

    @property
    def conflict_aborted(self) -> bool:
        """A batch's proven abort for a conflict (nothing applied), which a new key may try again."""
        return self.code == "transaction_conflict" and self.outcome == "aborted" and self.retry_with == "new_key"


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_")) + "Error"


# ERRORS maps each code to its class: TableNotFoundError,
# IdempotencyKeyMismatchError, … (all subclasses of IdemError).
ERRORS: Dict[str, Type[IdemError]] = {}
for _code, (_status, _retryable, _retry_with) in CODES.items():
    ERRORS[_code] = type(_class_name(_code), (IdemError,), {
        "code": _code, "STATUS": _status, "RETRYABLE": _retryable, "RETRY_WITH": _retry_with,
        "__doc__": f"The {_code} problem ({_status}).",
    })
    globals()[_class_name(_code)] = ERRORS[_code]


def error_for(status: int, body: dict) -> IdemError:
    """The exception of a problem answer."""
    code = str(body.get("code") or "internal")
    cls = ERRORS.get(code, IdemError)
    return cls(status, code, str(body.get("detail", "")), bool(body.get("retryable", False)),
               str(body.get("retry_with", "")), body.get("transaction_id"), body.get("outcome"), body.get("retry"))
