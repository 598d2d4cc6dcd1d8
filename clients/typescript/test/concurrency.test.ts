/**
 * Two processes write one conversation at once, each turn one atomic `addMessages`: nothing is
 * lost, and no turn is split by the other writer's messages.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { ChatmemClient } from "chatmem";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";

const WRITER = fileURLToPath(new URL("./support/writer.js", import.meta.url));
const TURNS = 40;

/** Runs the writer script as its own node process; resolves with its exit code and stderr. */
function runWriter(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}

for (const store of stores()) {
  describe(`two writer processes over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    before(async () => {
      // A window large enough that nothing is evicted (and so deleted) during the test.
      server = await startServer(store.url, { args: ["--max-messages", "1000"] });
    });
    after(() => server?.stop());

    test("lose and interleave nothing", async (t) => {
      const conversation = uniqueId("two-writers");
      const startAt = String(Date.now() + 1_000);
      const writers = ["A", "B"];
      const results = await Promise.all(
        writers.map((w) =>
          runWriter({ CHATMEM_URL: server.url, CHATMEM_CONVERSATION: conversation, CHATMEM_WRITER: w, CHATMEM_TURNS: String(TURNS), CHATMEM_START_AT: startAt }),
        ),
      );
      for (const [i, r] of results.entries()) assert.equal(r.code, 0, `writer ${writers[i]} failed: ${r.stderr}`);

      const client = new ChatmemClient({ baseUrl: server.url });
      const stored: Array<[role: string, text: string]> = [];
      for await (const m of client.history(conversation)) stored.push([m.role, m.content as string]);
      assert.equal(stored.length, writers.length * TURNS * 2, "every message stored");
      const next = new Map(writers.map((w) => [w, 0]));
      let switches = 0;
      for (let i = 0; i < stored.length; i += 2) {
        const [qRole, q] = stored[i]!;
        const [aRole, a] = stored[i + 1]!;
        const [tag] = q.split(" ");
        const [w, turn] = tag!.split("-");
        assert.equal(qRole, "user");
        assert.equal(aRole, "assistant");
        assert.equal(a, `${tag} answer`, `message ${i + 1} is the answer to ${tag}`);
        assert.equal(Number(turn), next.get(w!), `${w}'s turns in order`);
        next.set(w!, Number(turn) + 1);
        if (i > 0 && !stored[i - 2]![1].startsWith(`${w}-`)) switches++;
      }
      assert.deepEqual([...next.values()], writers.map(() => TURNS));
      t.diagnostic(`the writers took turns ${switches} times`);
    });
  });
}
