/**
 * Test support: a real `chatmem serve` (the binary `CHATMEM_BIN` names) on a free loopback
 * port, and the stores the tests run over (SQLite always, PostgreSQL with
 * `CHATMEM_TEST_PG_URL`).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** A store the tests run over; `skip` says why it cannot run here. */
export interface StoreCase {
  name: string;
  url: string;
  skip?: string;
}

/** A bearer token of a server started with `--auth`, and its tenant. */
export interface Token {
  token: string;
  tenant: string;
}

/** A running `chatmem serve`. */
export interface Server {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  /** Stops the server (SIGTERM) and removes its temporary files. */
  stop(): Promise<void>;
}

/** The stores: a fresh SQLite file, and PostgreSQL when `CHATMEM_TEST_PG_URL` is set. */
export function stores(): StoreCase[] {
  const pg = process.env.CHATMEM_TEST_PG_URL;
  return [
    { name: "sqlite", url: "sqlite:" },
    pg
      ? { name: "postgres", url: pg }
      : { name: "postgres", url: "", skip: "CHATMEM_TEST_PG_URL not set (a postgres:// URL runs these tests on PostgreSQL)" },
  ];
}

/** An id no other test or run uses (the PostgreSQL store is shared between runs). */
export function uniqueId(prefix: string): string {
  return `ts-${prefix}-${randomUUID()}`;
}

/**
 * Starts `chatmem serve` over `store` (`sqlite:` alone: a new file in a temporary directory) on
 * a free loopback port, with `tokens` as its `--auth` file and `args` added, and waits for
 * `/healthz`.
 */
export async function startServer(store: string, options: { tokens?: Token[]; args?: string[] } = {}): Promise<Server> {
  const bin = process.env.CHATMEM_BIN;
  if (!bin) throw new Error("CHATMEM_BIN is not set: the path of the chatmem binary (cargo build -p chatmem-cli)");
  const dir = mkdtempSync(join(tmpdir(), "chatmem-ts-"));
  const args = ["serve", "--listen", "127.0.0.1:0", "--store", store === "sqlite:" ? `sqlite:${join(dir, "chatmem.db")}` : store];
  if (options.tokens) {
    const toml = options.tokens.map((t) => `[[token]]\ntoken = "${t.token}"\ntenant = "${t.tenant}"\n`).join("\n");
    writeFileSync(join(dir, "auth.toml"), toml);
    args.push("--auth", join(dir, "auth.toml"));
  }
  args.push(...(options.args ?? []));
  const child = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const stop = async () => {
    await kill(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const url = await listeningUrl(child, () => stderr);
    await waitHealthy(url);
    return { url, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The URL the server prints on stderr once it listens (`chatmem: serving ... on http://...`). */
function listeningUrl(child: ChildProcess, stderr: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chatmem serve printed no address in 30 s; stderr: ${stderr()}`)), 30_000);
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      const match = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        lines.close();
        resolve(match[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`chatmem serve exited (${code}) before listening; stderr: ${stderr()}`));
    });
  });
}

async function waitHealthy(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${url}/healthz did not answer 200 within 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** SIGTERM, then SIGKILL if the process has not exited within 10 s. */
function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
