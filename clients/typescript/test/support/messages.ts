/**
 * Test support: fast-check arbitraries of LangChain.js messages of every kind (human, AI, system,
 * tool, chat messages of any role; string content or lists of text, image, reasoning, tool-call,
 * file, audio and provider blocks; unicode, nested JSON in every field), conversations chatmem's
 * window keeps whole, and a field-by-field comparison of two messages.
 */

import assert from "node:assert/strict";

import {
  AIMessage,
  AIMessageChunk,
  type BaseMessage,
  BaseMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
} from "@langchain/core/messages";
import fc from "fast-check";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = Record<string, unknown>;

/** Strings: any code point (no lone surrogates: JSON text cannot carry them), graphemes, and a few that matter. */
export const text: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 12 }),
  fc.constantFrom("", " ", "我的订单 LC202610060018 还没发货", "👍🏽🇨🇳", "a\u0000b", "line\r\nbreak", '"\\', "__proto__", "null"),
);

/** A non-empty string. */
export const nonEmpty: fc.Arbitrary<string> = text.filter((s) => s.length > 0);

/** JSON values as JSON can say them (`-0` is `0` in JSON text: normalized here, tested on its own). */
export const json: fc.Arbitrary<Json> = fc
  .jsonValue({ maxDepth: 3, stringUnit: "binary" })
  .map((v) => JSON.parse(JSON.stringify(v)) as Json);

/** JSON objects. */
export const jsonObject: fc.Arbitrary<Record<string, Json>> = fc.dictionary(text, json, { maxKeys: 4 }).map((v) => JSON.parse(JSON.stringify(v)) as Record<string, Json>);

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

/** An object of `fields`, leaving out those that came out undefined. */
function record(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Obj> {
  return fc.record(fields).map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)));
}

const base64 = fc.base64String({ maxLength: 16 });

/** Content blocks of every kind LangChain.js produces or accepts, and providers' own. */
export const block: fc.Arbitrary<Obj> = fc.oneof(
  fc.record({ type: fc.constant("text"), text }),
  record({ type: fc.constant("text"), text, id: opt(text), annotations: opt(fc.array(jsonObject, { maxLength: 2 })), cache_control: opt(fc.constant({ type: "ephemeral" })) }),
  fc.record({ type: fc.constant("image_url"), image_url: fc.oneof(text, record({ url: text, detail: opt(fc.constantFrom("low", "high", "auto")) })) }),
  record({ type: fc.constant("image"), url: text, metadata: opt(fc.constant({ detail: "low" })) }),
  fc.record({ type: fc.constant("image"), source_type: fc.constant("base64"), mime_type: fc.constantFrom("image/png", "image/jpeg"), data: base64 }),
  fc.record({ type: fc.constant("image"), mimeType: fc.constant("image/webp"), data: base64 }),
  fc.record({ type: fc.constant("image"), fileId: text }),
  record({ type: fc.constant("reasoning"), reasoning: text, id: opt(text), extras: opt(jsonObject) }),
  record({ type: fc.constant("thinking"), thinking: text, signature: opt(base64) }),
  fc.record({ type: fc.constant("tool_call"), id: nonEmpty, name: nonEmpty, args: jsonObject }),
  fc.record({ type: fc.constant("tool_use"), id: nonEmpty, name: nonEmpty, input: jsonObject }),
  fc.record({ type: fc.constant("file"), source_type: fc.constant("base64"), mime_type: fc.constant("application/pdf"), data: base64, metadata: fc.record({ filename: nonEmpty }) }),
  fc.record({ type: fc.constant("file"), file: record({ file_data: fc.constant("data:application/pdf;base64,JVBERi0="), filename: opt(text) }) }),
  fc.record({ type: fc.constant("audio"), source_type: fc.constant("base64"), mime_type: fc.constantFrom("audio/wav", "audio/mp3", "audio/ogg"), data: base64 }),
  fc.record({ type: fc.constant("input_audio"), input_audio: fc.record({ data: base64, format: fc.constantFrom("wav", "mp3") }) }),
  fc.record({ type: fc.constant("refusal"), refusal: text }),
  // A provider's own block: any type, any fields.
  fc.tuple(text, jsonObject).map(([type, fields]) => ({ ...fields, type })),
);

/** Content: a string, or a list of blocks (possibly empty). */
export const content: fc.Arbitrary<string | Obj[]> = fc.oneof(text, fc.array(block, { maxLength: 5 }));

const common = {
  name: opt(text),
  id: opt(text),
  additional_kwargs: fc.oneof(jsonObject, record({ reasoning_content: opt(text), extra: opt(json) })),
  response_metadata: jsonObject,
};

/** A LangChain tool call (its `type` given or not). */
export const toolCall = record({ name: nonEmpty, args: jsonObject, id: opt(text), type: opt(fc.constant("tool_call" as const)) });
const invalidToolCall = record({ name: opt(text), args: opt(text), id: opt(text), error: opt(text), type: fc.constant("invalid_tool_call" as const) });
const usage = record({
  input_tokens: fc.nat(),
  output_tokens: fc.nat(),
  total_tokens: fc.nat(),
  input_token_details: opt(record({ cache_read: opt(fc.nat()), audio: opt(fc.nat()) })),
  output_token_details: opt(record({ reasoning: opt(fc.nat()) })),
});

/** `make(fields)`, or the chunk class's, as fast-check chooses: streaming makes chunks. */
function either(fields: fc.Arbitrary<Obj>, make: (f: never) => BaseMessage, chunk: (f: never) => BaseMessage): fc.Arbitrary<BaseMessage> {
  return fc.tuple(fields, fc.boolean()).map(([f, isChunk]) => (isChunk ? chunk(f as never) : make(f as never)));
}

export const human: fc.Arbitrary<BaseMessage> = either(
  record({ content, ...common }),
  (f) => new HumanMessage(f),
  (f) => new HumanMessageChunk(f),
);
export const system: fc.Arbitrary<BaseMessage> = either(
  record({ content, ...common, additional_kwargs: fc.oneof(jsonObject, fc.constant({ __openai_role__: "developer" })) }),
  (f) => new SystemMessage(f),
  (f) => new SystemMessageChunk(f),
);

const toolCallChunk = record({ name: opt(text), args: opt(text), id: opt(text), index: opt(fc.nat(3)), type: fc.constant("tool_call_chunk") });

/** An AI message; `calls` its tool calls (default: any). */
export function ai(calls: fc.Arbitrary<Obj[]> = fc.array(toolCall, { maxLength: 3 })): fc.Arbitrary<BaseMessage> {
  const fields = fc
    .tuple(
      record({
        content,
        ...common,
        response_metadata: fc.oneof(jsonObject, fc.constant({ output_version: "v1", model_provider: "openai" })),
        invalid_tool_calls: opt(fc.array(invalidToolCall, { maxLength: 2 })),
        usage_metadata: opt(usage),
      }),
      calls,
    )
    .map(([f, tool_calls]) => ({ ...f, tool_calls }));
  return fc.oneof(
    either(fields, (f) => new AIMessage(f), (f) => new AIMessageChunk(f)),
    // A streamed answer's chunk with tool-call chunks (its tool calls are parsed from them).
    fc.tuple(fields, fc.array(toolCallChunk, { minLength: 1, maxLength: 3 })).map(([f, tool_call_chunks]) => new AIMessageChunk({ ...(f as object), tool_call_chunks } as never)),
  );
}

/** A tool message; `callId` the id of the call it answers (default: any). */
export function tool(callId: fc.Arbitrary<string> = nonEmpty): fc.Arbitrary<BaseMessage> {
  return either(
    record({
      content,
      ...common,
      tool_call_id: callId,
      status: opt(fc.constantFrom("success" as const, "error" as const)),
      artifact: opt(json),
      metadata: opt(jsonObject),
    }),
    (f) => new ToolMessage(f),
    (f) => new ToolMessageChunk(f),
  );
}

/** A chat message of any role, the roles chatmem has among them. */
const chatFields = record({
  content,
  ...common,
  role: fc.oneof(fc.constantFrom("user", "assistant", "system", "developer", "tool", "ai", "human", "critic"), text),
});
export const chat: fc.Arbitrary<BaseMessage> = either(
  chatFields,
  (f) => new ChatMessage(f),
  (f) => new ChatMessageChunk(f),
);

/** Any message. */
export const message: fc.Arbitrary<BaseMessage> = fc.oneof(human, system, ai(), tool(), chat);

const roleOf = (m: BaseMessage) => (m instanceof ChatMessage ? m.role : m.type);
/** Whether chatmem takes `m` as the conversation's system message (it holds the system slot). */
const isSystem = (m: BaseMessage) => ["system", "developer"].includes(roleOf(m));

/**
 * A conversation chatmem's window keeps whole: a human message first, then human, AI, chat and
 * tool messages, each AI message's tool calls (ids unique in the conversation) answered by tool
 * messages right after it; and, maybe, a system message (system or developer) first.
 */
export const conversation: fc.Arbitrary<BaseMessage[]> = fc
  .tuple(
    opt(fc.oneof(system, chat.filter(isSystem))),
    human,
    fc.array(
      fc.oneof(
        human.map((m) => [m]),
        chat.filter((m) => !isSystem(m) && roleOf(m) !== "tool").map((m) => [m]),
        fc.tuple(ai(fc.array(toolCall, { maxLength: 3 })), fc.array(tool(), { maxLength: 3 })).map(([a, results]) => [a, ...results]),
      ),
      { maxLength: 5 },
    ),
  )
  .map(([sys, first, turns]) => {
    // Tool calls get ids of their own (a window drops a result whose call it cannot find), and
    // one result each, after their message.
    let n = 0;
    const messages: BaseMessage[] = sys ? [sys, first] : [first];
    for (const turn of turns) {
      const [head, ...results] = turn;
      if (!(head instanceof AIMessage) || head.tool_calls === undefined) {
        messages.push(head!);
        continue;
      }
      // A call with no name is left out of the body (nothing can answer it): named here.
      const calls = head.tool_calls.map((c) => ({ ...c, name: c.name || "f", id: `call_${++n}` }));
      const rebuilt = new AIMessage({
        content: head.content,
        name: head.name,
        id: head.id,
        additional_kwargs: head.additional_kwargs,
        // The v1 output copies tool calls into the content, ids included: not for this rebuild.
        response_metadata: head.response_metadata.output_version === "v1" ? {} : head.response_metadata,
        tool_calls: calls,
        invalid_tool_calls: head.invalid_tool_calls,
        usage_metadata: head.usage_metadata,
      });
      messages.push(rebuilt);
      for (const [i, call] of calls.entries()) {
        const template = results[i % Math.max(results.length, 1)] as ToolMessage | undefined;
        messages.push(
          new ToolMessage({
            content: template?.content ?? "ok",
            tool_call_id: call.id,
            ...(template ? { id: template.id, name: template.name, status: template.status, artifact: template.artifact, additional_kwargs: template.additional_kwargs } : {}),
          }),
        );
      }
    }
    return messages;
  });

/** `value` with undefined object properties left out, as JSON has them. */
function defined(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(defined);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, defined(v)]));
  }
  return value;
}

/** The fields a message of `type` has (LangChain.js names). */
function fieldsOf(type: string): string[] {
  const base = ["content", "name", "id", "additional_kwargs", "response_metadata"];
  if (type === "ai") return [...base, "tool_calls", "invalid_tool_calls", "usage_metadata", "tool_call_chunks"];
  if (type === "tool") return [...base, "tool_call_id", "artifact", "status", "metadata"];
  if (type === "generic") return [...base, "role"];
  return base;
}

/** Asserts that `actual` is `expected`, field by field, of the same class (a chunk reads back as one). */
export function assertSameMessage(actual: BaseMessage, expected: BaseMessage, where = "message"): void {
  assert.equal(actual.type, expected.type, `${where}: type`);
  const classes = { human: HumanMessage, ai: AIMessage, system: SystemMessage, tool: ToolMessage, generic: ChatMessage } as const;
  const cls = classes[expected.type as keyof typeof classes];
  assert.ok(cls.isInstance(actual), `${where}: a ${cls.name}`);
  assert.equal(BaseMessageChunk.isInstance(actual), BaseMessageChunk.isInstance(expected), `${where}: a chunk, as it was written`);
  for (const field of fieldsOf(expected.type)) {
    const a: unknown = (actual as unknown as Obj)[field];
    const e: unknown = (expected as unknown as Obj)[field];
    assert.deepStrictEqual(defined(a), defined(e), `${where}.${field}`);
  }
}
