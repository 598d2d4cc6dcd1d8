/**
 * `chatmemMiddleware` in a LangChain.js agent (`createAgent`, `ChatOpenAI`) against a real
 * `chatmem serve` and a scripted model on loopback speaking chat completions. The after-sale
 * scenario: turn 1 looks the order up with a tool; turn 2, in a new agent with no checkpointer
 * (only chatmem remembers), asks to refund "that order", and the model calls the refund tool
 * only if the order number is in the prompt it got. And with a small window over many
 * tool-calling turns, every prompt stays bounded, starts with the system message and never
 * with a tool result whose call it lacks.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { MemorySaver } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";
import { createAgent, tool } from "langchain";
import { z } from "zod";

import { ChatmemClient, ChatmemError, type Policy } from "chatmem";
import { chatmemMiddleware } from "chatmem/langchain/middleware";

import { type Answer, type ScriptedModel, type SentMessage, startModel, textOf } from "./support/model.js";
import { type Server, startServer, stores, uniqueId } from "./support/server.js";

const ORDER = "LC202610060018";
const SYSTEM = "你是售后客服。";
const ORDER_NUMBER = /LC\d{12}/;

/**
 * The after-sale model: a question naming an order looks it up; "can it be refunded" refunds
 * the order the prompt names anywhere (or asks for it); a tool result is answered in words.
 */
function afterSale(messages: SentMessage[]): Answer {
  const last = messages.at(-1)!;
  if (last.role === "tool") return { content: `已处理：${textOf(last)}` };
  const question = textOf(last);
  if (question.includes("退款")) {
    const seen = messages.map((m) => `${textOf(m)} ${(m.tool_calls ?? []).map((c) => c.function.arguments).join(" ")}`).join("\n");
    const order = ORDER_NUMBER.exec(seen)?.[0];
    return order ? { tool_calls: [{ name: "refund", arguments: { order } }] } : { content: "请提供订单号。" };
  }
  const order = ORDER_NUMBER.exec(question)?.[0];
  return order ? { tool_calls: [{ name: "order_status", arguments: { order } }] } : { content: "您好，请问有什么可以帮您？" };
}

/** The tools, recording their calls. */
function tools(calls: [string, string][]) {
  return [
    tool(
      async ({ order }: { order: string }) => {
        calls.push(["order_status", order]);
        return `订单 ${order} 正在备货，尚未发货`;
      },
      { name: "order_status", description: "Looks an order up.", schema: z.object({ order: z.string() }) },
    ),
    tool(
      async ({ order }: { order: string }) => {
        calls.push(["refund", order]);
        return `订单 ${order} 已退款`;
      },
      { name: "refund", description: "Refunds an order.", schema: z.object({ order: z.string() }) },
    ),
  ];
}

/** A new agent on the scripted model; without a checkpointer, what it remembers is chatmem's. */
function newAgent(model: ScriptedModel, client: ChatmemClient, calls: [string, string][], policy?: Policy, checkpointer?: MemorySaver) {
  const llm = new ChatOpenAI({ model: "scripted", apiKey: "not-used", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });
  const middleware = [chatmemMiddleware({ client, ...(policy ? { policy } : {}) })];
  return createAgent({ model: llm, tools: tools(calls), systemPrompt: SYSTEM, middleware, ...(checkpointer ? { checkpointer } : {}) });
}

/** Checks one prompt: the system message first, every tool result after the call it answers. */
function assertWellFormed(prompt: SentMessage[], where: string): void {
  assert.equal(prompt[0]?.role, "system", `${where}: the system message first`);
  assert.ok(textOf(prompt[0]!).startsWith(SYSTEM), `${where}: the agent's system prompt`);
  assert.notEqual(prompt[1]?.role, "tool", `${where}: no tool result right after the system message`);
  const called = new Set<string>();
  for (const m of prompt) {
    for (const c of m.tool_calls ?? []) called.add(c.id);
    if (m.role === "tool") assert.ok(called.has(m.tool_call_id!), `${where}: the result of ${m.tool_call_id} after its call`);
  }
  assert.equal(prompt.filter((m) => m.role === "system").length, 1, `${where}: one system message`);
}

for (const store of stores()) {
  describe(`a LangChain agent on chatmem over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    let model: ScriptedModel;
    before(async () => {
      server = await startServer(store.url);
      client = new ChatmemClient({ baseUrl: server.url });
      model = await startModel(afterSale);
    });
    after(async () => {
      await server?.stop();
      await model?.stop();
    });

    test("a new agent refunds the order the first turn named: only chatmem remembered it", async () => {
      const thread = uniqueId("agent");
      const config = { configurable: { thread_id: thread } };
      const calls: [string, string][] = [];
      const first = model.prompts.length;

      await newAgent(model, client, calls).invoke({ messages: [{ role: "user", content: `我的订单 ${ORDER} 还没发货` }] }, config);
      const out = await newAgent(model, client, calls).invoke({ messages: [{ role: "user", content: "那个订单能退款吗？" }] }, config);

      assert.deepEqual(calls, [
        ["order_status", ORDER],
        ["refund", ORDER],
      ]);
      assert.match(textOf({ role: "assistant", content: out.messages.at(-1)!.content }), /已退款/);
      const prompts = model.prompts.slice(first);
      assert.equal(prompts.length, 4);
      prompts.forEach((p, i) => assertWellFormed(p, `prompt ${i}`));
      // The new agent's state held only its question: the order number came from chatmem.
      assert.ok(ORDER_NUMBER.test(JSON.stringify(prompts[2]!.slice(0, -1))));

      const stored = [];
      for await (const m of client.history(thread)) stored.push([m.role, m.tool_calls?.map((c) => c.function.name) ?? textOf(m as SentMessage)]);
      assert.deepEqual(stored, [
        ["system", SYSTEM],
        ["user", `我的订单 ${ORDER} 还没发货`],
        ["assistant", ["order_status"]],
        ["tool", `订单 ${ORDER} 正在备货，尚未发货`],
        ["assistant", `已处理：订单 ${ORDER} 正在备货，尚未发货`],
        ["user", "那个订单能退款吗？"],
        ["assistant", ["refund"]],
        ["tool", `订单 ${ORDER} 已退款`],
        ["assistant", `已处理：订单 ${ORDER} 已退款`],
      ]);
    });

    test("with a small window over many tool-calling turns, every prompt is bounded and well formed", async () => {
      const thread = uniqueId("agent-window");
      const policy = { max_messages: 6 };
      const calls: [string, string][] = [];
      const first = model.prompts.length;
      // One agent with a checkpointer: its state grows with every turn, the prompts must not.
      const agent = newAgent(model, client, calls, policy, new MemorySaver());
      for (let turn = 0; turn < 8; turn++) {
        const order = `LC2026100600${String(turn).padStart(2, "0")}`;
        const out = await agent.invoke({ messages: [{ role: "user", content: `订单 ${order} 到哪了？` }] }, { configurable: { thread_id: thread } });
        assert.equal(out.messages.length, 4 * (turn + 1), "the checkpointer's state holds every turn");
        assert.deepEqual(calls.at(-1), ["order_status", order], `turn ${turn} looked its own order up`);
      }
      const prompts = model.prompts.slice(first);
      assert.equal(prompts.length, 16);
      for (const [i, prompt] of prompts.entries()) {
        assert.ok(prompt.length <= policy.max_messages, `prompt ${i} holds ${prompt.length} messages`);
        assertWellFormed(prompt, `prompt ${i}`);
      }
      // Turns left the window: the last prompt does not hold the first turn.
      assert.ok(!JSON.stringify(prompts.at(-1)).includes("LC202610060000"));
      // Each message was stored once, though the state held it at every later call.
      const ids = [];
      for await (const m of client.history(thread)) ids.push((m.metadata?.langchain as { data: { id: string } }).data.id);
      assert.equal(new Set(ids).size, ids.length, "no message stored twice");
    });

    test("a turn the window cannot hold fails loudly instead of reaching the model without its question", async () => {
      const thread = uniqueId("agent-too-small");
      const agent = newAgent(model, client, [], { max_messages: 3 });
      await assert.rejects(agent.invoke({ messages: [{ role: "user", content: `订单 ${ORDER} 到哪了？` }] }, { configurable: { thread_id: thread } }), (e: unknown) => {
        const cause = e instanceof ChatmemError ? e : (e as { cause?: unknown }).cause;
        assert.ok(cause instanceof ChatmemError, `a ChatmemError, not ${String(e)}`);
        assert.equal(cause.code, "window_too_small");
        return true;
      });
    });

    test("without a thread id or a conversation id the agent is told so", async () => {
      const agent = newAgent(model, client, []);
      await assert.rejects(agent.invoke({ messages: [{ role: "user", content: "你好" }] }), /chatmemMiddleware has no conversation/);
    });
  });
}
