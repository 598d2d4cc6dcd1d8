/**
 * Tenants stay apart: a server started with `--auth` and two tokens; each tenant sees, lists,
 * writes and deletes only its own conversations, even under the same id. The client of tenant A
 * is configured from `CHATMEM_URL` and `CHATMEM_TOKEN` alone.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { ChatmemClient } from "chatmem";

import { type Server, startServer, stores, type Token, uniqueId } from "./support/server.js";

const token = (tenant: string): Token => ({ token: `tok-${randomUUID()}`, tenant: `ts-${tenant}-${randomUUID().slice(0, 8)}` });

for (const store of stores()) {
  describe(`tenants over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let a: ChatmemClient;
    let b: ChatmemClient;
    const tokens = [token("a"), token("b")];

    before(async () => {
      server = await startServer(store.url, { tokens });
      process.env.CHATMEM_URL = server.url;
      process.env.CHATMEM_TOKEN = tokens[0]!.token;
      a = new ChatmemClient();
      b = new ChatmemClient({ baseUrl: server.url, token: tokens[1]!.token });
    });
    after(async () => {
      delete process.env.CHATMEM_URL;
      delete process.env.CHATMEM_TOKEN;
      await server?.stop();
    });

    test("one id, two tenants, two conversations", async () => {
      const id = uniqueId("shared");
      await a.postMessages(id, [{ role: "user", content: "order LC202610060018 hasn't shipped" }]);
      await assert.rejects(b.getMessages(id), { status: 404, code: "not_found" });
      await assert.rejects(b.getHistory(id), { status: 404, code: "not_found" });
      await assert.rejects(b.deleteConversation(id), { status: 404, code: "not_found" });
      assert.deepEqual((await b.listConversations()).conversations, []);
      assert.deepEqual((await a.listConversations()).conversations, [id]);

      await b.postMessages(id, [{ role: "user", content: "B's own" }]);
      assert.deepEqual((await a.getMessages(id)).messages, [{ role: "user", content: "order LC202610060018 hasn't shipped" }]);
      assert.deepEqual((await b.getMessages(id)).messages, [{ role: "user", content: "B's own" }]);

      await b.deleteConversation(id);
      assert.equal((await a.getMessages(id)).messages.length, 1, "A's conversation outlives B's delete");
      await assert.rejects(b.getMessages(id), { status: 404 });
    });
  });
}
