import { type Client as FetchClient } from "openapi-fetch";
import type { components, paths } from "./schema.js";
export * from "./errors.js";
export type { paths, components } from "./schema.js";
export declare const DEFAULT_MAX_RETRIES = 2;
export interface ClientOptions {
    /** Bearer token; none when undefined (a server without tokens). */
    token?: string;
    /** Retries per call (negative: none). */
    maxRetries?: number;
    /** Replaces the wait before retry n (from 1), in ms; Retry-After still wins when longer. */
    backoff?: (n: number) => number;
    /** The fetch to use (default: the global one). */
    fetch?: typeof fetch;
    /**
     * Opt-in (0, the default: off — the key's first answer stands): after a
     * transaction_conflict abort (retry_with new_key: nothing applied), send
     * the batch again under a new key, at most this many times; and let
     * runSession begin a new session after a commit that answers retry
     * new_session. Each retry is a new request; Result.key names the one that
     * committed.
     */
    conflictRetries?: number;
}
/** A batch of one table, as the spec's Batch. */
export type Batch = components["schemas"]["Batch"];
export interface BatchOptions {
    /** The Idempotency-Key; a new one for this call when undefined. */
    key?: string;
    /** Ask the server to wait up to this many seconds for a receipt in progress (Prefer: wait). */
    waitSeconds?: number;
    /**
     * When this key was first sent, sent on every attempt as
     * Repeatability-First-Sent (default: this call's first attempt). Pass the
     * first call's time when retrying a key across calls: a server restored
     * from a backup then refuses a key that may have executed before the
     * restore (key_may_have_executed) instead of executing it again.
     */
    firstSent?: Date;
    signal?: AbortSignal;
}
export interface Result {
    inserted: number;
    deleted: number;
    transformed: number;
    /** The stored answer of an earlier execution. */
    replayed: boolean;
    /** The transaction the key is bound to. */
    transactionId: string;
    /** The Idempotency-Key used (made by the client if not given). */
    key: string;
}
export interface SessionOptions {
    /** How long the session lives unless it ends first, in seconds (rounded up; the server's default, 30, when undefined). */
    ttlSeconds?: number;
    /**
     * The session's first table: on a deployment of several store shards the
     * session lives on that table's shard, and a step on another shard's
     * table is refused (session_cross_shard). One shard: no effect.
     */
    table?: string;
    signal?: AbortSignal;
}
/** A commit's options: as a batch's; without a key, the session ID is the commit's key. */
export type CommitOptions = BatchOptions;
export type SessionState = components["schemas"]["Session"]["state"];
/** A session as the server reports it. */
export interface SessionInfo {
    sessionId: string;
    /** open, committed (its commit was requested; the commit is a receipt) or aborted. */
    state: SessionState;
    /** Why an aborted session ended: aborted, expired or owner_lost. */
    reason?: components["schemas"]["Session"]["reason"];
    createdAt: Date;
    /** An open session is aborted after it. */
    expiresAt: Date;
    /** Steps staged. */
    stages: number;
    /** Documents the open session read or wrote. */
    documents: number;
    /** Documents the open session wrote. */
    writes: number;
    /** What its staged batches did, summed. */
    result: components["schemas"]["BatchResult"];
    /** Committed (its commit was asked for): its commit's Idempotency-Key and transaction. */
    commitKey?: string;
    transactionId?: string;
    /** How the commit ended: committed, aborted, not_applied or pending; commitCode why, when it did not commit. */
    commitOutcome?: string;
    commitCode?: string;
    /** An ended session is kept until then. */
    retainedUntil?: Date;
    /** A stage answer only: what each table's batch of the step did, in the order of the tables' names. */
    staged?: components["schemas"]["StagedBatch"][];
}
type Answer = {
    status: number;
    headers: Headers;
    text: string;
};
type Send = () => Promise<{
    data?: unknown;
    error?: unknown;
    response: Response;
}>;
type Retry = (signal: AbortSignal | undefined, send: Send, unappliedOnly?: boolean) => Promise<Answer>;
export declare class Client {
    private readonly opts;
    private readonly api;
    private readonly maxRetries;
    constructor(baseUrl: string, opts?: ClientOptions);
    /** Create table (shards 0: the server's default); false if it existed already. */
    createTable(table: string, shards?: number, signal?: AbortSignal): Promise<boolean>;
    /** Send batch to table as one keyed, exactly-once call. Rejects with an IdemError for a problem. */
    batch(table: string, batch: paths["/v1/tables/{table}/batch"]["post"]["requestBody"]["content"]["application/json"], o?: BatchOptions): Promise<Result>;
    /**
     * Run fn in a new session and commit what it staged. If fn throws, the
     * session is aborted and the error rethrown. A commit that answers retry
     * new_session (aborted: a document it saw changed) can be tried again only
     * in a new session: with conflictRetries (opt-in) runSession begins one and
     * runs fn again, at most that many times — fn must stage from what it reads
     * in the session it is given. Retries commit under the new session's ID.
     */
    runSession(fn: (s: Session) => Promise<void>, o?: SessionOptions & {
        commit?: CommitOptions;
    }): Promise<Result>;
    private batchOnce;
    /** Document id of table, as stored. */
    doc(table: string, id: string, signal?: AbortSignal): Promise<unknown>;
    /**
     * Begin an interactive session (see Session). Retried as an idempotent
     * call: a retry after a lost answer may leave a session unused, which its
     * TTL ends.
     */
    beginSession(o?: SessionOptions): Promise<Session>;
    /**
     * A handle on session id, begun earlier by this process or another (a
     * commit through it learns a commit's outcome after a crash). Sends nothing.
     */
    session(id: string): Session;
    backoff(n: number): number;
    private retry;
}
/**
 * An interactive session: batches staged on one or more tables, read back
 * by the session alone, then applied all at once and exactly once by
 * commit() — or not at all (abort(), or its TTL).
 */
export declare class Session {
    readonly id: string;
    private readonly api;
    private readonly retry;
    /** @internal Client.beginSession and Client.session make sessions. */
    constructor(id: string, api: FetchClient<paths>, retry: Retry);
    /**
     * Stage batch on table as one step: computed at once on the session's
     * view (its own writes over the committed state), visible to nobody else
     * before the commit. A refused batch leaves the session as it was.
     *
     * A step is not idempotent and has no key: it is retried only on 429
     * overloaded (not run). After a transport error or a 5xx whether it was
     * taken is unknown: info().stages says.
     */
    stage(table: string, batch: Batch, signal?: AbortSignal): Promise<SessionInfo>;
    /** Stage several tables' batches as one step, all or none, in the order of the tables' names; as stage(). */
    stageTables(batches: Record<string, Batch>, signal?: AbortSignal): Promise<SessionInfo>;
    private step;
    /**
     * Document id of table as the session sees it: its own write if it made
     * one, else the committed document — whose version the session records,
     * so that its commit is a TransactionConflictError if the document
     * changes meanwhile.
     */
    get(table: string, id: string, signal?: AbortSignal): Promise<unknown>;
    /** The session as stored. */
    info(signal?: AbortSignal): Promise<SessionInfo>;
    /**
     * Apply everything the session staged, exactly once, conditioned on every
     * document version it saw. A keyed call, retried as Client.batch is, under
     * o.key (none sent when undefined: the session ID is the key); a session
     * has one commit, which a retry under any key replays. Rejects with
     * TransactionConflictError (aborted: a document it saw changed),
     * SessionAbortedError (it ended before its commit was asked), …
     */
    commit(o?: CommitOptions): Promise<Result>;
    /**
     * End the session without a commit: nothing it staged applies. Aborting an
     * aborted session answers it as it is; a committed one rejects with
     * SessionCommittedError.
     */
    abort(signal?: AbortSignal): Promise<SessionInfo>;
}
