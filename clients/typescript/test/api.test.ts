/**
 * The client against the running server's `/openapi.json`: every path and method it lists has
 * a client method (a table here), the client's types have the schema's required fields (the
 * compiler holds each table below to its type), and every method works against a real
 * `chatmem serve` (its OpenAI door in front of a loopback upstream).
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import {
  type AssistantMessage,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionRequest,
  type ChatMessage,
  ChatmemClient,
  ChatmemError,
  type Choice,
  type Cleared,
  type ClearToolResults,
  type ChunkChoice,
  type CompletionUsage,
  type ConversationPage,
  type ErrorBody,
  type ErrorDetail,
  type FunctionCall,
  type Health,
  type HistoryPage,
  type Message,
  type Model,
  type ModelList,
  type PageParams,
  type Policy,
  type PostMessages,
  type Prompt,
  type PromptRequest,
  type Recall,
  type Recalled,
  type RecallHit,
  type RecallOutcome,
  type Role,
  type ToolCall,
  type Window,
} from "chatmem";

import { type Server, startServer, stores, uniqueId } from "./support/server.js";
import { startUpstream, type Upstream } from "./support/upstream.js";

// ---------------------------------------------------------------------------------------------
// Tables the compiler checks against the client's types

/** Every named key of `T` (index signatures left out). */
type NamedKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: 0 };
/** The named keys of `T` a value must have. */
type RequiredKeys<T> = keyof { [K in NamedKeys<T> as {} extends Pick<T, K> ? never : K]: 0 };
/** `[]` when `K` lists all of `All`, else the missing keys (a compile error at the call). */
type Missing<All, K extends readonly unknown[]> = [Exclude<All, K[number]>] extends [never] ? unknown : { missing: Exclude<All, K[number]> };

/** `T`'s fields: `required` exactly its required keys, `named` exactly all its keys. */
function fields<T>() {
  return <const R extends readonly RequiredKeys<T>[], const N extends readonly NamedKeys<T>[]>(
    required: R & Missing<RequiredKeys<T>, R>,
    named: N & Missing<NamedKeys<T>, N>,
  ) => ({ required: [...required] as string[], named: [...named] as string[] });
}

/** Each schema of `/openapi.json` and the client type that reads or writes it. */
const SCHEMAS = {
  Health: fields<Health>()(["status"], ["status"]),
  Window: fields<Window>()(["conversation", "messages"], ["conversation", "messages"]),
  HistoryPage: fields<HistoryPage>()(["conversation", "messages"], ["conversation", "messages", "next_cursor"]),
  ConversationPage: fields<ConversationPage>()(["conversations"], ["conversations", "next_cursor"]),
  Error: fields<ErrorBody>()(["error"], ["error"]),
  ErrorDetail: fields<ErrorDetail>()(["code", "message", "type"], ["code", "message", "type", "param", "request_id"]),
  Message: fields<Message>()(
    ["role"],
    ["role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "is_error", "metadata"],
  ),
  ToolCall: fields<ToolCall>()(["id", "type", "function"], ["id", "type", "function"]),
  FunctionCall: fields<FunctionCall>()(["name", "arguments"], ["name", "arguments"]),
  PostMessages: fields<PostMessages>()(["messages"], ["messages", "policy", "user"]),
  PromptRequest: fields<PromptRequest>()(["messages"], ["messages", "policy", "user"]),
  Prompt: fields<Prompt>()(
    ["conversation", "messages", "tokens", "already_stored", "cleared", "recalled"],
    ["conversation", "messages", "tokens", "already_stored", "cleared", "recalled"],
  ),
  Recalled: fields<Recalled>()(["seqs", "tokens"], ["seqs", "tokens"]),
  Recall: fields<Recall>()(
    ["conversation", "enabled", "k", "hits", "injected_tokens"],
    ["conversation", "enabled", "k", "hits", "injected", "injected_tokens"],
  ),
  RecallHit: fields<RecallHit>()(
    ["seq", "role", "message", "score", "relevance", "fused", "outcome"],
    ["seq", "role", "content", "message", "score", "relevance", "lexical_rank", "vector_rank", "similarity", "fused", "at", "outcome"],
  ),
  Cleared: fields<Cleared>()(["results", "inputs", "tokens_saved"], ["results", "inputs", "tokens_saved"]),
  Policy: fields<Policy>()([], ["max_messages", "max_tokens", "tokenizer", "evict_to", "boundary", "clear_tool_results"]),
  ClearToolResults: fields<ClearToolResults>()([], ["keep", "trigger_tokens", "clear_at_least_tokens", "exclude_tools", "clear_inputs"]),
  ChatMessage: fields<ChatMessage>()(["role"], ["role", "content", "name", "tool_calls", "tool_call_id"]),
  ChatCompletionRequest: fields<ChatCompletionRequest>()(
    ["model", "messages"],
    ["model", "messages", "n", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "response_format", "tools", "tool_choice"],
  ),
  ChatCompletion: fields<ChatCompletion>()(
    ["id", "object", "created", "model", "choices"],
    ["id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier"],
  ),
  Choice: fields<Choice>()(["index", "message"], ["index", "message", "finish_reason", "logprobs"]),
  AssistantMessage: fields<AssistantMessage>()(["role"], ["role", "content", "tool_calls", "refusal", "reasoning_content", "annotations"]),
  CompletionUsage: fields<CompletionUsage>()(
    ["prompt_tokens", "completion_tokens", "total_tokens"],
    ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"],
  ),
  ChatCompletionChunk: fields<ChatCompletionChunk>()(["id", "object", "created", "model", "choices"], ["id", "object", "created", "model", "choices", "usage"]),
  ChunkChoice: fields<ChunkChoice>()(["index", "delta"], ["index", "delta", "finish_reason", "logprobs"]),
  Model: fields<Model>()(["id", "object"], ["id", "object", "created", "owned_by"]),
  ModelList: fields<ModelList>()(["object", "data"], ["object", "data"]),
};

/** Every path and method of `/openapi.json`, and the client method that calls it. */
const ROUTES = {
  "GET /healthz": "healthz",
  "GET /metrics": "metrics",
  "GET /openapi.json": "openapi",
  "GET /v1/conversations": "listConversations",
  "DELETE /v1/conversations/{id}": "deleteConversation",
  "GET /v1/conversations/{id}/messages": "getMessages",
  "POST /v1/conversations/{id}/messages": "postMessages",
  "POST /v1/conversations/{id}/prompt": "prompt",
  "GET /v1/conversations/{id}/recall": "recall",
  "GET /v1/conversations/{id}/history": "getHistory",
  "POST /v1/chat/completions": "chatCompletion",
  "GET /v1/models": "models",
  "GET /v1/users/{user}/facts": "listFacts",
  "POST /v1/users/{user}/facts": "addFact",
  "DELETE /v1/users/{user}/facts": "forgetUser",
  "PATCH /v1/users/{user}/facts/{fact}": "editFact",
  "DELETE /v1/users/{user}/facts/{fact}": "deleteFact",
  "GET /v1/users/{user}/facts/{fact}/history": "factHistory",
} as const satisfies Record<string, keyof ChatmemClient>;

/** The query parameters each route takes, as the client's parameter types name them. */
const QUERIES = {
  "GET /v1/conversations": fields<PageParams>()([], ["cursor", "limit"]).named,
  "GET /v1/conversations/{id}/history": fields<PageParams>()([], ["cursor", "limit"]).named,
  // `recall(id, q, k?)`.
  "GET /v1/conversations/{id}/recall": ["q", "k"],
  // Clearing's fields are flat in a query: `clear_tool_results.keep`.
  "GET /v1/conversations/{id}/messages": [
    ...SCHEMAS.Policy.named.filter((n) => n !== "clear_tool_results"),
    ...SCHEMAS.ClearToolResults.named.map((n) => `clear_tool_results.${n}`),
  ],
};

const ROLES = ["system", "developer", "user", "assistant", "tool"] as const satisfies readonly Role[];
const OUTCOMES = ["injected", "below_threshold", "past_k", "over_budget", "without_its_call"] as const satisfies readonly RecallOutcome[];

// ---------------------------------------------------------------------------------------------

interface Operation {
  parameters?: Array<{ name: string; in: string }>;
}
interface Spec {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { required?: string[]; properties?: Record<string, unknown>; enum?: string[] }> };
}

describe("the client against /openapi.json", () => {
  let server: Server;
  let spec: Spec;
  before(async () => {
    server = await startServer("sqlite:");
    spec = (await new ChatmemClient({ baseUrl: server.url }).openapi()) as unknown as Spec;
  });
  after(() => server?.stop());

  test("every path and method has a client method", () => {
    const listed = Object.entries(spec.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    assert.deepEqual(listed.sort(), Object.keys(ROUTES).sort());
    for (const method of Object.values(ROUTES)) {
      assert.equal(typeof ChatmemClient.prototype[method], "function", method);
    }
  });

  test("the query parameters are the client's", () => {
    for (const [route, names] of Object.entries(QUERIES)) {
      const [method, path] = route.split(" ") as [string, string];
      const query = spec.paths[path]![method.toLowerCase()]!.parameters!.filter((p) => p.in === "query").map((p) => p.name);
      assert.deepEqual(query.sort(), [...names].sort(), route);
    }
  });

  test("the client's types have the schemas' required fields, and no field the schema lacks", () => {
    for (const [name, { required, named }] of Object.entries(SCHEMAS)) {
      const schema = spec.components.schemas[name];
      assert.ok(schema, `no schema ${name}`);
      assert.deepEqual([...(schema.required ?? [])].sort(), [...required].sort(), `${name}: required`);
      const unknown = named.filter((f) => !(f in (schema.properties ?? {})));
      assert.deepEqual(unknown, [], `${name}: fields the schema does not have`);
    }
    assert.deepEqual(spec.components.schemas.Role!.enum, [...ROLES]);
    assert.deepEqual(spec.components.schemas.RecallOutcome!.enum, [...OUTCOMES]);
  });
});

for (const store of stores()) {
  describe(`every client method over ${store.name}`, { skip: store.skip }, () => {
    let upstream: Upstream;
    let server: Server;
    let client: ChatmemClient;
    before(async () => {
      upstream = await startUpstream();
      // A tenant of its own: the listing below sees this run's conversations only, however
      // many other runs and tests left in a shared PostgreSQL database.
      const token = { token: `tok-${randomUUID()}`, tenant: `ts-api-${randomUUID().slice(0, 8)}` };
      server = await startServer(store.url, { tokens: [token], args: ["--upstream-base-url", upstream.baseUrl] });
      client = new ChatmemClient({ baseUrl: server.url, token: token.token });
    });
    after(async () => {
      await server?.stop();
      await upstream?.stop();
    });

    test("healthz, metrics, openapi", async () => {
      assert.deepEqual(await client.healthz(), { status: "ok" });
      assert.match(await client.metrics(), /^# (HELP|TYPE) /m);
      assert.match(await client.metrics({ openMetrics: true }), /# EOF\n?$/);
      assert.equal((await client.openapi()).openapi, "3.1.0");
    });

    test("a user's facts: add, list, edit and pin, history, delete, forget", async () => {
      const user = uniqueId("ada/1");
      assert.deepEqual(await client.listFacts(user), { facts: [], version: 0 });
      const city = await client.addFact(user, "Lives in Berlin", "home.city");
      assert.equal(city.text, "Lives in Berlin");
      assert.equal(city.key, "home.city");
      assert.equal(city.pinned, false);
      const tea = await client.addFact(user, "Likes green tea");
      assert.equal(tea.key, null);
      const moved = await client.addFact(user, "Lives in Hamburg", "home.city");
      assert.notEqual(moved.id, city.id, "a key supersedes: a new fact");
      const pinned = await client.editFact(user, tea.id, { text: "Likes black tea", pinned: true });
      assert.equal(pinned.text, "Likes black tea");
      assert.equal(pinned.pinned, true);
      const listed = await client.listFacts(user);
      assert.deepEqual(
        listed.facts.map((f) => f.text),
        ["Likes black tea", "Lives in Hamburg"],
        "pinned first, then by key",
      );
      assert.ok(listed.version > 0);
      const kinds = (await client.factHistory(user, city.id)).history.map((e) => e.kind);
      assert.deepEqual(kinds, ["added", "superseded"]);
      await client.deleteFact(user, moved.id);
      assert.deepEqual((await client.listFacts(user)).facts.map((f) => f.id), [tea.id]);
      await assert.rejects(client.factHistory(user, moved.id), (e: unknown) => e instanceof ChatmemError && e.status === 404);
      await client.forgetUser(user);
      assert.deepEqual((await client.listFacts(user)).facts, []);
    });

    test("post, window, history by pages, list by pages, delete", async () => {
      const id = uniqueId("user/42");
      const posted = await client.postMessages(id, [
        { role: "system", content: "sys" },
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
      ]);
      assert.deepEqual(posted, {
        conversation: id,
        messages: [
          { role: "system", content: "sys" },
          { role: "user", content: "one" },
          { role: "assistant", content: "two" },
        ],
      });
      await client.postMessages(id, [{ role: "user", content: "three" }]);
      assert.deepEqual(
        (await client.getMessages(id, { max_messages: 2 })).messages.map((m) => m.content),
        ["sys", "three"],
      );
      const first = await client.getHistory(id, { limit: 2 });
      assert.equal(first.conversation, id);
      assert.ok(first.next_cursor, "a next page");
      const all = [];
      for await (const m of client.history(id, { limit: 1 })) all.push(m.content);
      assert.deepEqual(all, ["sys", "one", "two", "three"]);

      const other = uniqueId("user/43");
      await client.postMessages(other, [{ role: "user", content: "x" }]);
      const ids = [];
      for await (const c of client.conversations({ limit: 1 })) ids.push(c);
      assert.ok(ids.includes(id) && ids.includes(other), "both ids listed, `/` kept");
      const page = await client.listConversations({ limit: 1 });
      assert.equal(page.conversations.length, 1);

      await client.deleteConversation(id);
      await assert.rejects(client.getMessages(id), { name: "ChatmemError", status: 404, code: "not_found" });
      await assert.rejects(client.deleteConversation(id), { status: 404, code: "not_found" });
    });

    test("a policy with clearing: the window sends placeholders, history the originals", async () => {
      const id = uniqueId("agent");
      const result = (n: number) => JSON.stringify({ order: n, lines: Array.from({ length: 30 }, (_, i) => ({ sku: `SKU-${n}-${i}`, qty: i })) });
      const turn: Message[] = [{ role: "user", content: "Where are my orders?" }];
      for (const n of [1, 2]) {
        turn.push({ role: "assistant", content: null, tool_calls: [{ id: `call_${n}`, type: "function", function: { name: "get_order", arguments: "{}" } }] });
        turn.push({ role: "tool", tool_call_id: `call_${n}`, content: result(n) });
      }
      const policy: Policy = { clear_tool_results: { keep: 1, trigger_tokens: 10, exclude_tools: ["other", "another"] } };
      const window = await client.postMessages(id, turn, policy);
      assert.match(String(window.messages[2]!.content), /^\[cleared: get_order result for call call_1, \d+ tokens\]$/);
      assert.equal(window.messages[4]!.content, result(2));
      const read = await client.getMessages(id, { clear_tool_results: { ...policy.clear_tool_results, clear_inputs: true } });
      assert.equal(read.messages[1]!.tool_calls![0]!.function.arguments, "{}");
      assert.match(String(read.messages[2]!.content), /^\[cleared: /);
      assert.equal((await client.getMessages(id)).messages[2]!.content, result(1));
      assert.equal((await client.getHistory(id)).messages[2]!.content, result(1));
      await assert.rejects(client.getMessages(id, { clear_tool_results: { keep: 0 } }), (e: ChatmemError) => {
        assert.equal(e.status, 400);
        assert.match(e.message, /clear_tool_results\.keep/);
        return true;
      });
    });

    test("the prompt dry run: what the door sends, clearing shown, nothing committed", async () => {
      const id = uniqueId("dry/run");
      const result = (n: number) => JSON.stringify({ order: n, lines: Array.from({ length: 30 }, (_, i) => ({ sku: `SKU-${n}-${i}`, qty: i })) });
      const turn: Message[] = [{ role: "system", content: "You track orders." }, { role: "user", content: "Where are my orders?" }];
      for (const n of [1, 2]) {
        turn.push({ role: "assistant", content: null, tool_calls: [{ id: `call_${n}`, type: "function", function: { name: "get_order", arguments: "{}" } }] });
        turn.push({ role: "tool", tool_call_id: `call_${n}`, content: result(n) });
      }
      turn.push({ role: "assistant", content: "Both ship today.", reasoning_content: "looked them up" });
      await client.postMessages(id, turn);
      const ask: Message = { role: "user", content: "And the first one?" };
      const plain = await client.prompt(id, [ask]);
      assert.equal(plain.conversation, id);
      assert.deepEqual(plain.messages.at(-1), ask);
      assert.equal(plain.messages.length, turn.length + 1);
      assert.ok(plain.messages.every((m) => m.reasoning_content === undefined), "never reasoning text");
      assert.deepEqual(plain.cleared, { results: 0, inputs: 0, tokens_saved: 0 });
      assert.equal(plain.already_stored, 0);
      const cleared = await client.prompt(id, [...turn, ask], { clear_tool_results: { keep: 1, trigger_tokens: 10 } });
      assert.equal(cleared.already_stored, turn.length - 1, "the stored messages resent are left out");
      assert.equal(cleared.cleared.results, 1);
      assert.ok(cleared.cleared.tokens_saved > 0 && cleared.tokens < plain.tokens);
      assert.match(String(cleared.messages[3]!.content), /^\[cleared: get_order result for call call_1, \d+ tokens\]$/);
      assert.equal((await client.getHistory(id)).messages.length, turn.length, "nothing committed");
      assert.equal((await client.getHistory(id)).messages[3]!.content, result(1));
      // The door then sends what the dry run showed.
      await client.chatCompletion(id, { model: "fake-model", messages: [ask] });
      assert.deepEqual(upstream.requests.at(-1)!.messages, plain.messages);
      // A conversation that does not exist yet: the prompt is the new messages.
      assert.deepEqual((await client.prompt(uniqueId("nobody"), [ask])).messages, [ask]);
      await assert.rejects(client.prompt(id, [{ role: "wizard" as unknown as Role, content: "x" }]), (e: ChatmemError) => {
        assert.equal(e.status, 400);
        assert.match(e.message, /messages\[0\]\.role/);
        return true;
      });
    });

    test("the OpenAI door: a completion and a stream, with memory", async () => {
      const id = uniqueId("door");
      const answer = await client.chatCompletion(id, { model: "fake-model", messages: [{ role: "user", content: "order LC202610060018" }] });
      assert.equal(answer.choices[0]!.message.content, "echo: order LC202610060018");
      const chunks = [];
      for await (const chunk of client.streamChatCompletion(id, { model: "fake-model", messages: [{ role: "user", content: "refund?" }] })) {
        chunks.push(chunk);
      }
      assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), "echo: refund?");
      // The second call reached the upstream with the first turn from memory.
      assert.deepEqual(
        upstream.requests.at(-1)!.messages.map((m) => m.content),
        ["order LC202610060018", "echo: order LC202610060018", "refund?"],
      );
      const stored = (await client.getHistory(id)).messages.map((m) => [m.role, m.content]);
      assert.deepEqual(stored, [
        ["user", "order LC202610060018"],
        ["assistant", "echo: order LC202610060018"],
        ["user", "refund?"],
        ["assistant", "echo: refund?"],
      ]);
      assert.deepEqual((await client.models()).data.map((m) => m.id), ["fake-model"]);
    });

    test("ids `.` and `..` are refused before sending (fetch would drop them from the path)", async () => {
      for (const id of [".", ".."]) {
        assert.throws(() => client.getMessages(id), (e: unknown) => e instanceof ChatmemError && e.code === "invalid_request" && e.status === 0);
      }
    });
  });
}
