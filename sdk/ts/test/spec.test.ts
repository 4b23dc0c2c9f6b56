// The SDK's code table against the spec's (the ErrorCode schema's table):
// the compiler already holds CODES' keys to the spec's ErrorCode union.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CODES } from "../src/index.js";

test("the code table matches the spec's", () => {
  const spec = readFileSync(fileURLToPath(new URL("../../../../api/openapi.yaml", import.meta.url)), "utf8");
  const block = spec.split("\n    ErrorCode:\n")[1].split("\n    Problem:\n")[0];
  const table: Record<string, unknown> = {};
  for (const m of block.matchAll(/\|\s*([a-z_]+)\s*\|\s*(\d{3})\s*\|\s*(true|false)\s*\|\s*([a-z_]+)\s*\|/g)) {
    table[m[1]] = { status: Number(m[2]), retryable: m[3] === "true", retryWith: m[4] };
  }
  assert.ok(Object.keys(table).length > 10);
  assert.deepEqual(CODES, table);
});
