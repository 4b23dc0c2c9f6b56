import type { components } from "./schema.js";
export type ErrorCode = components["schemas"]["ErrorCode"];
export type RetryWith = "same_key" | "new_key" | "none";
export declare const CODES: Record<ErrorCode, {
    status: number;
    retryable: boolean;
    retryWith: RetryWith;
}>;
/** A problem the server answered (application/problem+json). */
export declare class IdemError extends Error {
    readonly status: number;
    readonly code: ErrorCode;
    readonly detail: string;
    readonly retryable: boolean;
    /** "same_key", "new_key", "none", or undefined on an unkeyed answer. */
    readonly retryWith: RetryWith | undefined;
    readonly transactionId: string | undefined;
    /** committed, aborted, not_applied, pending, or undefined. */
    readonly outcome: string | undefined;
    /** The answer's Retry-After, in seconds (0 if none). */
    readonly retryAfter: number;
    /**
     * What must be made anew to try again, beyond the key: "new_session" on a
     * session commit that aborted or was not applied (retryWith is then
     * "none": a session has one commit); undefined otherwise.
     */
    readonly retry?: string | undefined;
    constructor(status: number, code: ErrorCode, detail: string, retryable: boolean, 
    /** "same_key", "new_key", "none", or undefined on an unkeyed answer. */
    retryWith: RetryWith | undefined, transactionId: string | undefined, 
    /** committed, aborted, not_applied, pending, or undefined. */
    outcome: string | undefined, 
    /** The answer's Retry-After, in seconds (0 if none). */
    retryAfter: number, 
    /**
     * What must be made anew to try again, beyond the key: "new_session" on a
     * session commit that aborted or was not applied (retryWith is then
     * "none": a session has one commit); undefined otherwise.
     */
    retry?: string | undefined);
    /** Only a new session can try again (retry "new_session"); Client.runSession acts on it when opted in. */
    get newSessionNeeded(): boolean;
    /** A batch's proven abort for a conflict, which a new key may try again (nothing applied). */
    get conflictAborted(): boolean;
}
type ErrorClass = new (...a: ConstructorParameters<typeof IdemError>) => IdemError;
/** ERRORS maps each code to its class: ERRORS.table_not_found, … (all IdemError). */
export declare const ERRORS: Record<ErrorCode, ErrorClass>;
export declare const TableNotFoundError: ErrorClass;
export declare const DocumentNotFoundError: ErrorClass;
export declare const IdempotencyKeyMismatchError: ErrorClass;
export declare const IdempotencyKeyExpiredError: ErrorClass;
export declare const IdempotencyRequestInProgressError: ErrorClass;
export declare const IdempotencyReceiptPendingError: ErrorClass;
export declare const TransactionConflictError: ErrorClass;
export declare const UnavailableError: ErrorClass;
export declare const SessionNotFoundError: ErrorClass;
export declare const SessionAbortedError: ErrorClass;
export declare const SessionCommittedError: ErrorClass;
export declare const TableSettingsConflictError: ErrorClass;
export declare const RequestTimeoutError: ErrorClass;
export declare const StoreFullError: ErrorClass;
export declare const KeyMayHaveExecutedError: ErrorClass;
export declare const SessionCrossShardError: ErrorClass;
/** The error of a problem answer. */
export declare function errorFor(status: number, body: any, retryAfter: number): IdemError;
export {};
