/**
 * The after-sale scenario through LangChain: `RunnableWithMessageHistory` over
 * `ChatmemChatMessageHistory`, a model that records what it was sent, three turns where the
 * third ("can that order be refunded?") needs the order number from the first: in the window,
 * or, once the first turn left it, in the summary the server writes (`--summarize`, the
 * loopback upstream as the summary model). And the seed
 * conversation of `examples/aftersale.json` (tool calls, a tool result, reasoning) read back
 * through the LangChain conversions.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";

import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableWithMessageHistory } from "@langchain/core/runnables";
import { FakeListChatModel } from "@langchain/core/utils/testing";

import { ChatmemClient, type Message } from "chatmem";
import { ChatmemChatMessageHistory, fromChatmemMessage, toChatmemMessage } from "chatmem/langchain";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";
import { startUpstream, type Upstream } from "./support/upstream.js";

const ORDER = "LC202610060018";
const SEED = JSON.parse(readFileSync(new URL("../../../../examples/aftersale.json", import.meta.url), "utf8")) as Message[];
const SYSTEM = SEED[0]!;

/** LangChain's fake chat model, recording the messages of every call. */
class RecordingModel extends FakeListChatModel {
  calls: BaseMessage[][] = [];

  override async _generate(messages: BaseMessage[], options?: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    this.calls.push(messages);
    return super._generate(messages, options, runManager);
  }
}

/** A stored message without its metadata: what the model is sent. */
const body = (m: Message): Message => {
  const { metadata: _, ...rest } = m;
  return rest;
};

const text = (m: BaseMessage) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));

/** The after-sale chain: history, then the new input, to `model`, over chatmem's history. */
function afterSaleChain(model: RecordingModel, client: ChatmemClient) {
  const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder("history"), ["human", "{input}"]]);
  return new RunnableWithMessageHistory({
    runnable: prompt.pipe(model),
    getMessageHistory: (sessionId: string) => new ChatmemChatMessageHistory({ conversationId: sessionId, client }),
    inputMessagesKey: "input",
    historyMessagesKey: "history",
  });
}

const TURNS = [`我的订单是 ${ORDER}，还没发货。`, "营业时间是几点？", "那单能退吗？"];
const ANSWERS = [`收到，订单 ${ORDER} 尚未发货。`, "每天 9:00 到 21:00。", "可以退。"];

for (const store of stores()) {
  describe(`after-sale over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      server = await startServer(store.url);
      client = new ChatmemClient({ baseUrl: server.url });
    });
    after(() => server?.stop());

    test("the third turn's request still holds the order number from the first", async () => {
      const conversation = uniqueId("aftersale");
      const model = new RecordingModel({ responses: ANSWERS });
      const chain = afterSaleChain(model, client);
      await new ChatmemChatMessageHistory({ conversationId: conversation, client }).addMessages([
        new SystemMessage(SYSTEM.content as string),
      ]);

      const turns = TURNS;
      for (const input of turns) {
        await chain.invoke({ input }, { configurable: { sessionId: conversation } });
      }

      assert.equal(model.calls.length, 3);
      const third = model.calls[2]!;
      assert.ok(third[0] instanceof SystemMessage, "the system message comes first");
      assert.equal(text(third[0]!), SYSTEM.content);
      assert.equal(text(third.at(-1)!), "那单能退吗？");
      assert.ok(
        third.slice(0, -1).some((m) => text(m).includes(ORDER)),
        "the order number is in the third request's history",
      );
      // Each turn stored once, in order: the system message, then three (question, answer) pairs.
      const stored = [];
      for await (const m of client.history(conversation)) stored.push([m.role, m.content]);
      assert.deepEqual(stored, [
        ["system", SYSTEM.content],
        ["user", turns[0]],
        ["assistant", model.responses[0]],
        ["user", turns[1]],
        ["assistant", model.responses[1]],
        ["user", turns[2]],
        ["assistant", model.responses[2]],
      ]);
    });

    test("the window is what the model sees: a small window drops the order, the system message stays", async () => {
      const conversation = uniqueId("window");
      const history = new ChatmemChatMessageHistory({ conversationId: conversation, client, policy: { max_messages: 3 } });
      await history.addMessages([new SystemMessage("sys"), new HumanMessage(`order ${ORDER}`), new AIMessage("noted")]);
      await history.addMessages([new HumanMessage("hours?"), new AIMessage("9 to 21")]);
      const seen = await history.getMessages();
      assert.deepEqual(
        seen.map((m) => [m.type, text(m)]),
        [
          ["system", "sys"],
          ["human", "hours?"],
          ["ai", "9 to 21"],
        ],
      );
    });

    test("the seed conversation reads back through LangChain and converts to what is stored", async () => {
      const conversation = uniqueId("seed");
      await client.postMessages(conversation, SEED);
      const window = await client.getMessages(conversation);
      const seen = await new ChatmemChatMessageHistory({ conversationId: conversation, client }).getMessages();

      assert.equal(seen.length, window.messages.length);
      // The later system message replaced the first.
      assert.equal(text(seen[0]!), SEED[7]!.content);
      const call = seen.find((m): m is AIMessage => m instanceof AIMessage && (m.tool_calls?.length ?? 0) > 0)!;
      assert.deepEqual(call.tool_calls?.map((c) => [c.id, c.name, c.args]), [["call_1", "order_status", { order: ORDER }]]);
      const result = seen.find((m): m is ToolMessage => m instanceof ToolMessage)!;
      assert.equal(result.tool_call_id, "call_1");
      assert.equal(seen.at(-1)!.additional_kwargs.reasoning_content, SEED.at(-1)!.reasoning_content);
      // And back: LangChain's messages convert to exactly what the server holds.
      assert.deepEqual(seen.map((m, i) => body(toChatmemMessage(m, i))), window.messages);
    });

    test("images, a developer message and a failed tool result round-trip", async () => {
      const conversation = uniqueId("parts");
      const history = new ChatmemChatMessageHistory({ conversationId: conversation, client });
      const sent = [
        new SystemMessage({ content: "Be brief.", additional_kwargs: { __openai_role__: "developer" } }),
        new HumanMessage({
          content: [
            { type: "text", text: "Is this parcel mine?" },
            { type: "image_url", image_url: { url: "https://example.com/parcel.png", detail: "low" } },
            { type: "image", source_type: "base64", mime_type: "image/png", data: "iVBORw0KGgo=" },
          ],
        }),
        new AIMessage({ content: "", tool_calls: [{ id: "call_9", name: "lookup", args: { q: "parcel" } }] }),
        new ToolMessage({ content: "lookup failed", tool_call_id: "call_9", status: "error" }),
      ];
      await history.addMessages(sent);
      const stored = (await client.getHistory(conversation)).messages;
      assert.deepEqual(stored.map(body), [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "Is this parcel mine?" },
            { type: "image_url", image_url: { url: "https://example.com/parcel.png", detail: "low" } },
            { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          ],
        },
        { role: "assistant", tool_calls: [{ id: "call_9", type: "function", function: { name: "lookup", arguments: '{"q":"parcel"}' } }] },
        { role: "tool", tool_call_id: "call_9", content: "lookup failed", is_error: true },
      ]);
      const back = stored.map(fromChatmemMessage);
      assert.equal(back[0]!.additional_kwargs.__openai_role__, "developer");
      assert.equal((back[3] as ToolMessage).status, "error");
      assert.deepEqual(back.map((m, i) => toChatmemMessage(m, i)), stored);
    });

    test("clear deletes the conversation; a missing one reads as empty", async () => {
      const conversation = uniqueId("clear");
      const history = new ChatmemChatMessageHistory({ conversationId: conversation, client });
      assert.deepEqual(await history.getMessages(), []);
      await history.addUserMessage("hello");
      assert.equal((await history.getMessages()).length, 1);
      await history.clear();
      assert.deepEqual(await history.getMessages(), []);
      await history.clear();
    });
  });
}

for (const store of stores()) {
  describe(`after-sale with summaries over ${store.name}`, { skip: store.skip }, () => {
    let upstream: Upstream;
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      // The loopback upstream writes the summaries: it echoes the summary request, which holds
      // the messages leaving the window.
      upstream = await startUpstream();
      const args = ["--upstream-base-url", upstream.baseUrl, "--summarize", "--summary-model", "fake-model", "--max-messages", "4"];
      server = await startServer(store.url, { args });
      client = new ChatmemClient({ baseUrl: server.url });
    });
    after(async () => {
      await server?.stop();
      await upstream?.stop();
    });

    test("once the first turn leaves the window, its summary brings the order number to the third", async () => {
      // Turn 2 outgrows the window of 4 (system message and two turns): turn 1 is summarized.
      const conversation = uniqueId("aftersale-summary");
      const model = new RecordingModel({ responses: ANSWERS });
      const chain = afterSaleChain(model, client);
      await new ChatmemChatMessageHistory({ conversationId: conversation, client }).addMessages([
        new SystemMessage(SYSTEM.content as string),
      ]);
      for (const input of TURNS) {
        await chain.invoke({ input }, { configurable: { sessionId: conversation } });
      }

      // The server renders the summary after the system message's own text, in that message.
      const third = model.calls[2]!;
      assert.ok(third[0] instanceof SystemMessage, "the system message first");
      const [instructions, summary] = text(third[0]).split("\n\nSummary of the earlier conversation:\n");
      assert.equal(instructions, SYSTEM.content);
      assert.ok(summary?.includes(ORDER), "its summary holds the order number");
      assert.ok(!third.slice(1).some((m) => text(m) === TURNS[0]), "the first turn itself left the window");
      assert.equal(third.filter((m) => m instanceof SystemMessage).length, 1);
      assert.equal(text(third.at(-1)!), TURNS[2]);
    });
  });
}
