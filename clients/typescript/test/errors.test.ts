/**
 * Errors: a bad id, an oversized message or an invalid message rejects with the server's error
 * (status, code, request id) and nothing is written; what chatmem cannot hold is refused
 * before anything is sent; no answer is a `ChatmemError` too (timeout, connection refused).
 * The server runs with `--auth` and a tenant of its own, so its listing is this test's alone.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { AIMessage, FunctionMessage, HumanMessage, RemoveMessage } from "@langchain/core/messages";

import { ChatmemClient, ChatmemError, type Message } from "chatmem";
import { ChatmemChatMessageHistory, UnsupportedMessageError } from "chatmem/langchain";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";

/** The text limit of one message (256 KiB), plus one byte. */
const OVERSIZED = "x".repeat(256 * 1024 + 1);

/** Checks `e` is the server's error of `status` and `code`, with a request id. */
function serverError(status: number, code: string, message?: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof ChatmemError, `a ChatmemError, not ${String(e)}`);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    assert.match(e.requestId ?? "", /^[0-9a-f]{8,}$/, "the server's request id");
    if (message) assert.match(e.message, message);
    return true;
  };
}

for (const store of stores()) {
  describe(`errors over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    /** The tenant's conversation ids. */
    const listed = async () => {
      const ids = [];
      for await (const id of client.conversations()) ids.push(id);
      return ids.sort();
    };

    before(async () => {
      const token = { token: `tok-${randomUUID()}`, tenant: `ts-errors-${randomUUID().slice(0, 8)}` };
      server = await startServer(store.url, { tokens: [token] });
      client = new ChatmemClient({ baseUrl: server.url, token: token.token });
    });
    after(() => server?.stop());

    test("a bad id rejects with the server's error and writes nothing", async () => {
      const before = await listed();
      const hi: Message[] = [{ role: "user", content: "hi" }];
      await assert.rejects(client.postMessages("a\u0000b", hi), serverError(400, "invalid_request", /conversation id/));
      await assert.rejects(client.postMessages("x".repeat(192), hi), serverError(413, "too_large", /191/));
      const history = new ChatmemChatMessageHistory({ conversationId: "tab\there", client });
      await assert.rejects(history.addMessages([new HumanMessage("hi")]), serverError(400, "invalid_request"));
      assert.deepEqual(await listed(), before);
    });

    test("an oversized message rejects the whole batch", async () => {
      const id = uniqueId("oversized");
      await client.postMessages(id, [{ role: "user", content: "order LC202610060018" }]);
      const window = await client.getMessages(id);
      await assert.rejects(
        client.postMessages(id, [
          { role: "assistant", content: "ok" },
          { role: "user", content: OVERSIZED },
        ]),
        serverError(413, "too_large"),
      );
      const history = new ChatmemChatMessageHistory({ conversationId: id, client });
      await assert.rejects(history.addMessages([new AIMessage("ok"), new HumanMessage(OVERSIZED)]), serverError(413, "too_large"));
      assert.deepEqual(await client.getMessages(id), window);

      const fresh = uniqueId("oversized-new");
      await assert.rejects(client.postMessages(fresh, [{ role: "user", content: OVERSIZED }]), serverError(413, "too_large"));
      await assert.rejects(client.getMessages(fresh), serverError(404, "not_found"));
    });

    test("an invalid message rejects naming it, and nothing is written", async () => {
      const id = uniqueId("invalid");
      await assert.rejects(
        client.postMessages(id, [
          { role: "user", content: "fine" },
          { role: "assistant", content: null },
        ]),
        serverError(400, "invalid_request", /messages\[1\]/),
      );
      await assert.rejects(client.getMessages(id), serverError(404, "not_found"));
    });

    test("what chatmem cannot hold is refused before sending", async () => {
      const id = uniqueId("unsupported");
      const history = new ChatmemChatMessageHistory({ conversationId: id, client });
      const call = new FunctionMessage({ content: "{}", name: "order_status" });
      await assert.rejects(history.addMessages([new HumanMessage("first"), call]), (e: unknown) => {
        assert.ok(e instanceof UnsupportedMessageError);
        assert.match(e.message, /messages\[1\] \(function\).*"function"/);
        return true;
      });
      await assert.rejects(history.addMessages([new RemoveMessage({ id: "m1" })]), /chatmem cannot hold messages\[0\] \(remove\)/);
      const when = new AIMessage({ content: "x", additional_kwargs: { at: new Date(0) } });
      await assert.rejects(history.addMessages([when]), /messages\[0\] \(ai\)\.additional_kwargs\.at: a Date \(JSON values only\)/);
      await assert.rejects(client.getMessages(id), serverError(404, "not_found"));
    });

    test("without the token: 401 unauthorized", async () => {
      const anonymous = new ChatmemClient({ baseUrl: server.url, token: "" });
      await assert.rejects(anonymous.listConversations(), serverError(401, "unauthorized"));
      const wrong = new ChatmemClient({ baseUrl: server.url, token: "not-a-token-of-this-server" });
      await assert.rejects(wrong.getMessages("x"), serverError(401, "unauthorized"));
    });
  });
}

describe("no answer", () => {
  test("a server that never answers times out", async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as AddressInfo;
    try {
      const client = new ChatmemClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200 });
      const started = Date.now();
      await assert.rejects(client.healthz(), { name: "ChatmemError", status: 0, code: "timeout" });
      assert.ok(Date.now() - started < 5_000, "within the timeout, not the default");
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  test("a token that is not printable ASCII is refused before any call", () => {
    for (const token of ["tökén-secret", "two words", "tab\there"]) {
      assert.throws(
        () => new ChatmemClient({ baseUrl: "http://127.0.0.1:1", token }),
        (e: unknown) => {
          assert.ok(e instanceof ChatmemError, String(e));
          assert.equal(e.code, "invalid_request");
          assert.match(e.message, /^options\.token has a character that is not printable ASCII/);
          assert.ok(!e.message.includes("secret"));
          return true;
        },
      );
    }
    const saved = process.env.CHATMEM_TOKEN;
    process.env.CHATMEM_TOKEN = "jetón";
    try {
      assert.throws(() => new ChatmemClient({ baseUrl: "http://127.0.0.1:1" }), /^ChatmemError: CHATMEM_TOKEN has a character/);
    } finally {
      if (saved === undefined) delete process.env.CHATMEM_TOKEN;
      else process.env.CHATMEM_TOKEN = saved;
    }
  });

  test("a closed port is a connection error", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const client = new ChatmemClient({ baseUrl: `http://127.0.0.1:${port}` });
    await assert.rejects(client.healthz(), { name: "ChatmemError", status: 0, code: "connection_error" });
    // The error names the route, as the server's logs do, never the id.
    await assert.rejects(client.getMessages("order-LC202610060018"), (e: unknown) => {
      assert.ok(e instanceof ChatmemError);
      assert.match(e.message, /^GET \/v1\/conversations\/\{id\}\/messages: .*ECONNREFUSED/);
      assert.ok(!e.message.includes("LC202610060018"));
      return true;
    });
  });
});
