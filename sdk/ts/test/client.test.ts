// The TypeScript SDK against a real idemd process each test starts.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Client, IdemError, DocumentNotFoundError, IdempotencyKeyMismatchError,
  IdempotencyRequestInProgressError, TableNotFoundError,
} from "../src/index.js";
import { Server } from "./server.js";

const inc = (id: string) => ({
  inserts: [{ id: `mark-${id}`, doc: {} }],
  transforms: [{ id: `ctr-${id}`, ops: [{ op: "$inc" as const, path: "n", value: 1 }], upsert: true }],
});

async function counter(c: Client, table: string, id: string): Promise<number> {
  try {
    return ((await c.doc(table, `ctr-${id}`)) as { n: number }).n;
  } catch (e) {
    if (e instanceof DocumentNotFoundError) return 0;
    throw e;
  }
}

async function awaitStarted(s: Server, table: string, key: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${s.base}/v1/receipts/${table}/${key}`);
      if (r.status === 200 && (await r.json()).state === "started") return;
    } catch { /* retry */ }
    await new Promise((r) => setTimeout(r, 20)); // poll step, bounded by the deadline
  }
  throw new Error("the receipt never started");
}

test("commit, replay, mismatch and a replayed not_applied", async (t) => {
  const s = await Server.start();
  t.after(() => s.stop());
  const c = new Client(s.base);
  assert.equal(await c.createTable("orders"), true);
  const first = await c.batch("orders", inc("a"), { key: "k1" });
  assert.deepEqual([first.inserted, first.transformed, first.replayed, first.key], [1, 1, false, "k1"]);
  assert.equal(first.transactionId.length, 32);
  const again = await c.batch("orders", inc("a"), { key: "k1" });
  assert.equal(again.replayed, true);
  assert.equal(again.transactionId, first.transactionId);
  await assert.rejects(c.batch("orders", inc("other"), { key: "k1" }), (e: unknown) =>
    e instanceof IdempotencyKeyMismatchError && e instanceof IdemError && e.status === 422 && e.outcome === "not_applied");
  const one = await c.batch("orders", inc("b"));
  const two = await c.batch("orders", inc("b"));
  assert.notEqual(one.key, two.key);
  assert.equal(await counter(c, "orders", "b"), 2);
  await assert.rejects(c.batch("late", inc("x"), { key: "k-late" }), (e: unknown) =>
    e instanceof TableNotFoundError && e.outcome === "not_applied" && !!e.transactionId);
  await c.createTable("late");
  await assert.rejects(c.batch("late", inc("x"), { key: "k-late" }), TableNotFoundError);
});

test("in progress: typed at once, or the commit with a wait", async (t) => {
  const s = await Server.start("receipt/decide-before=1*sleep(4000)");
  t.after(() => s.stop());
  const c = new Client(s.base, { maxRetries: -1 });
  await c.createTable("t");
  const first = c.batch("t", inc("k"), { key: "k" });
  await awaitStarted(s, "t", "k");
  await assert.rejects(c.batch("t", inc("k"), { key: "k" }), (e: unknown) =>
    e instanceof IdempotencyRequestInProgressError && e.retryWith === "same_key" && e.outcome === "pending");
  const waited = await c.batch("t", inc("k"), { key: "k", waitSeconds: 20 });
  assert.equal(waited.transactionId, (await first).transactionId);
  assert.equal(await counter(c, "t", "k"), 1);
});

test("a retry across a server restart applies once", async (t) => {
  const s = await Server.start("receipt/decide-before=1*sleep(30000)");
  t.after(() => s.stop());
  const c = new Client(s.base, { maxRetries: 50, backoff: () => 100 });
  await c.createTable("t");
  const call = c.batch("t", inc("k"), { key: "k" });
  await awaitStarted(s, "t", "k");
  await s.kill();
  await s.start(); // the same data dir and address; no failpoint
  const r = await call;
  assert.equal(r.inserted, 1);
  assert.equal(await counter(c, "t", "k"), 1);
});

test("an AbortSignal cancels a call, retries included", async (t) => {
  const s = await Server.start("receipt/decide-before=1*sleep(10000)");
  // Killed, not stopped gracefully: that would wait for the held-up decision.
  t.after(async () => { await s.kill(); await s.stop(); });
  const c = new Client(s.base, { maxRetries: 5 });
  await c.createTable("t");
  const started = Date.now();
  await assert.rejects(c.batch("t", inc("k"), { key: "k", signal: AbortSignal.timeout(300) }),
    (e: unknown) => e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError"));
  assert.ok(Date.now() - started < 5000, "the call outlived its signal");
});
