export const CODES = {
    invalid_request: { status: 400, retryable: false, retryWith: "none" },
    invalid_idempotency_key: { status: 400, retryable: false, retryWith: "none" },
    unauthenticated: { status: 401, retryable: false, retryWith: "none" },
    forbidden: { status: 403, retryable: false, retryWith: "none" },
    table_not_found: { status: 404, retryable: false, retryWith: "new_key" },
    document_not_found: { status: 404, retryable: false, retryWith: "new_key" },
    receipt_not_found: { status: 404, retryable: false, retryWith: "none" },
    not_found: { status: 404, retryable: false, retryWith: "none" },
    method_not_allowed: { status: 405, retryable: false, retryWith: "none" },
    transaction_conflict: { status: 409, retryable: true, retryWith: "new_key" },
    transaction_aborted: { status: 409, retryable: true, retryWith: "new_key" },
    idempotency_request_in_progress: { status: 409, retryable: true, retryWith: "same_key" },
    payload_too_large: { status: 413, retryable: false, retryWith: "none" },
    unsupported_media_type: { status: 415, retryable: false, retryWith: "none" },
    idempotency_key_mismatch: { status: 422, retryable: false, retryWith: "none" },
    idempotency_key_expired: { status: 409, retryable: false, retryWith: "new_key" },
    first_sent_too_old: { status: 412, retryable: false, retryWith: "new_key" },
    header_fields_too_large: { status: 431, retryable: false, retryWith: "none" },
    request_timeout: { status: 408, retryable: true, retryWith: "same_key" },
    not_implemented: { status: 501, retryable: false, retryWith: "none" },
    overloaded: { status: 429, retryable: true, retryWith: "same_key" },
    internal: { status: 500, retryable: true, retryWith: "same_key" },
    unavailable: { status: 503, retryable: true, retryWith: "same_key" },
    idempotency_receipt_pending: { status: 503, retryable: true, retryWith: "same_key" },
    session_not_found: { status: 404, retryable: false, retryWith: "none" },
    session_aborted: { status: 409, retryable: false, retryWith: "none" },
    session_committed: { status: 409, retryable: false, retryWith: "none" },
    table_settings_conflict: { status: 409, retryable: false, retryWith: "none" },
    store_full: { status: 503, retryable: true, retryWith: "same_key" },
    key_may_have_executed: { status: 409, retryable: false, retryWith: "none" },
    session_cross_shard: { status: 409, retryable: false, retryWith: "none" },
};
/** A problem the server answered (application/problem+json). */
export class IdemError extends Error {
    status;
    code;
    detail;
    retryable;
    retryWith;
    transactionId;
    outcome;
    retryAfter;
    retry;
    constructor(status, code, detail, retryable, 
    /** "same_key", "new_key", "none", or undefined on an unkeyed answer. */
    retryWith, transactionId, 
    /** committed, aborted, not_applied, pending, or undefined. */
    outcome, 
    /** The answer's Retry-After, in seconds (0 if none). */
    retryAfter, 
    /**
     * What must be made anew to try again, beyond the key: "new_session" on a
     * session commit that aborted or was not applied (retryWith is then
     * "none": a session has one commit); undefined otherwise.
     */
    retry) {
        super(`idem: ${status} ${code}: ${detail}`);
        this.status = status;
        this.code = code;
        this.detail = detail;
        this.retryable = retryable;
        this.retryWith = retryWith;
        this.transactionId = transactionId;
        this.outcome = outcome;
        this.retryAfter = retryAfter;
        this.retry = retry;
        this.name = new.target.name;
    }
    /** Only a new session can try again (retry "new_session"); Client.runSession acts on it when opted in. */
    get newSessionNeeded() {
        return this.retry === "new_session";
    }
    /** A batch's proven abort for a conflict, which a new key may try again (nothing applied). */
    get conflictAborted() {
        return this.code === "transaction_conflict" && this.outcome === "aborted" && this.retryWith === "new_key";
    }
}
function classFor(code) {
    const name = code.split("_").map((p) => p[0].toUpperCase() + p.slice(1)).join("") + "Error";
    return { [name]: class extends IdemError {
        } }[name];
}
/** ERRORS maps each code to its class: ERRORS.table_not_found, … (all IdemError). */
export const ERRORS = Object.fromEntries(Object.keys(CODES).map((c) => [c, classFor(c)]));
export const TableNotFoundError = ERRORS.table_not_found;
export const DocumentNotFoundError = ERRORS.document_not_found;
export const IdempotencyKeyMismatchError = ERRORS.idempotency_key_mismatch;
export const IdempotencyKeyExpiredError = ERRORS.idempotency_key_expired;
export const IdempotencyRequestInProgressError = ERRORS.idempotency_request_in_progress;
export const IdempotencyReceiptPendingError = ERRORS.idempotency_receipt_pending;
export const TransactionConflictError = ERRORS.transaction_conflict;
export const UnavailableError = ERRORS.unavailable;
export const SessionNotFoundError = ERRORS.session_not_found;
export const SessionAbortedError = ERRORS.session_aborted;
export const SessionCommittedError = ERRORS.session_committed;
export const TableSettingsConflictError = ERRORS.table_settings_conflict;
export const RequestTimeoutError = ERRORS.request_timeout;
export const StoreFullError = ERRORS.store_full;
export const KeyMayHaveExecutedError = ERRORS.key_may_have_executed;
export const SessionCrossShardError = ERRORS.session_cross_shard;
/** The error of a problem answer. */
export function errorFor(status, body, retryAfter) {
    const code = body && typeof body.code === "string" && body.code in CODES ? body.code : "internal";
    return new ERRORS[code](status, code, String(body?.detail ?? ""), Boolean(body?.retryable), body?.retry_with, body?.transaction_id, body?.outcome, retryAfter, body?.retry);
}
