/**
 * Turns naming their user, and ids any text: a server started with `--facts` (a turn naming its
 * user is sent their facts) and its OpenAI door in front of a loopback upstream. The door's ids
 * go in headers as the UTF-8 bytes the server reads; an id a header cannot carry is refused
 * before anything is sent. The server runs with `--auth` and a tenant of its own.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { ChatmemClient, ChatmemError, type Message } from "chatmem";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";
import { startUpstream, type Upstream } from "./support/upstream.js";

/** The first line of the message a user's facts are sent in (the server's `FACTS_HEADING`). */
const HEADING = "What is known about the user (kept across conversations):";

/** Ids no header can carry as they are: a control character, a space or tab at either end, a lone surrogate. */
const HEADER_HOSTILE = ["bad\nid", "nul\u0000id", "del\u007fid", " padded", "tab\t", "half\ud83d"];

/** Checks `e` is the client's refusal naming `header`, made before sending (status 0). */
function refusedBeforeSending(header: string) {
  return (e: unknown) => {
    assert.ok(e instanceof ChatmemError, `a ChatmemError, not ${String(e)}`);
    assert.equal(e.status, 0);
    assert.equal(e.code, "invalid_request");
    assert.equal(e.param, header);
    assert.match(e.message, new RegExp(header));
    return true;
  };
}

/** Checks `e` is the server's 400 naming `param`. */
function serverRefused(param: string) {
  return (e: unknown) => {
    assert.ok(e instanceof ChatmemError, `a ChatmemError, not ${String(e)}`);
    assert.equal(e.status, 400);
    assert.equal(e.param, param);
    return true;
  };
}

for (const store of stores()) {
  describe(`users and any-text ids over ${store.name}`, { skip: store.skip }, () => {
    let upstream: Upstream;
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      upstream = await startUpstream();
      const token = { token: `tok-${randomUUID()}`, tenant: `ts-users-${randomUUID().slice(0, 8)}` };
      server = await startServer(store.url, { tokens: [token], args: ["--facts", "--upstream-base-url", upstream.baseUrl] });
      client = new ChatmemClient({ baseUrl: server.url, token: token.token });
    });
    after(async () => {
      await server?.stop();
      await upstream?.stop();
    });

    test("a turn naming its user is sent their facts; one naming none is not", async () => {
      const user = uniqueId("ada/1");
      const id = uniqueId("cook");
      await client.addFact(user, "Allergic to nuts");
      await client.addFact(user, "Lives in Hamburg", "home.city");
      const ask: Message = { role: "user", content: "What should I cook?" };
      const facts: Message = { role: "user", content: `${HEADING}\n- Lives in Hamburg\n- Allergic to nuts` };
      assert.deepEqual((await client.prompt(id, [ask], undefined, { user })).messages, [facts, ask]);
      assert.deepEqual((await client.prompt(id, [ask])).messages, [ask]);
      // With a policy too, and per-call options beside the user.
      const bounded = await client.prompt(id, [ask], { max_messages: 10 }, { user, timeoutMs: 10_000 });
      assert.deepEqual(bounded.messages, [facts, ask]);
      const window = await client.postMessages(id, [ask], undefined, { user });
      assert.deepEqual(window.messages, [ask], "the facts are sent, never stored");
      assert.deepEqual((await client.getHistory(id)).messages, [ask]);
      // The body's user is checked by the server, as the facts routes check it.
      await assert.rejects(client.postMessages(id, [ask], undefined, { user: "bad\nid" }), serverRefused("user"));
      await assert.rejects(client.prompt(id, [ask], undefined, { user: "" }), serverRefused("user"));
      assert.deepEqual((await client.getHistory(id)).messages, [ask], "nothing written by the refused turn");
      await client.forgetUser(user);
      assert.deepEqual((await client.prompt(id, [], undefined, { user })).messages, [ask], "a forgotten user: no facts");
    });

    test("the door takes a conversation id that is not ASCII", async () => {
      const ask: Message = { role: "user", content: "我的订单是 LC202610060018，还没发货。" };
      const echo: Message = { role: "assistant", content: `echo: ${ask.content}` };
      // `订单` is above U+00FF (fetch would throw), `é` below (fetch would send the byte E9).
      for (const id of [`订单-${randomUUID()}`, `café-${randomUUID()}`]) {
        const answer = await client.chatCompletion(id, { model: "fake-model", messages: [ask] });
        assert.equal(answer.choices[0]!.message.content, echo.content);
        assert.deepEqual((await client.getMessages(id)).messages, [ask, echo], id);
        const chunks = [];
        for await (const chunk of client.streamChatCompletion(id, { model: "fake-model", messages: [ask] })) chunks.push(chunk);
        assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), echo.content);
        assert.deepEqual(upstream.requests.at(-1)!.messages, [ask, echo, ask], "the stream had the same conversation's memory");
        const ids = [];
        for await (const c of client.conversations()) ids.push(c);
        assert.ok(ids.includes(id), `${id} listed under its own text`);
        await client.deleteConversation(id);
      }
    });

    test("the door sends the named user's facts upstream", async () => {
      const user = `顾客/${randomUUID()}`; // not ASCII: UTF-8 in X-Chatmem-User
      const id = uniqueId("door");
      const ask: Message = { role: "user", content: "我的订单是 LC202610060018，还没发货。" };
      await client.addFact(user, "Prefers replies in Chinese");
      const facts: Message = { role: "user", content: `${HEADING}\n- Prefers replies in Chinese` };
      await client.chatCompletion(id, { model: "fake-model", messages: [ask] }, { user });
      assert.deepEqual(upstream.requests.at(-1)!.messages, [facts, ask]);
      for await (const _ of client.streamChatCompletion(id, { model: "fake-model", messages: [ask] }, { user })) {
        // drained
      }
      assert.deepEqual(upstream.requests.at(-1)!.messages[0], facts, "a stream is sent them too");
      await client.chatCompletion(id, { model: "fake-model", messages: [ask] });
      assert.ok(
        upstream.requests.at(-1)!.messages.every((m) => !String(m.content).includes(HEADING)),
        "a turn naming no user is sent no facts",
      );
      // An empty id is carried; the server refuses it, naming the header.
      await assert.rejects(client.chatCompletion(id, { model: "fake-model", messages: [ask] }, { user: "" }), serverRefused("X-Chatmem-User"));
      await client.forgetUser(user);
    });

    test("an id a header cannot carry is refused before anything is sent", async () => {
      const id = uniqueId("hostile");
      const user = uniqueId("user");
      const ask: Message = { role: "user", content: "hi" };
      const sent = upstream.requests.length;
      for (const bad of HEADER_HOSTILE) {
        await assert.rejects(
          client.chatCompletion(id, { model: "fake-model", messages: [ask] }, { user: bad }),
          refusedBeforeSending("X-Chatmem-User"),
          JSON.stringify(bad),
        );
        await assert.rejects(
          client.chatCompletion(bad, { model: "fake-model", messages: [ask] }, { user }),
          refusedBeforeSending("X-Chatmem-Conversation"),
          JSON.stringify(bad),
        );
        const stream = client.streamChatCompletion(id, { model: "fake-model", messages: [ask] }, { user: bad });
        await assert.rejects(stream.next(), refusedBeforeSending("X-Chatmem-User"), JSON.stringify(bad));
      }
      assert.equal(upstream.requests.length, sent, "nothing reached the upstream");
      await assert.rejects(client.getMessages(id), { status: 404 }, "nothing stored");
      // A refused id never shows in the message.
      await assert.rejects(client.chatCompletion("secret\nid", { model: "m", messages: [ask] }), (e: Error) => !e.message.includes("secret"));
      // The same ids are fine where they go in a body or a path.
      const padded = ` padded-${randomUUID()} `;
      await client.postMessages(padded, [ask]);
      assert.deepEqual((await client.getMessages(padded)).messages, [ask]);
      await client.deleteConversation(padded);
    });
  });
}
