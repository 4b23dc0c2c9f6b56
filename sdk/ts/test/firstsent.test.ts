// Repeatability-First-Sent on every attempt of a key, against a scripted server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "../src/index.js";

/** A server that answers 503 unavailable twice, then 201, recording each attempt's header. */
async function scripted(t: { after: (fn: () => void) => void }): Promise<{ base: string; seen: string[] }> {
  const seen: string[] = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push(String(req.headers["repeatability-first-sent"] ?? ""));
      if (seen.length % 3 !== 0) {
        res.writeHead(503, { "Content-Type": "application/problem+json" });
        res.end(JSON.stringify({ code: "unavailable", status: 503, retryable: true, retry_with: "same_key" }));
        return;
      }
      res.writeHead(201, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ inserted: 1, deleted: 0, transformed: 0 }));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  t.after(() => srv.close());
  return { base: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen };
}

test("every attempt of a key sends the first attempt's time", async (t) => {
  const { base, seen } = await scripted(t);
  const c = new Client(base, { maxRetries: 3, backoff: () => 10 });
  const before = Math.floor(Date.now() / 1000) * 1000;
  await c.batch("t", { deletes: ["x"] }, { key: "k" });
  assert.equal(seen.length, 3);
  assert.ok(seen[0]);
  assert.deepEqual(seen, [seen[0], seen[0], seen[0]]);
  const at = Date.parse(seen[0]);
  assert.ok(at >= before && at <= Date.now(), `${seen[0]} is not the call's first attempt`);
});

test("a given firstSent is sent as is", async (t) => {
  const { base, seen } = await scripted(t);
  const c = new Client(base, { maxRetries: 3, backoff: () => 10 });
  await c.batch("t", { deletes: ["x"] }, { key: "k", firstSent: new Date(Date.UTC(2026, 11, 1, 10)) });
  assert.deepEqual(seen, Array(3).fill("Tue, 01 Dec 2026 10:00:00 GMT"));
});
