/**
 * Recall through the client, against a real `chatmem serve --recall 3 --max-messages 2` in
 * front of a loopback upstream: what recall finds for a question and why, the dry run and the
 * OpenAI door sending the recalled order just before the question (memory storing none of it),
 * and bad input rejected with the server's error.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { ChatmemClient, ChatmemError, type Message } from "chatmem";

import { type Server, startServer, uniqueId } from "./support/server.js";
import { startUpstream, type Upstream } from "./support/upstream.js";

const HEADING = "Recalled from earlier in this conversation (oldest first):";
const ORDER = "我的订单是 LC202610060018，还没发货。";
const QUESTION = "LC202610060018 能退吗？";
const TURNS: Message[] = [
  { role: "user", content: ORDER },
  { role: "assistant", content: "已为您催促发货。" },
  { role: "user", content: "谢谢" },
  { role: "assistant", content: "不客气" },
];

describe("recall", () => {
  let upstream: Upstream;
  let server: Server;
  let plain: Server;
  let client: ChatmemClient;
  before(async () => {
    upstream = await startUpstream();
    const token = { token: `tok-${randomUUID()}`, tenant: "ts-recall" };
    server = await startServer("memory:", {
      tokens: [token],
      args: ["--recall", "3", "--max-messages", "2", "--retention", "keep-history", "--upstream-base-url", upstream.baseUrl],
    });
    plain = await startServer("memory:");
    client = new ChatmemClient({ baseUrl: server.url, token: token.token });
  });
  after(async () => {
    await server?.stop();
    await plain?.stop();
    await upstream?.stop();
  });

  test("what recall finds for a question, and why", async () => {
    const id = uniqueId("recall/what");
    await client.postMessages(id, TURNS);
    const found = await client.recall(id, QUESTION);
    assert.equal(found.conversation, id);
    assert.equal(found.enabled, true);
    assert.equal(found.k, 3);
    assert.equal(found.hits.length, 1);
    const hit = found.hits[0]!;
    assert.deepEqual([hit.seq, hit.role, hit.content, hit.outcome, hit.lexical_rank], [1, "user", ORDER, "injected", 1]);
    assert.deepEqual(hit.message, { role: "user", content: ORDER });
    assert.ok(hit.score > 0 && hit.relevance >= 0.1 && hit.relevance <= 1, JSON.stringify(hit));
    assert.ok(!Number.isNaN(Date.parse(hit.at!)), String(hit.at));
    const injected = String(found.injected?.content);
    assert.ok(injected.startsWith(`${HEADING}\n[#1 user, `) && injected.endsWith(ORDER), injected);
    assert.ok(found.injected_tokens > 10);
    assert.equal((await client.recall(id, QUESTION, 1)).k, 1);
    const nothing = await client.recall(id, "不客气");
    assert.deepEqual([nothing.hits, nothing.injected, nothing.injected_tokens], [[], null, 0]);
  });

  test("the dry run and the door send the recalled order just before the question", async () => {
    const id = uniqueId("recall/door");
    await client.postMessages(id, TURNS);
    const ask: Message = { role: "user", content: QUESTION };
    const prompt = await client.prompt(id, [ask]);
    assert.deepEqual(prompt.recalled.seqs, [1]);
    assert.ok(prompt.recalled.tokens > 10);
    assert.deepEqual(prompt.messages.at(-1), ask);
    const recalled = String(prompt.messages.at(-2)!.content);
    assert.ok(recalled.startsWith(HEADING) && recalled.includes(ORDER), recalled);
    assert.ok(prompt.messages.slice(0, -2).every((m) => !String(m.content).includes(ORDER)));
    await client.chatCompletion(id, { model: "fake-model", messages: [ask] });
    assert.deepEqual(upstream.requests.at(-1)!.messages, prompt.messages, "the dry run is what the door sends");
    const stored = (await client.getHistory(id)).messages;
    assert.deepEqual(stored.slice(0, 5), [...TURNS, ask]);
    assert.ok(stored.every((m) => !String(m.content).includes(HEADING)), "nothing recalled is stored");
    assert.match(await client.metrics(), /chatmem_recalls_total [1-9]/);
  });

  test("bad input is the server's error; a server without recall finds nothing", async () => {
    const id = uniqueId("recall/bad");
    await client.postMessages(id, TURNS);
    for (const k of [0, 101]) {
      await assert.rejects(client.recall(id, QUESTION, k), (e: ChatmemError) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, "k");
        return true;
      });
    }
    await assert.rejects(client.recall(`${id}-none`, QUESTION), (e: ChatmemError) => e.status === 404);
    await assert.rejects(client.recall(id, ""), (e: ChatmemError) => e.status === 0 && /q is empty/.test(e.message));
    const other = new ChatmemClient({ baseUrl: plain.url });
    await other.postMessages(id, TURNS);
    const found = await other.recall(id, QUESTION);
    assert.deepEqual([found.enabled, found.k, found.hits], [false, 5, []]);
    assert.deepEqual((await other.prompt(id, [])).recalled, { seqs: [], tokens: 0 });
  });
});
