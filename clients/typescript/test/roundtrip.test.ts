/**
 * Every message LangChain.js makes round-trips exactly through chatmem: the pure conversion
 * (`toChatmemMessage`, JSON text, `fromChatmemMessage`) over generated messages of every kind,
 * and `ChatmemChatMessageHistory.addMessages` then `getMessages` against a real `chatmem serve`.
 * The body stays what the model should see (reasoning and non-OpenAI blocks left out of it), a
 * message read back writes again as it was, and what JSON cannot hold is refused by name.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AIMessage, type BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import fc from "fast-check";

import { ChatmemClient, type Message } from "chatmem";
import { ChatmemChatMessageHistory, fromChatmemMessage, toChatmemMessage, UnsupportedMessageError } from "chatmem/langchain";

import { assertSameMessage, conversation, message } from "./support/messages.js";
import { type Server, startServer, stores, uniqueId } from "./support/server.js";

/** `value` as it comes back from the server: through JSON text. */
const wire = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** The body of a stored message: what the model is sent. */
const body = (m: Message): Message => {
  const { metadata: _, ...rest } = m;
  return rest;
};

describe("the conversion", () => {
  test("every message reads back field by field, and writes again as it was", () => {
    fc.assert(
      fc.property(message, (m) => {
        const stored = wire(toChatmemMessage(m));
        const back = fromChatmemMessage(stored);
        assertSameMessage(back, m);
        assert.deepStrictEqual(wire(toChatmemMessage(back)), stored);
      }),
      { numRuns: 2000 },
    );
  });

  test("the body is what a model may be sent: reasoning and tool-call blocks never in content", () => {
    fc.assert(
      fc.property(message, (m) => {
        const stored = wire(toChatmemMessage(m));
        const parts = Array.isArray(stored.content) ? stored.content : [];
        const allowed: Record<string, string[]> = {
          user: ["text", "image_url", "input_audio", "file"],
          assistant: ["text", "refusal"],
          system: ["text"],
          developer: ["text"],
          tool: ["text"],
        };
        for (const part of parts) assert.ok(allowed[stored.role]!.includes(part.type), `a ${part.type} part in a ${stored.role} message`);
        if (stored.role !== "assistant") assert.equal(stored.reasoning_content, undefined);
        if (m instanceof AIMessage) {
          const valid = (m.tool_calls ?? []).filter((c) => c.id && c.name);
          assert.deepStrictEqual(
            (stored.tool_calls ?? []).map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
            valid.map((c) => [c.id, c.name, c.args]),
          );
        }
      }),
      { numRuns: 1000 },
    );
  });

  test("an AI message's reasoning is stored as reasoning_content, its blocks as the copy", () => {
    const m = new AIMessage({
      id: "run-1",
      content: [
        { type: "reasoning", reasoning: "订单号在第一轮。" },
        { type: "text", text: "可以退款。" },
        { type: "tool_call", id: "call_7", name: "refund", args: { order: "LC202610060018" } },
      ],
      tool_calls: [{ id: "call_7", name: "refund", args: { order: "LC202610060018" }, type: "tool_call" }],
      usage_metadata: { input_tokens: 10, output_tokens: 3, total_tokens: 13 },
    });
    const stored = toChatmemMessage(m);
    assert.deepStrictEqual(body(stored), {
      role: "assistant",
      content: [{ type: "text", text: "可以退款。" }],
      tool_calls: [{ id: "call_7", type: "function", function: { name: "refund", arguments: '{"order":"LC202610060018"}' } }],
      reasoning_content: "订单号在第一轮。",
    });
    // The copy holds what the body does not, under Python's names; not the tool calls the body holds.
    assert.deepStrictEqual(stored.metadata, {
      langchain: {
        type: "ai",
        data: { type: "ai", content: m.content, id: "run-1", usage_metadata: m.usage_metadata },
      },
    });
    assertSameMessage(fromChatmemMessage(wire(stored)), m);
  });

  test("a tool message keeps its artifact and status; a plain one stores no content twice", () => {
    const result = new ToolMessage({ content: "已发货", tool_call_id: "call_1", artifact: { rows: [1, 2] }, status: "success" });
    const stored = toChatmemMessage(result);
    assert.deepStrictEqual(stored, {
      role: "tool",
      tool_call_id: "call_1",
      content: "已发货",
      metadata: { langchain: { type: "tool", data: { type: "tool", artifact: { rows: [1, 2] }, status: "success" } } },
    });
    const back = fromChatmemMessage(wire(stored)) as ToolMessage;
    assert.deepStrictEqual([back.artifact, back.status], [{ rows: [1, 2] }, "success"]);
    const failed = fromChatmemMessage(wire(toChatmemMessage(new ToolMessage({ content: "超时", tool_call_id: "c", status: "error" })))) as ToolMessage;
    assert.equal(failed.status, "error");
    const unset = fromChatmemMessage(wire(toChatmemMessage(new ToolMessage({ content: "x", tool_call_id: "c" })))) as ToolMessage;
    assert.equal(unset.status, undefined);
  });

  test("invalid tool calls read back from another client's message write again", () => {
    const other: Message = {
      role: "assistant",
      tool_calls: [{ id: "call_1", type: "function", function: { name: "order_status", arguments: "{not json" } }],
    };
    const read = fromChatmemMessage(other) as AIMessage;
    assert.deepStrictEqual(read.invalid_tool_calls?.map((c) => [c.id, c.name, c.args]), [["call_1", "order_status", "{not json"]]);
    const stored = wire(toChatmemMessage(read));
    assertSameMessage(fromChatmemMessage(stored), read);
    const again = new AIMessage({ content: "", invalid_tool_calls: [{ id: "x", args: "{", error: "bad", type: "invalid_tool_call" }] });
    assertSameMessage(fromChatmemMessage(wire(toChatmemMessage(again))), again);
  });

  test("a chat message of any role reads back with its role; the body has a role chatmem knows", () => {
    for (const [role, shown] of [
      ["assistant", "assistant"],
      ["user", "user"],
      ["developer", "developer"],
      ["critic", "user"],
    ] as const) {
      const m = new ChatMessage({ content: "x", role });
      const stored = toChatmemMessage(m);
      assert.equal(stored.role, shown);
      const back = fromChatmemMessage(wire(stored));
      assert.ok(back instanceof ChatMessage);
      assert.equal(back.role, role);
    }
  });

  test("where the copy's text and the body's disagree, the body's content wins", () => {
    const stored = wire(toChatmemMessage(new SystemMessage({ content: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }] })));
    // As the server renders a summary into the system message: the copy is untouched.
    (stored.content as { type: string; text: string }[]).push({ type: "text", text: "Summary of the earlier conversation:\nLC202610060018" });
    const back = fromChatmemMessage(stored);
    assert.deepStrictEqual(back.content, stored.content);
    // A message of another client: the body alone.
    assert.deepStrictEqual(fromChatmemMessage({ role: "system", content: [{ type: "text", text: "a" }] }).content, [{ type: "text", text: "a" }]);
  });

  test("what JSON cannot hold is refused, naming the field, before anything is sent", () => {
    const cases: [BaseMessage, RegExp][] = [
      [new HumanMessage({ content: "x", additional_kwargs: { score: Number.NaN } }), /messages\[0\] \(human\)\.additional_kwargs\.score: the number NaN/],
      [new AIMessage({ content: "x", response_metadata: { at: new Date(0) } }), /response_metadata\.at: a Date/],
      [new ToolMessage({ content: "x", tool_call_id: "c", artifact: { f: () => 1 } }), /artifact\.f: a function/],
      [new AIMessage({ content: "x", tool_calls: [{ id: "c", name: "f", args: { n: 1n } }] }), /tool_calls\[0\]\.args\.n: a bigint/],
      [new ToolMessage({ content: "x", tool_call_id: "" }), /tool_call_id: a tool result without the id/],
    ];
    for (const [m, pattern] of cases) assert.throws(() => toChatmemMessage(m), (e: unknown) => e instanceof UnsupportedMessageError && pattern.test(e.message));
  });

  test("-0 reads back as 0 (JSON text has no -0)", () => {
    const back = fromChatmemMessage(wire(toChatmemMessage(new HumanMessage({ content: "x", additional_kwargs: { t: -0 } }))));
    assert.ok(Object.is(back.additional_kwargs.t, 0));
  });
});

for (const store of stores()) {
  describe(`the round trip through chatmem serve over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      server = await startServer(store.url);
      client = new ChatmemClient({ baseUrl: server.url });
    });
    after(() => server?.stop());

    test("a conversation written with addMessages reads back field by field with getMessages", async () => {
      await fc.assert(
        fc.asyncProperty(conversation, async (messages) => {
          const history = new ChatmemChatMessageHistory({ conversationId: uniqueId("roundtrip"), client, policy: { max_messages: 100 } });
          await history.addMessages(messages);
          const back = await history.getMessages();
          assert.equal(back.length, messages.length);
          for (const [i, m] of messages.entries()) assertSameMessage(back[i]!, m, `messages[${i}]`);
          // And once more: what was read back writes again as it was.
          const again = new ChatmemChatMessageHistory({ conversationId: uniqueId("roundtrip-again"), client, policy: { max_messages: 100 } });
          await again.addMessages(back);
          assert.deepStrictEqual((await client.getMessages(again.conversationId, { max_messages: 100 })).messages, (await client.getMessages(history.conversationId, { max_messages: 100 })).messages);
          // Nothing left behind in a shared PostgreSQL database.
          await history.clear();
          await again.clear();
        }),
        { numRuns: 40 },
      );
    });
  });
}
