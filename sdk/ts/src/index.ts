// The TypeScript client of an Idem server (idemd): exactly-once batch
// writes, with the ergonomics of the SDKs users know, over a client
// generated from api/openapi.yaml (schema.ts, by openapi-typescript; the
// calls go through openapi-fetch).
//
// - A keyed call gets an Idempotency-Key of its own when the caller gives
//   none, and keeps it across its retries.
// - Retries are bounded (maxRetries, 2 by default), jittered 0.5 s·(1+n²)
//   up to 5 s, or the server's Retry-After when longer, on transport errors
//   and every retry_with: same_key answer.
// - Every problem is an IdemError, one class per code (ERRORS).
// - Cancellation is an AbortSignal; a timeout is AbortSignal.timeout(ms).
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";
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
}

export interface BatchOptions {
  /** The Idempotency-Key; a new one for this call when undefined. */
  key?: string;
  /** Ask the server to wait up to this many seconds for a receipt in progress (Prefer: wait). */
  waitSeconds?: number;
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

export class Client {
  private readonly api;
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
    const key = o.key ?? crypto.randomUUID().replaceAll("-", "");
    const header: Record<string, string> = { "Idempotency-Key": key };
    if (o.waitSeconds && o.waitSeconds > 0) header.Prefer = `wait=${Math.ceil(o.waitSeconds)}`;
    const res = await this.retry(o.signal, () =>
      this.api.POST("/v1/tables/{table}/batch", {
        params: { path: { table }, header: header as any },
        body: batch,
        signal: o.signal,
        parseAs: "text",
      }),
    );
    const out = JSON.parse(res.text);
    return {
      inserted: out.inserted, deleted: out.deleted, transformed: out.transformed,
      replayed: res.headers.get("Idempotent-Replayed") === "true",
      transactionId: res.headers.get("Idem-Transaction-Id") ?? "", key,
    };
  }

  /** Document id of table, as stored. */
  async doc(table: string, id: string, signal?: AbortSignal): Promise<unknown> {
    const res = await this.retry(signal, () =>
      this.api.GET("/v1/tables/{table}/docs/{id}", { params: { path: { table, id } }, signal, parseAs: "text" }),
    );
    return JSON.parse(res.text).doc;
  }

  backoff(n: number): number {
    if (this.opts.backoff) return this.opts.backoff(n);
    return Math.min(BACKOFF_BASE_MS * (1 + n * n), BACKOFF_MAX_MS) * (0.75 + 0.5 * Math.random());
  }

  // retry sends until an answer is final or the retries are spent: a 2xx is
  // returned; a problem rejects as its IdemError, retried when its
  // retry_with is same_key (an unkeyed answer: when retryable); a transport
  // error is retried too — the same request, so the same key.
  private async retry(signal: AbortSignal | undefined, send: () => Promise<{ data?: unknown; error?: unknown; response: Response }>): Promise<{ status: number; headers: Headers; text: string }> {
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
        if (e.retryWith !== "same_key" && (e.retryWith !== undefined || !e.retryable)) throw e;
        err = e;
        wait = e.retryAfter * 1000;
      } catch (e) {
        if (e instanceof IdemError && err === undefined) throw e;
        if (signal?.aborted) throw e;
        err = err ?? e;
      }
      if (n >= this.maxRetries) throw err;
      await sleep(Math.max(wait, this.backoff(n + 1)), signal);
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
}
