// Sessions through the TypeScript SDK: against a real idemd, and their
// retries against scripted answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inspect } from "node:util";
import {
  Client, ERRORS, IdemError, DocumentNotFoundError, IdempotencyReceiptPendingError,
  SessionAbortedError, SessionCommittedError, SessionNotFoundError, TransactionConflictError, UnavailableError,
  type Session,
} from "../src/index.js";
import { Server } from "./server.js";

const inc = (id: string, path: string, value: number) => ({
  transforms: [{ id, ops: [{ op: "$inc" as const, path, value }] }],
});

const isProblem = (cls: (typeof ERRORS)[keyof typeof ERRORS], status: number) => (e: unknown) =>
  e instanceof cls && e instanceof IdemError && e.status === status;

test("a session: stage on two tables, read its own writes, commit, replay", async (t) => {
  const s = await Server.start();
  t.after(() => s.stop());
  const c = new Client(s.base);
  await c.createTable("orders");
  await c.createTable("stock");
  await c.batch("stock", { inserts: [{ id: "widget", doc: { n: 10 } }] });

  const sess = await c.beginSession({ ttlSeconds: 60, table: "orders" });
  assert.match(sess.id, /^s[0-9a-f]{32}$/);
  let info = await sess.stage("orders", { inserts: [{ id: "o-1", doc: { total: 12 } }] });
  assert.equal(info.state, "open");
  assert.equal(info.stages, 1);
  assert.deepEqual(info.staged, [{ table: "orders", inserted: 1, deleted: 0, transformed: 0 }]);
  assert.equal(info.expiresAt.getTime() - info.createdAt.getTime(), 60_000);
  info = await sess.stageTables({ stock: inc("widget", "n", -1), orders: inc("o-1", "total", 1) });
  assert.equal(info.stages, 2);
  assert.deepEqual(info.staged, [
    { table: "orders", inserted: 0, deleted: 0, transformed: 1 },
    { table: "stock", inserted: 0, deleted: 0, transformed: 1 },
  ]);
  assert.deepEqual(info.result, { inserted: 1, deleted: 0, transformed: 2 });

  assert.deepEqual(await sess.get("orders", "o-1"), { total: 13 });
  assert.deepEqual(await sess.get("stock", "widget"), { n: 9 });
  await assert.rejects(c.doc("orders", "o-1"), DocumentNotFoundError); // not visible before the commit
  assert.deepEqual(await c.doc("stock", "widget"), { n: 10 });

  const first = await sess.commit();
  assert.deepEqual([first.inserted, first.deleted, first.transformed, first.replayed, first.key], [1, 0, 2, false, sess.id]);
  assert.equal(first.transactionId.length, 32);
  assert.deepEqual(await c.doc("orders", "o-1"), { total: 13 });
  assert.deepEqual(await c.doc("stock", "widget"), { n: 9 });

  const again = await sess.commit();
  assert.deepEqual(again, { ...first, replayed: true });
  // A handle by ID, under another key: the session's one commit, replayed.
  const other = await c.session(sess.id).commit({ key: "another-key", waitSeconds: 1 });
  assert.deepEqual(other, { ...first, replayed: true, key: "another-key" });
  assert.deepEqual(await c.doc("stock", "widget"), { n: 9 });

  info = await sess.info();
  assert.deepEqual([info.state, info.commitKey, info.transactionId, info.stages], ["committed", sess.id, first.transactionId, 2]);
  assert.ok(info.retainedUntil instanceof Date);
  await assert.rejects(sess.stage("orders", { deletes: ["o-1"] }), (e: unknown) =>
    isProblem(SessionCommittedError, 409)(e) && !(e as IdemError).retryable);
  await assert.rejects(sess.abort(), isProblem(SessionCommittedError, 409));
});

test("a document the session read changed: transaction_conflict, replayed", async (t) => {
  const s = await Server.start();
  t.after(() => s.stop());
  const c = new Client(s.base);
  await c.createTable("t");
  await c.batch("t", { inserts: [{ id: "x", doc: { n: 1 } }] });
  const sess = await c.beginSession();
  assert.deepEqual(await sess.get("t", "x"), { n: 1 });
  await sess.stage("t", { inserts: [{ id: "y", doc: {} }] });
  await c.batch("t", inc("x", "n", 5), { key: "meanwhile" });

  const first = await sess.commit({ key: "c1" }).then(() => assert.fail("committed"), (e: unknown) => e);
  assert.ok(isProblem(TransactionConflictError, 409)(first));
  const e = first as IdemError;
  assert.deepEqual([e.outcome, e.retryWith, e.retry, e.newSessionNeeded, e.transactionId?.length], ["aborted", "none", "new_session", true, 32]);
  const info = await sess.info();
  assert.deepEqual([info.state, info.commitOutcome, info.commitCode], ["committed", "aborted", "transaction_conflict"]);
  await assert.rejects(sess.commit({ key: "c1" }), (again: unknown) =>
    again instanceof TransactionConflictError && again.transactionId === e.transactionId && again.detail === e.detail);
  await assert.rejects(c.doc("t", "y"), DocumentNotFoundError);
  assert.deepEqual(await c.doc("t", "x"), { n: 6 });
});

test("runSession: a new session after an aborted commit only when opted in", async (t) => {
  const s = await Server.start();
  t.after(() => s.stop());
  for (const retries of [0, 1]) {
    const c = new Client(s.base, { conflictRetries: retries, backoff: () => 1 });
    const tbl = `t${retries}`;
    await c.createTable(tbl);
    await c.batch(tbl, { inserts: [{ id: "x", doc: { n: 1 } }] });
    let runs = 0;
    const work = async (sess: Session) => {
      runs++;
      const { n } = (await sess.get(tbl, "x")) as { n: number };
      await sess.stage(tbl, { inserts: [{ id: "x", doc: { n: 10 * n } }] });
      if (runs === 1) await c.batch(tbl, inc("x", "n", 1)); // someone else changes x before the first commit
    };
    if (retries === 0) {
      await assert.rejects(c.runSession(work), (e: unknown) => e instanceof TransactionConflictError && e.newSessionNeeded);
      assert.deepEqual([runs, await c.doc(tbl, "x")], [1, { n: 2 }]);
    } else {
      const r = await c.runSession(work);
      assert.deepEqual([runs, r.inserted, await c.doc(tbl, "x")], [2, 1, { n: 20 }]);
    }
  }
});

test("an aborted session refuses its commit; an unknown one is session_not_found", async (t) => {
  const s = await Server.start();
  t.after(() => s.stop());
  const c = new Client(s.base);
  await c.createTable("t");
  const sess = await c.beginSession();
  await sess.stage("t", { inserts: [{ id: "y", doc: {} }] });
  const info = await sess.abort();
  assert.deepEqual([info.state, info.reason], ["aborted", "aborted"]);
  assert.ok(info.retainedUntil instanceof Date);
  assert.equal((await sess.abort()).state, "aborted");
  await assert.rejects(sess.commit(), (e: unknown) => isProblem(SessionAbortedError, 409)(e) && !(e as IdemError).retryable);
  await assert.rejects(sess.stage("t", { deletes: ["y"] }), SessionAbortedError);
  await assert.rejects(sess.get("t", "y"), SessionAbortedError);
  await assert.rejects(c.doc("t", "y"), DocumentNotFoundError);

  const gone = c.session(`s${"0123456789abcdef".repeat(2)}`);
  await assert.rejects(gone.info(), isProblem(SessionNotFoundError, 404));
  await assert.rejects(gone.commit(), isProblem(SessionNotFoundError, 404));
  await assert.rejects(gone.stage("t", { deletes: ["y"] }), isProblem(SessionNotFoundError, 404));
});

test("the session example in index.ts runs", async (t) => {
  const src = readFileSync(fileURLToPath(new URL("../../src/index.ts", import.meta.url)), "utf8");
  const snippet = src.split("With tables orders and stock:\n//\n")[1].split("\nimport ")[0]
    .split("\n").map((l) => l.replace(/^\/\/ {5}/, "")).join("\n");
  assert.match(snippet, /beginSession/);
  const s = await Server.start();
  t.after(() => s.stop());
  const c = new Client(s.base);
  await c.createTable("orders");
  await c.createTable("stock");
  const dir = mkdtempSync(join(fileURLToPath(new URL(".", import.meta.url)), "snippet-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "session.mjs");
  const lines: string[] = [];
  (globalThis as any).__c = c;
  (globalThis as any).__log = (...a: unknown[]) => lines.push(a.map((x) => typeof x === "string" ? x : inspect(x)).join(" "));
  writeFileSync(file, `const c = globalThis.__c;\n${snippet.replaceAll("console.log(", "globalThis.__log(")}\n`);
  await import(pathToFileURL(file).href);
  assert.deepEqual(lines, ["{ total: 5 }", "1 1"]);
});

// A local HTTP server answering from a script: a problem, "ok" (the
// route's success) or "lost" (the connection drops before an answer).
type Step = "ok" | "lost" | { status: number; code: string; retryable: boolean; retryWith?: string };
const SID = "s0123456789abcdef0123456789abcdef";
const SESSION = {
  session_id: SID, state: "open", created_at: "2025-01-01T00:00:00.123Z", expires_at: "2025-01-01T00:00:30.123Z",
  stages: 1, documents: 1, writes: 1, result: { inserted: 1, deleted: 0, transformed: 0 },
  staged: [{ table: "t", inserted: 1, deleted: 0, transformed: 0 }],
};
const problem = (status: number, code: string, retryable: boolean, retryWith?: string): Step => ({ status, code, retryable, retryWith });

async function scripted(script: Step[]) {
  const seen = { calls: 0, keys: new Set<string | undefined>(), outcome: undefined as string | undefined };
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    const step = script[Math.min(seen.calls++, script.length - 1)];
    seen.keys.add(req.headers["idempotency-key"] as string | undefined);
    req.resume();
    req.on("end", () => {
      if (step === "lost") { req.socket.destroy(); return; }
      let status = 200, body: unknown = SESSION;
      const headers: Record<string, string> = {};
      if (step !== "ok") {
        status = step.status;
        body = { code: step.code, retryable: step.retryable, ...(step.retryWith ? { retry_with: step.retryWith } : {}),
          ...(seen.outcome ? { outcome: seen.outcome } : {}) };
        headers["Content-Type"] = "application/problem+json";
      } else if (req.url!.endsWith("/commit") || req.url!.startsWith("/v1/tables/")) {
        status = 201;
        body = { inserted: 1, deleted: 0, transformed: 0 };
        headers["Idem-Transaction-Id"] = "t1";
      } else if (req.url!.includes("/docs/")) {
        body = { id: "d", doc: { n: 1 } };
      }
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  return { seen, base, close: () => new Promise<void>((r) => { srv.closeAllConnections(); srv.close(() => r()); }) };
}

test("session calls retry only what is safe", async (t) => {
  const calls: Record<string, (s: Session) => Promise<unknown>> = {
    stage: (s) => s.stage("t", { inserts: [{ id: "d", doc: {} }] }),
    get: (s) => s.get("t", "d"),
    info: (s) => s.info(),
    abort: (s) => s.abort(),
    commit: (s) => s.commit(),
    commitK: (s) => s.commit({ key: "k" }),
  };
  const cases: [string, string, Step[], ((e: unknown) => boolean) | null, number][] = [
    ["stage: overloaded, then staged", "stage", [problem(429, "overloaded", true), "ok"], null, 2],
    ["stage: a lost answer is not retried", "stage", ["lost", "ok"], (e) => e instanceof Error && !(e instanceof IdemError), 1],
    ["stage: unavailable is not retried", "stage", [problem(503, "unavailable", true), "ok"], (e) => e instanceof UnavailableError, 1],
    ["stage: internal is not retried", "stage", [problem(500, "internal", true), "ok"], (e) => e instanceof ERRORS.internal, 1],
    ["get: a lost answer, then the document", "get", ["lost", "ok"], null, 2],
    ["info: unavailable, then the session", "info", [problem(503, "unavailable", true), "ok"], null, 2],
    ["abort: a lost answer, then aborted", "abort", ["lost", "ok"], null, 2],
    ["commit, no key: pending, lost, then the commit", "commit",
      [problem(503, "idempotency_receipt_pending", true, "same_key"), "lost", "ok"], null, 3],
    ["commit, a key: in progress, then the commit", "commitK",
      [problem(409, "idempotency_request_in_progress", true, "same_key"), "ok"], null, 2],
    ["commit: pending past the retries", "commit", [problem(503, "idempotency_receipt_pending", true, "same_key")],
      (e) => e instanceof IdempotencyReceiptPendingError, 4],
    ["commit: a conflict is final", "commit", [problem(409, "transaction_conflict", true, "new_key"), "ok"],
      (e) => e instanceof TransactionConflictError, 1],
    ["commit: session_aborted is final", "commit", [problem(409, "session_aborted", false, "none"), "ok"],
      (e) => e instanceof SessionAbortedError, 1],
  ];
  for (const [name, call, script, want, n] of cases) {
    await t.test(name, async () => {
      const srv = await scripted(script);
      try {
        const s = new Client(srv.base, { maxRetries: 3, backoff: () => 1 }).session(SID);
        if (want === null) {
          const out: any = await calls[call](s);
          if (call.startsWith("commit")) assert.deepEqual([out.key, out.transactionId], [call === "commitK" ? "k" : SID, "t1"]);
          if (call === "stage") assert.deepEqual([out.staged, out.expiresAt.toISOString()], [SESSION.staged, SESSION.expires_at]);
        } else {
          await assert.rejects(calls[call](s), want);
        }
        assert.equal(srv.seen.calls, n);
        assert.deepEqual([...srv.seen.keys], [call === "commitK" ? "k" : undefined]);
      } finally {
        await srv.close();
      }
    });
  }
});

test("a batch's transaction_conflict is retried under a new key only when opted in", async (t) => {
  const conflict = problem(409, "transaction_conflict", true, "new_key");
  const cases: [string, number, Step[], boolean, number][] = [
    ["off by default", 0, [conflict, "ok"], false, 1],
    ["opted in: a new key, then the commit", 2, [conflict, conflict, "ok"], true, 3],
    ["opted in, past the retries", 1, [conflict, conflict, "ok"], false, 2],
  ];
  for (const [name, retries, script, commits, n] of cases) {
    await t.test(name, async () => {
      const srv = await scripted(script);
      srv.seen.outcome = "aborted";
      try {
        const c = new Client(srv.base, { conflictRetries: retries, backoff: () => 1 });
        const out = c.batch("t", { deletes: ["x"] });
        if (commits) {
          const r = await out;
          assert.ok(srv.seen.keys.has(r.key));
        } else {
          await assert.rejects(out, (e: unknown) => e instanceof TransactionConflictError);
        }
        assert.deepEqual([srv.seen.calls, srv.seen.keys.size], [n, n]);
      } finally {
        await srv.close();
      }
    });
  }
});
