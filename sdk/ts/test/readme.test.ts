// The README's TypeScript snippet, run as written against a real idemd.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Server } from "./server.js";

test("the README snippet runs", async (t) => {
  const readme = readFileSync(fileURLToPath(new URL("../../../../README.md", import.meta.url)), "utf8");
  const snippet = readme.split("## SDKs")[1].split("```ts\n")[1].split("```")[0];
  const s = await Server.start();
  t.after(() => s.stop());
  // The snippet imports the package by name; here it is this build.
  const index = pathToFileURL(fileURLToPath(new URL("../src/index.js", import.meta.url))).href;
  const dir = mkdtempSync(join(fileURLToPath(new URL(".", import.meta.url)), "readme-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "snippet.mjs");
  const lines: string[] = [];
  writeFileSync(file, snippet.replace('"@idemdb/client"', JSON.stringify(index)).replace("http://127.0.0.1:8420", s.base)
    .replaceAll("console.log(", "globalThis.__log("));
  (globalThis as any).__log = (...a: unknown[]) => lines.push(a.join(" "));
  await import(pathToFileURL(file).href);
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[0], /^1 false [0-9a-f]{32}$/);
  assert.equal(lines[1], "422 not_applied");
});
