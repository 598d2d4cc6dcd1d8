/**
 * The LangChain adapters naming the conversation's user, against a real `chatmem serve --facts`
 * (a fact added by hand first): the history's writes and prompt, and the agent middleware's
 * commits and model calls, carry the user. With one, what the model is sent has the user's
 * facts right after the system message, once; without one, nothing changes. The facts message
 * is never stored, never in `getMessages()` and never in the agent's state.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AIMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";
import { createAgent, tool } from "langchain";
import { z } from "zod";

import { ChatmemClient, ChatmemError, type Message, type Prompt } from "chatmem";
import { ChatmemChatMessageHistory, FACTS_HEADING, windowWithFacts } from "chatmem/langchain";
import { chatmemMiddleware } from "chatmem/langchain/middleware";

import { type Answer, type ScriptedModel, type SentMessage, startModel, textOf } from "./support/model.js";
import { type Server, startServer, stores, uniqueId } from "./support/server.js";

/** The heading as the server renders it (`FACTS_HEADING` of the Rust crate), written out. */
const HEADING = "What is known about the user (kept across conversations):";
const FACTS = `${HEADING}\n- Allergic to nuts`;
const SYSTEM = "You are a cook.";

/** Every stored message of `id`, oldest first. */
async function stored(client: ChatmemClient, id: string): Promise<Message[]> {
  const all = [];
  for await (const m of client.history(id)) all.push(m);
  return all;
}

/** How many messages of `messages` hold the facts heading. */
const factsIn = (messages: { content?: unknown }[]) => messages.filter((m) => JSON.stringify(m.content ?? "").includes(HEADING)).length;

/** Checks `e` is the server's 400 naming the body's `user`. */
function userRefused(e: unknown): boolean {
  const cause = e instanceof ChatmemError ? e : (e as { cause?: unknown }).cause;
  assert.ok(cause instanceof ChatmemError, `a ChatmemError, not ${String(e)}`);
  assert.equal(cause.status, 400);
  assert.equal(cause.param, "user");
  return true;
}

/** A model that answers a question with text, and "look it up" with a tool call first. */
function cook(messages: SentMessage[]): Answer {
  const last = messages.at(-1)!;
  if (last.role === "tool") return { content: `Found: ${textOf(last)}` };
  if (textOf(last).includes("look it up")) return { tool_calls: [{ name: "recipe", arguments: { dish: "cake" } }] };
  return { content: "Try a fruit salad." };
}

const recipe = tool(async ({ dish }: { dish: string }) => `a ${dish} without nuts`, {
  name: "recipe",
  description: "Finds a recipe.",
  schema: z.object({ dish: z.string() }),
});

test("the facts message is found where the server sends it; a message of the conversation is not taken for it", () => {
  assert.equal(FACTS_HEADING, HEADING);
  const prompt = (messages: Message[], recalled = 0): Prompt => ({
    conversation: "c",
    messages,
    tokens: 0,
    already_stored: 0,
    cleared: { results: 0, inputs: 0, tokens_saved: 0 },
    recalled: { seqs: Array.from({ length: recalled }, (_, i) => i), tokens: 0 },
  });
  const facts: Message = { role: "user", content: FACTS };
  const system: Message = { role: "system", content: SYSTEM };
  const [a, b, c]: Message[] = [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }];
  assert.deepEqual(windowWithFacts([system, a, b], prompt([system, facts, a, b])), { window: [system, a, b], facts });
  assert.deepEqual(windowWithFacts([a, b], prompt([facts, a, b])), { window: [a, b], facts });
  // Room made for the facts: the oldest messages are not sent; what recall adds is no room.
  assert.deepEqual(windowWithFacts([system, a, b, c], prompt([system, facts, c])), { window: [system, c], facts });
  assert.deepEqual(windowWithFacts([system, a, b, c], prompt([system, facts, b, { role: "user", content: "recalled" }, c], 1)), { window: [system, b, c], facts });
  // No facts: the window whole.
  assert.deepEqual(windowWithFacts([system, a, b], prompt([system, a, b])), { window: [system, a, b] });
  assert.deepEqual(windowWithFacts([system, a], prompt([system, a, facts])), { window: [system, a] });
  assert.deepEqual(windowWithFacts([system, facts, a], prompt([system, facts, a])), { window: [system, facts, a] });
  // Never none of the window for the facts.
  assert.deepEqual(windowWithFacts([system, a], prompt([system, facts])), { window: [system, a] });
});

for (const store of stores()) {
  describe(`the LangChain adapters naming a user over ${store.name}`, { skip: store.skip }, () => {
    let server: Server;
    let client: ChatmemClient;
    let model: ScriptedModel;
    before(async () => {
      server = await startServer(store.url, { args: ["--facts"] });
      client = new ChatmemClient({ baseUrl: server.url });
      model = await startModel(cook);
    });
    after(async () => {
      await server?.stop();
      await model?.stop();
    });

    test("under a token window the facts take the room of the oldest messages, as the server's prompt does", async () => {
      const user = uniqueId("ada");
      const id = uniqueId("token-window-facts");
      await client.addFact(user, `Allergic to nuts, ${"and to a great many other things besides, ".repeat(6)}`);
      const policy = { max_tokens: 400 };
      const turns: Message[] = [{ role: "system", content: SYSTEM }];
      for (let i = 0; i < 12; i++) {
        turns.push({ role: "user", content: `Question ${i}: ${"what shall I cook tonight, ".repeat(4)}` }, { role: "assistant", content: `Answer ${i}.` });
      }
      await client.postMessages(id, turns, policy);
      const shown = (m: Message | SentMessage) => [m.role, textOf(m as SentMessage)];
      const window = (await client.getMessages(id, policy)).messages;
      const prompt = await client.prompt(id, [], policy, { user });
      const found = windowWithFacts(window, prompt);
      assert.ok(found.facts, "the facts are sent");
      assert.ok(found.window.length < window.length, "room was made for them");
      assert.deepEqual([found.window[0]!, found.facts, ...found.window.slice(1)].map(shown), prompt.messages.map(shown));

      // The middleware sends the model what the server's dry run of the turn says.
      const question: Message = { role: "user", content: "Dessert ideas?" };
      const dry = await client.prompt(id, [question], policy, { user });
      const llm = new ChatOpenAI({ model: "scripted", apiKey: "not-used", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });
      const agent = createAgent({ model: llm, systemPrompt: SYSTEM, middleware: [chatmemMiddleware({ client, user, policy })] });
      await agent.invoke({ messages: [{ role: "user", content: "Dessert ideas?" }] }, { configurable: { thread_id: id } });
      assert.deepEqual(model.prompts.at(-1)!.map(shown), dry.messages.map(shown));
      assert.equal(factsIn(await stored(client, id)), 0);
      await client.forgetUser(user);
      await client.deleteConversation(id);
    });

    test("the history's prompt has the user's facts; its window and what is stored never do", async () => {
      const user = uniqueId("ada");
      const id = uniqueId("history-facts");
      await client.addFact(user, "Allergic to nuts");
      const history = new ChatmemChatMessageHistory({ conversationId: id, client, user });
      assert.equal(history.user, user);
      const turn = [new SystemMessage(SYSTEM), new HumanMessage("Dessert ideas?"), new AIMessage("A fruit salad.")];
      await history.addMessages(turn);

      const next = new HumanMessage("And for dinner?");
      const prompt = await history.getPromptMessages([next]);
      assert.deepEqual(
        prompt.map((m) => [m.type, m.content]),
        [
          ["system", SYSTEM],
          ["human", FACTS],
          ["human", "Dessert ideas?"],
          ["ai", "A fruit salad."],
          ["human", "And for dinner?"],
        ],
      );
      assert.deepEqual((await history.getPromptMessages()).map((m) => m.content)[1], FACTS, "the prompt as it stands has them too");

      // The window is the conversation's own messages: read and written back, nothing is added.
      const window = await history.getMessages();
      assert.deepEqual(window.map((m) => m.content), [SYSTEM, "Dessert ideas?", "A fruit salad."]);
      await history.addMessages([next, new AIMessage("Pasta.")]);
      const copy = new ChatmemChatMessageHistory({ conversationId: uniqueId("history-facts-copy"), client, user });
      await copy.addMessages(await history.getMessages());
      for (const h of [history, copy]) {
        assert.equal(factsIn(await stored(client, h.conversationId)), 0, `${h.conversationId}: no facts stored`);
        assert.equal(factsIn(await h.getMessages()), 0);
        assert.equal(factsIn(await h.getPromptMessages()), 1, "one facts message, however often read and written back");
      }
      assert.deepEqual(
        (await stored(client, id)).map((m) => m.content),
        [SYSTEM, "Dessert ideas?", "A fruit salad.", "And for dinner?", "Pasta."],
      );

      // Without a user, the same conversation's prompt has no facts.
      const anonymous = new ChatmemChatMessageHistory({ conversationId: id, client });
      assert.equal(anonymous.user, undefined);
      assert.equal(factsIn(await anonymous.getPromptMessages([next])), 0);

      // The user goes with every write and prompt: a bad one is the server's 400, nothing written.
      const bad = new ChatmemChatMessageHistory({ conversationId: id, client, user: "bad\nid" });
      await assert.rejects(bad.getPromptMessages(), userRefused);
      await assert.rejects(bad.addMessages([new HumanMessage("x")]), userRefused);
      // The failed write is reported by the conversation's next read, a prompt too, once.
      await assert.rejects(history.getPromptMessages(), { name: "UnstoredWriteError", status: 400 });
      assert.equal((await stored(client, id)).length, 5);
      await client.forgetUser(user);
      assert.equal(factsIn(await history.getPromptMessages()), 0, "a forgotten user: no facts");
      await history.clear();
      await copy.clear();
    });

    test("the middleware sends the model the user's facts at every call, and never stores them", async () => {
      const user = uniqueId("ada");
      const thread = uniqueId("agent-facts");
      await client.addFact(user, "Allergic to nuts");
      const llm = new ChatOpenAI({ model: "scripted", apiKey: "not-used", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });
      // A checkpointer: the state is read back at every call and turn, as a new agent's is not.
      const agent = createAgent({
        model: llm,
        tools: [recipe],
        systemPrompt: SYSTEM,
        middleware: [chatmemMiddleware({ client, user })],
        checkpointer: new MemorySaver(),
      });
      const config = { configurable: { thread_id: thread } };
      const first = model.prompts.length;
      await agent.invoke({ messages: [{ role: "user", content: "Dessert ideas?" }] }, config);
      const out = await agent.invoke({ messages: [{ role: "user", content: "A cake, look it up" }] }, config);
      const prompts = model.prompts.slice(first);
      assert.equal(prompts.length, 3, "one call, then a tool call and its answer");
      for (const [i, p] of prompts.entries()) {
        assert.deepEqual(p.slice(0, 2).map((m) => [m.role, textOf(m)]), [["system", SYSTEM], ["user", FACTS]], `prompt ${i}`);
        assert.equal(factsIn(p), 1, `prompt ${i}: the facts once`);
      }
      assert.deepEqual(prompts[2]!.slice(2).map((m) => m.role), ["user", "assistant", "user", "assistant", "tool"]);
      assert.equal(factsIn(out.messages), 0, "the state never holds the facts message");
      assert.deepEqual(
        (await stored(client, thread)).map((m) => m.role),
        ["system", "user", "assistant", "user", "assistant", "tool", "assistant"],
      );
      assert.equal(factsIn(await stored(client, thread)), 0, "nothing stored holds the facts");

      // The same conversation without a user: the model is sent what it was before, no facts.
      const plain = createAgent({ model: llm, tools: [recipe], systemPrompt: SYSTEM, middleware: [chatmemMiddleware({ client })] });
      const before = model.prompts.length;
      await plain.invoke({ messages: [{ role: "user", content: "Anything else?" }] }, config);
      const sent = model.prompts.slice(before);
      assert.equal(sent.length, 1);
      assert.equal(factsIn(sent[0]!), 0);
      assert.deepEqual(sent[0]!.slice(0, 2).map((m) => [m.role, textOf(m)]), [["system", SYSTEM], ["user", "Dessert ideas?"]]);

      // The user goes with the commits: a bad one is the server's 400, nothing written, no model call.
      const bad = createAgent({ model: llm, systemPrompt: SYSTEM, middleware: [chatmemMiddleware({ client, user: "bad\nid" })] });
      const calls = model.prompts.length;
      const badThread = uniqueId("agent-bad-user");
      await assert.rejects(bad.invoke({ messages: [{ role: "user", content: "hi" }] }, { configurable: { thread_id: badThread } }), userRefused);
      assert.equal(model.prompts.length, calls, "the model was not called");
      await assert.rejects(client.getMessages(badThread), { status: 404 }, "the turn's commit named the user and was refused");
      await client.forgetUser(user);
      await client.deleteConversation(thread);
    });
  });
}
