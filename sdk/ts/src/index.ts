// The TypeScript client of an Idem server (idemd): exactly-once batch
// writes, with the ergonomics of the SDKs users know, over a client
// generated from api/openapi.yaml (schema.ts, by openapi-typescript; the
// calls go through openapi-fetch).
//
// - A keyed call gets an Idempotency-Key of its own when the caller gives
//   none, and keeps it across its retries, each with the same
//   Repeatability-First-Sent (the first attempt's time, or firstSent): a
//   server restored from a backup refuses, rather than runs again, a key
//   that may have executed before the restore (KeyMayHaveExecutedError).
// - Retries are bounded (maxRetries, 2 by default), jittered 0.5 s·(1+n²)
//   up to 5 s, or the server's Retry-After when longer, on transport errors
//   and every retry_with: same_key answer.
// - A transaction_conflict abort (retry_with new_key) is thrown as it is:
//   the key's first answer stands. conflictRetries opts in to sending the
//   batch again under a new key. A session commit that aborted answers
//   retry_with none and retry "new_session" (IdemError.newSessionNeeded);
//   Client.runSession runs a function in a session and commits it, and with
//   conflictRetries runs it again in a new session after such an answer.
// - Every problem is an IdemError, one class per code (ERRORS).
// - Cancellation is an AbortSignal; a timeout is AbortSignal.timeout(ms).
// - An interactive session (Client.beginSession) stages batches on one or
//   more tables, reads its own writes, and commits them all at once,
//   exactly once — or aborts. Its commit is a keyed call, retried as a
//   batch (the session ID is its key unless `key` names one); get, info and
//   abort are retried as idempotent calls; stage, which is not idempotent,
//   only on 429 overloaded (not run). With tables orders and stock:
//
//     const s = await c.beginSession({ ttlSeconds: 60 });
//     await s.stageTables({
//       orders: { inserts: [{ id: "o-2", doc: { total: 5 } }] },
//       stock: { transforms: [{ id: "w", ops: [{ op: "$inc", path: "n", value: -1 }], upsert: true }] },
//     });
//     console.log(await s.get("orders", "o-2")); // { total: 5 }: its own write, seen by nobody else yet
//     const r = await s.commit(); // TransactionConflictError if a document it saw changed: nothing applied
//     console.log(r.inserted, r.transformed); // 1 1
import createClient, { type Client as FetchClient } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { errorFor, IdemError } from "./errors.js";

export * from "./errors.js";
export type { paths, components } from "./schema.js";

export const DEFAULT_MAX_RETRIES = 2; // Stripe's: a call is tried at most three times
const BACKOFF_BASE_MS = 500; // retry n waits BACKOFF_BASE_MS·(1+n²) …
const BACKOFF_MAX_MS = 5000; // … at most this, jittered by ±25 %

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

type Answer = { status: number; headers: Headers; text: string };
type Send = () => Promise<{ data?: unknown; error?: unknown; response: Response }>;
type Retry = (signal: AbortSignal | undefined, send: Send, unappliedOnly?: boolean) => Promise<Answer>;

export class Client {
  private readonly api: FetchClient<paths>;
  private readonly maxRetries: number;

  constructor(baseUrl: string, private readonly opts: ClientOptions = {}) {
    this.maxRetries = opts.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.api = createClient<paths>({
      baseUrl,
      fetch: opts.fetch,
      headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : undefined,
    });
  }

  /** Create table (shards 0: the server's default); false if it existed already. */
  async createTable(table: string, shards = 0, signal?: AbortSignal): Promise<boolean> {
    const res = await this.retry(signal, () =>
      this.api.PUT("/v1/tables/{table}", {
        params: { path: { table } },
        body: shards > 0 ? { shards } : {},
        signal,
        parseAs: "text",
      }),
    );
    return res.status === 201;
  }

  /** Send batch to table as one keyed, exactly-once call. Rejects with an IdemError for a problem. */
  async batch(table: string, batch: paths["/v1/tables/{table}/batch"]["post"]["requestBody"]["content"]["application/json"], o: BatchOptions = {}): Promise<Result> {
    for (let n = 0; ; n++) {
      try {
        // The opted-in retry after a conflict is a new request: a new key, first sent now.
        return await this.batchOnce(table, batch, n === 0 ? { ...o, firstSent: o.firstSent ?? new Date() } : { ...o, key: undefined, firstSent: new Date() });
      } catch (e) {
        if (!(e instanceof IdemError) || !e.conflictAborted || n >= (this.opts.conflictRetries ?? 0)) throw e;
        await sleep(this.backoff(n + 1), o.signal); // the opted-in retry: a new request, a new key
      }
    }
  }

  /**
   * Run fn in a new session and commit what it staged. If fn throws, the
   * session is aborted and the error rethrown. A commit that answers retry
   * new_session (aborted: a document it saw changed) can be tried again only
   * in a new session: with conflictRetries (opt-in) runSession begins one and
   * runs fn again, at most that many times — fn must stage from what it reads
   * in the session it is given. Retries commit under the new session's ID.
   */
  async runSession(fn: (s: Session) => Promise<void>, o: SessionOptions & { commit?: CommitOptions } = {}): Promise<Result> {
    for (let n = 0; ; n++) {
      const s = await this.beginSession(o);
      try {
        await fn(s);
      } catch (e) {
        await s.abort(o.signal).catch(() => undefined);
        throw e;
      }
      try {
        return await s.commit(n === 0 ? o.commit : { ...o.commit, key: undefined });
      } catch (e) {
        if (!(e instanceof IdemError) || !e.newSessionNeeded || n >= (this.opts.conflictRetries ?? 0)) throw e;
        await sleep(this.backoff(n + 1), o.signal);
      }
    }
  }

  private async batchOnce(table: string, batch: paths["/v1/tables/{table}/batch"]["post"]["requestBody"]["content"]["application/json"], o: BatchOptions): Promise<Result> {
    const key = o.key ?? crypto.randomUUID().replaceAll("-", "");
    // An HTTP-date, fixed before the first attempt: identical on every retry.
    const firstSent = (o.firstSent ?? new Date()).toUTCString();
    const header: Record<string, string> = { "Idempotency-Key": key, "Repeatability-First-Sent": firstSent };
    if (o.waitSeconds && o.waitSeconds > 0) header.Prefer = `wait=${Math.ceil(o.waitSeconds)}`;
    const res = await this.retry(o.signal, () =>
      this.api.POST("/v1/tables/{table}/batch", {
        params: { path: { table }, header: header as any },
        body: batch,
        signal: o.signal,
        parseAs: "text",
      }),
    );
    return resultOf(res, key);
  }

  /** Document id of table, as stored. */
  async doc(table: string, id: string, signal?: AbortSignal): Promise<unknown> {
    const res = await this.retry(signal, () =>
      this.api.GET("/v1/tables/{table}/docs/{id}", { params: { path: { table, id } }, signal, parseAs: "text" }),
    );
    return JSON.parse(res.text).doc;
  }

  /**
   * Begin an interactive session (see Session). Retried as an idempotent
   * call: a retry after a lost answer may leave a session unused, which its
   * TTL ends.
   */
  async beginSession(o: SessionOptions = {}): Promise<Session> {
    const body = {
      ...(o.ttlSeconds && o.ttlSeconds > 0 ? { ttl_seconds: Math.ceil(o.ttlSeconds) } : {}),
      ...(o.table !== undefined ? { table: o.table } : {}),
    };
    const res = await this.retry(o.signal, () =>
      this.api.POST("/v1/sessions", { body, signal: o.signal, parseAs: "text" }),
    );
    return this.session(infoOf(res.text).sessionId);
  }

  /**
   * A handle on session id, begun earlier by this process or another (a
   * commit through it learns a commit's outcome after a crash). Sends nothing.
   */
  session(id: string): Session {
    return new Session(id, this.api, (signal, send, unappliedOnly) => this.retry(signal, send, unappliedOnly));
  }

  backoff(n: number): number {
    if (this.opts.backoff) return this.opts.backoff(n);
    return Math.min(BACKOFF_BASE_MS * (1 + n * n), BACKOFF_MAX_MS) * (0.75 + 0.5 * Math.random());
  }

  // retry sends until an answer is final or the retries are spent: a 2xx is
  // returned; a problem rejects as its IdemError, retried when its
  // retry_with is same_key (an unkeyed answer: when retryable); a transport
  // error is retried too — the same request, so the same key. unappliedOnly:
  // the call must not run twice and has no key (a session's stage step), so
  // only an answer that it did not run (429 overloaded) is retried, never a
  // transport error or another problem, after which whether it ran may be
  // unknown.
  private async retry(signal: AbortSignal | undefined, send: Send, unappliedOnly = false): Promise<Answer> {
    for (let n = 0; ; n++) {
      let err: unknown;
      let wait = 0;
      try {
        const { data, error, response } = await send();
        if (response.ok) return { status: response.status, headers: response.headers, text: String(data ?? "") };
        let body: unknown = error; // openapi-fetch parses a JSON problem itself
        if (typeof error === "string") {
          try { body = JSON.parse(error); } catch { body = { code: "internal", detail: `not a problem answer: ${error.slice(0, 200)}` }; }
        }
        const e = errorFor(response.status, body, Number(response.headers.get("Retry-After") ?? 0) || 0);
        const retried = unappliedOnly ? e.code === "overloaded"
          : e.retryWith === "same_key" || (e.retryWith === undefined && e.retryable);
        if (!retried) throw e;
        err = e;
        wait = e.retryAfter * 1000;
      } catch (e) {
        if (e instanceof IdemError && err === undefined) throw e;
        if (signal?.aborted) throw e;
        if (unappliedOnly) throw e; // the answer was lost: whether the call ran is unknown
        err = err ?? e;
      }
      if (n >= this.maxRetries) throw err;
      await sleep(Math.max(wait, this.backoff(n + 1)), signal);
    }
  }
}

/**
 * An interactive session: batches staged on one or more tables, read back
 * by the session alone, then applied all at once and exactly once by
 * commit() — or not at all (abort(), or its TTL).
 */
export class Session {
  /** @internal Client.beginSession and Client.session make sessions. */
  constructor(readonly id: string, private readonly api: FetchClient<paths>, private readonly retry: Retry) {}

  /**
   * Stage batch on table as one step: computed at once on the session's
   * view (its own writes over the committed state), visible to nobody else
   * before the commit. A refused batch leaves the session as it was.
   *
   * A step is not idempotent and has no key: it is retried only on 429
   * overloaded (not run). After a transport error or a 5xx whether it was
   * taken is unknown: info().stages says.
   */
  stage(table: string, batch: Batch, signal?: AbortSignal): Promise<SessionInfo> {
    return this.step({ ...batch, table } as components["schemas"]["TableStage"], signal);
  }

  /** Stage several tables' batches as one step, all or none, in the order of the tables' names; as stage(). */
  stageTables(batches: Record<string, Batch>, signal?: AbortSignal): Promise<SessionInfo> {
    return this.step({ tables: batches }, signal);
  }

  private async step(body: components["schemas"]["StageRequest"], signal?: AbortSignal): Promise<SessionInfo> {
    const res = await this.retry(signal, () =>
      this.api.POST("/v1/sessions/{id}/batch", { params: { path: { id: this.id } }, body, signal, parseAs: "text" }), true);
    return infoOf(res.text);
  }

  /**
   * Document id of table as the session sees it: its own write if it made
   * one, else the committed document — whose version the session records,
   * so that its commit is a TransactionConflictError if the document
   * changes meanwhile.
   */
  async get(table: string, id: string, signal?: AbortSignal): Promise<unknown> {
    const res = await this.retry(signal, () =>
      this.api.GET("/v1/sessions/{id}/tables/{table}/docs/{doc}", { params: { path: { id: this.id, table, doc: id } }, signal, parseAs: "text" }),
    );
    return JSON.parse(res.text).doc;
  }

  /** The session as stored. */
  async info(signal?: AbortSignal): Promise<SessionInfo> {
    const res = await this.retry(signal, () =>
      this.api.GET("/v1/sessions/{id}", { params: { path: { id: this.id } }, signal, parseAs: "text" }),
    );
    return infoOf(res.text);
  }

  /**
   * Apply everything the session staged, exactly once, conditioned on every
   * document version it saw. A keyed call, retried as Client.batch is, under
   * o.key (none sent when undefined: the session ID is the key); a session
   * has one commit, which a retry under any key replays. Rejects with
   * TransactionConflictError (aborted: a document it saw changed),
   * SessionAbortedError (it ended before its commit was asked), …
   */
  async commit(o: CommitOptions = {}): Promise<Result> {
    const header: Record<string, string> = {};
    if (o.key !== undefined) header["Idempotency-Key"] = o.key;
    if (o.waitSeconds && o.waitSeconds > 0) header.Prefer = `wait=${Math.ceil(o.waitSeconds)}`;
    const res = await this.retry(o.signal, () =>
      this.api.POST("/v1/sessions/{id}/commit", {
        params: { path: { id: this.id }, header: header as any },
        body: {},
        signal: o.signal,
        parseAs: "text",
      }),
    );
    return resultOf(res, o.key ?? this.id);
  }

  /**
   * End the session without a commit: nothing it staged applies. Aborting an
   * aborted session answers it as it is; a committed one rejects with
   * SessionCommittedError.
   */
  async abort(signal?: AbortSignal): Promise<SessionInfo> {
    const res = await this.retry(signal, () =>
      this.api.DELETE("/v1/sessions/{id}", { params: { path: { id: this.id } }, signal, parseAs: "text" }),
    );
    return infoOf(res.text);
  }
}

/** The Result of a keyed call's committed answer. */
function resultOf(res: Answer, key: string): Result {
  const out: components["schemas"]["BatchResult"] = JSON.parse(res.text);
  return {
    inserted: out.inserted, deleted: out.deleted, transformed: out.transformed,
    replayed: res.headers.get("Idempotent-Replayed") === "true",
    transactionId: res.headers.get("Idem-Transaction-Id") ?? "", key,
  };
}

/** The SessionInfo of a session answer (a Session, or a stage step's StageAnswer). */
function infoOf(text: string): SessionInfo {
  const s: components["schemas"]["Session"] = JSON.parse(text);
  return {
    sessionId: s.session_id, state: s.state, reason: s.reason,
    createdAt: new Date(s.created_at), expiresAt: new Date(s.expires_at),
    stages: s.stages, documents: s.documents, writes: s.writes, result: s.result,
    commitKey: s.commit?.idempotency_key, transactionId: s.commit?.transaction_id,
    // Members newer than the generated schema.ts, read apart.
    commitOutcome: (s.commit as { outcome?: string } | undefined)?.outcome,
    commitCode: (s.commit as { code?: string } | undefined)?.code,
    retainedUntil: s.retained_until === undefined ? undefined : new Date(s.retained_until),
    staged: s.staged,
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
}
