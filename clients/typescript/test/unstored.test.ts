/**
 * No silent loss: `RunnableWithMessageHistory` stores a turn from a listener whose errors
 * LangChain.js only logs, so a turn chatmem refuses (a 2 MB question, over the server's limits)
 * would be gone without a word. The history remembers the failed write and the next read of
 * the conversation throws an `UnstoredWriteError` saying so; `onError` hears of it at once.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AIMessage, type BaseMessage, HumanMessage } from "@langchain/core/messages";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableWithMessageHistory } from "@langchain/core/runnables";
import { FakeListChatModel } from "@langchain/core/utils/testing";

import { ChatmemClient, ChatmemError } from "chatmem";
import { ChatmemChatMessageHistory, UnstoredWriteError } from "chatmem/langchain";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";

/** A 2 MB question: over the server's limits (256 KiB of text a message, 1 MiB a request). */
const HUGE = "我".repeat(700_000);

/** Runs `f` with `console.warn` recorded instead of printed (LangChain logs the lost write there). */
async function warnings<T>(f: () => Promise<T>): Promise<[T, string[]]> {
  const seen: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void seen.push(args.map(String).join(" "));
  try {
    return [await f(), seen];
  } finally {
    console.warn = warn;
  }
}

for (const store of stores()) {
  describe(`a refused write is not lost silently over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      server = await startServer(store.url);
      client = new ChatmemClient({ baseUrl: server.url });
    });
    after(() => server?.stop());

    test("through RunnableWithMessageHistory, the next turn throws that the earlier one was not stored", async () => {
      const conversation = uniqueId("unstored");
      const heard: [unknown, number][] = [];
      const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder("history"), ["human", "{input}"]]);
      const chain = new RunnableWithMessageHistory({
        runnable: prompt.pipe(new FakeListChatModel({ responses: ["好的。", "收到。", "在的。"] })),
        // A new history each turn, as an application's factory makes them: they share the client.
        getMessageHistory: (sessionId: string) =>
          new ChatmemChatMessageHistory({ conversationId: sessionId, client, onError: (e, messages) => heard.push([e, messages.length]) }),
        inputMessagesKey: "input",
        historyMessagesKey: "history",
      });
      const config = { configurable: { sessionId: conversation } };

      // LangChain.js itself answers the turn and only logs that storing it failed.
      const [answer, logged] = await warnings(() => chain.invoke({ input: HUGE }, config));
      assert.equal((answer as BaseMessage).content, "好的。");
      assert.ok(logged.some((line) => /handleChainEnd/.test(line)), `LangChain logs the failed write: ${logged.join("\n")}`);
      await assert.rejects(client.getMessages(conversation), { status: 404 }, "nothing of the turn was stored");
      assert.equal(heard.length, 1);
      assert.ok(heard[0]![0] instanceof ChatmemError && heard[0]![0].status === 413);
      assert.equal(heard[0]![1], 2, "the question and the answer");
      // The server counts the refusal too.
      const metrics = await client.metrics();
      const refused = /^chatmem_writes_refused_total\{route="\/v1\/conversations\/\{id\}\/messages",code="too_large"\} (\d+)/m.exec(metrics);
      assert.ok(Number(refused?.[1] ?? 0) >= 1, `the refused write counted: ${metrics}`);

      // The next turn's caller learns of it.
      await assert.rejects(chain.invoke({ input: "还在吗？" }, config), (e: unknown) => {
        assert.ok(e instanceof UnstoredWriteError, `an UnstoredWriteError, not ${String(e)}`);
        assert.ok(e instanceof ChatmemError);
        assert.equal(e.status, 413);
        assert.equal(e.code, "too_large");
        assert.equal(e.messages, 2);
        assert.match(e.message, /an earlier write of 2 messages to conversation ".*" was not stored/);
        assert.ok(e.cause instanceof ChatmemError);
        return true;
      });
      // Once: the turn after that goes on, from what is stored.
      await chain.invoke({ input: "还在吗？" }, config);
      const stored = (await client.getHistory(conversation)).messages.map((m) => [m.role, m.content]);
      assert.deepEqual(stored, [
        ["user", "还在吗？"],
        ["assistant", "收到。"],
      ]);
    });

    test("called directly, addMessages throws; the next read says so once, unless a write succeeded first", async () => {
      const conversation = uniqueId("unstored-direct");
      const history = new ChatmemChatMessageHistory({ conversationId: conversation, client });
      await history.addMessages([new HumanMessage("订单 LC202610060018"), new AIMessage("收到。")]);
      await assert.rejects(history.addMessages([new HumanMessage(HUGE)]), { name: "ChatmemError", status: 413 });
      // Another history over the same client sees it.
      const other = new ChatmemChatMessageHistory({ conversationId: conversation, client });
      await assert.rejects(other.getMessages(), UnstoredWriteError);
      assert.equal((await other.getMessages()).length, 2);

      await assert.rejects(history.addMessages([new HumanMessage(HUGE)]), { status: 413 });
      await history.addMessages([new HumanMessage("短一点的问题")]);
      assert.equal((await history.getMessages()).length, 3, "a later write that succeeded clears it");
    });
  });
}
