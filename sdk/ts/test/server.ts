// A real idemd for the tests: built once from this repository, started per test.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, openSync, closeSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../../..");
const START_TIMEOUT_MS = 30_000;
let buildDir: string | undefined;

/** The test build of idemd (failpoints compiled in, armed only by GO_FAILPOINTS). */
export function idemdBinary(): string {
  if (!buildDir) {
    buildDir = mkdtempSync(join(tmpdir(), "idemd-ts-"));
    execFileSync("go", ["build", "-o", join(buildDir, "idemd"), "./cmd/idemd"], { cwd: ROOT, stdio: "inherit" });
    const dir = buildDir;
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return join(buildDir, "idemd");
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

/** idemd on a fixed port and data dir, so that a restart keeps both. */
export class Server {
  proc?: ChildProcess;
  readonly data = mkdtempSync(join(tmpdir(), "idemd-data-"));
  private constructor(readonly addr: string) {}
  get base(): string { return `http://${this.addr}`; }

  static async start(failpoints = ""): Promise<Server> {
    const s = new Server(`127.0.0.1:${await freePort()}`);
    await s.start(failpoints);
    return s;
  }

  async start(failpoints = ""): Promise<void> {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GO_FAILPOINTS")));
    if (failpoints) env.GO_FAILPOINTS = failpoints;
    const log = openSync(join(this.data, "idemd.log"), "a");
    this.proc = spawn(idemdBinary(), ["-addr", this.addr, "-data", this.data, "-lease-ttl", "2s",
      "-maintain-interval", "100ms", "-separate-decide"], { env, stdio: ["ignore", log, log] });
    closeSync(log);
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      try {
        const r = await fetch(`${this.base}/healthz`);
        if (r.status === 200) return;
      } catch { /* not listening yet */ }
      if (this.proc.exitCode !== null || Date.now() > deadline) {
        throw new Error(`idemd did not become healthy: ${readFileSync(join(this.data, "idemd.log"), "utf8").slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 20)); // poll step, bounded by the deadline
    }
  }

  async kill(): Promise<void> {
    const p = this.proc!;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once("exit", r));
      p.kill("SIGTERM");
      await exited;
    }
    rmSync(this.data, { recursive: true, force: true });
  }
}
