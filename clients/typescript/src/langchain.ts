/**
 * LangChain.js on chatmem: {@link ChatmemChatMessageHistory}, a `BaseListChatMessageHistory`
 * over `chatmem serve`, and the conversions between LangChain's messages and chatmem's
 * ({@link toChatmemMessage}, {@link fromChatmemMessage}).
 *
 * A LangChain message is stored as two things, the same way the Python package stores it (a
 * message written by one reads back in the other):
 *
 * - the message body: the OpenAI projection the model should see. The role (`human` → `user`,
 *   `ai` → `assistant`, `system` → `system`, or `developer` when
 *   `additional_kwargs.__openai_role__` says so, `tool` → `tool`, a `ChatMessage` by its role,
 *   one chatmem has no role for as `user`); the content as a string, or as parts: text blocks as
 *   text parts, images as `image_url` parts and audio or files as OpenAI's `input_audio` and
 *   `file` parts (user messages only); blocks a role cannot hold (reasoning, tool calls in
 *   content, provider blocks) are left out of the body. An AI message's reasoning (its
 *   `additional_kwargs.reasoning_content`, else the text of its reasoning blocks) becomes
 *   `reasoning_content`, which chatmem stores and never sends to a model; its tool calls with an
 *   id and a name become `tool_calls`; a tool message's `tool_call_id`, and `status: "error"` as
 *   `is_error`.
 * - `metadata.langchain = {type, data}`: the message itself, `type` as Python's
 *   `message_to_dict` names it (`human`, `ai`, `system`, `tool`, `chat`) and `data` with the
 *   field names of its `data` (`content`, `additional_kwargs`, `response_metadata`, `type`,
 *   `name`, `id`, `tool_calls`, `invalid_tool_calls`, `usage_metadata`, `tool_call_id`,
 *   `artifact`, `status`, `role`). Fields the body already holds exactly are left out (the
 *   content when the body's reproduces it, the tool calls when the body's parse back to them,
 *   the name, the tool call id); empty `additional_kwargs` and `response_metadata` too.
 *   Every value must be JSON (a function, a class instance, `NaN`, a `bigint` throws an
 *   {@link UnsupportedMessageError} naming the field); `-0` reads back as `0`.
 *
 * Reading, a message with `metadata.langchain` is rebuilt from it, what it leaves out taken from
 * the body. Where the copy's content does not project to the body's (the server renders the
 * summary into the system message's content), the body's content wins. A message without the copy (written
 * by another client, or the server's system message holding the summary alone) is converted
 * from the body.
 *
 * @example
 * ```ts
 * import { RunnableWithMessageHistory } from "@langchain/core/runnables";
 * import { ChatmemChatMessageHistory } from "chatmem/langchain";
 * const chain = new RunnableWithMessageHistory({
 *   runnable: prompt.pipe(model), inputMessagesKey: "input", historyMessagesKey: "history",
 *   getMessageHistory: (sessionId) => new ChatmemChatMessageHistory({ conversationId: sessionId, client }),
 * });
 * ```
 *
 * @packageDocumentation
 */

import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import {
  AIMessage,
  AIMessageChunk,
  type BaseMessage,
  BaseMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  type InvalidToolCall,
  SystemMessage,
  SystemMessageChunk,
  type ToolCall as LangChainToolCall,
  type ToolCallChunk,
  ToolMessage,
  ToolMessageChunk,
} from "@langchain/core/messages";

import {
  ChatmemClient,
  type ChatmemClientOptions,
  ChatmemError,
  type ContentPart,
  type Message,
  type Policy,
  type Prompt,
  type Role,
  type ToolCall,
} from "./client.js";

/** A LangChain message that chatmem cannot hold (nothing was sent). */
export class UnsupportedMessageError extends Error {
  /** `what` is the message's place and what about it is unsupported. */
  constructor(what: string) {
    super(`chatmem cannot hold ${what}`);
    this.name = "UnsupportedMessageError";
  }
}

/** The key of `metadata` that holds LangChain's copy of a message. */
export const LANGCHAIN_KEY = "langchain";

/** The `additional_kwargs` key `@langchain/openai` reads to send a system message as `developer`. */
const OPENAI_ROLE = "__openai_role__";

type Block = Record<string, unknown>;
type Content = BaseMessage["content"];

/** LangChain's copy of a message, as `metadata.langchain` holds it. */
export interface LangChainCopy {
  /** `human`, `ai`, `system`, `tool` or `chat` (Python's `message_to_dict` names). */
  type: string;
  /** The message's fields under Python's names; what the body holds exactly may be left out. */
  data: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// JSON values

/** Throws an {@link UnsupportedMessageError} unless `value` is JSON (undefined properties aside). */
function checkJson(value: unknown, where: string, seen: Set<object> = new Set()): void {
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) throw new UnsupportedMessageError(`${where}: the number ${value} (JSON has no such number)`);
      return;
    case "object": {
      if (value === null) return;
      if (seen.has(value)) throw new UnsupportedMessageError(`${where}: a cycle (JSON values only)`);
      seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || value[i] === undefined) throw new UnsupportedMessageError(`${where}[${i}]: undefined in an array (JSON values only)`);
          checkJson(value[i], `${where}[${i}]`, seen);
        }
      } else {
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          const kind = (value as { constructor?: { name?: string } }).constructor?.name ?? "object";
          throw new UnsupportedMessageError(`${where}: a ${kind} (JSON values only)`);
        }
        for (const [key, item] of Object.entries(value)) {
          if (item !== undefined) checkJson(item, `${where}.${key}`, seen);
        }
      }
      seen.delete(value);
      return;
    }
    default:
      throw new UnsupportedMessageError(`${where}: a ${typeof value} (JSON values only)`);
  }
}

/** Structural equality of JSON values; an undefined property is an absent one. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bs = b as unknown[];
    return a.length === bs.length && a.every((x, i) => same(x, bs[i]));
  }
  const ea = Object.entries(a).filter(([, v]) => v !== undefined);
  const eb = Object.entries(b).filter(([, v]) => v !== undefined);
  const bb = b as Record<string, unknown>;
  return ea.length === eb.length && ea.every(([k, v]) => Object.prototype.hasOwnProperty.call(b, k) && same(v, bb[k]));
}

const isObject = (v: unknown): v is Block => typeof v === "object" && v !== null && !Array.isArray(v);
const isEmptyObject = (v: unknown) => isObject(v) && Object.values(v).every((x) => x === undefined);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

// ---------------------------------------------------------------------------------------------
// LangChain → chatmem

/** A text part of `block` (a string or a `text` block), or undefined. */
function textPart(block: unknown): ContentPart | undefined {
  if (typeof block === "string") return { type: "text", text: block };
  if (isObject(block) && block.type === "text" && typeof block.text === "string") return { type: "text", text: block.text };
  return undefined;
}

// An empty string counts as none in these lookups, as in the Python package's.

/** The MIME type of a standard data block (`mime_type`, or `mimeType` in LangChain's v1 blocks). */
const mimeOf = (block: Block) => str(block.mime_type) || str(block.mimeType) || undefined;

/** A standard block's base64 data (`data`, or `base64` as Python's v1 blocks name it). */
const dataOf = (block: Block) => str(block.data) || str(block.base64) || undefined;

/**
 * A user message's content block as OpenAI's part: text, an image (an `image_url` block, or a
 * standard `image` block by URL or base64), audio (OpenAI's `input_audio`, or a standard `audio`
 * block of WAV or MP3 data) or a file (OpenAI's `file`, or a standard `file` block of base64 data
 * with a filename). Anything else is undefined: it is left out of what the model sees.
 */
function userPart(block: unknown): ContentPart | undefined {
  const text = textPart(block);
  if (text || !isObject(block)) return text;
  const meta = isObject(block.metadata) ? block.metadata : {};
  const extras = isObject(block.extras) ? block.extras : {};
  switch (block.type) {
    case "image_url": {
      const image = block.image_url;
      if (typeof image === "string") return { type: "image_url", image_url: { url: image } };
      if (isObject(image) && typeof image.url === "string") {
        const detail = str(image.detail);
        return { type: "image_url", image_url: detail === undefined ? { url: image.url } : { url: image.url, detail } };
      }
      return undefined;
    }
    case "image": {
      const detail = str(meta.detail) || str(extras.detail) || str(block.detail) || undefined;
      const data = dataOf(block);
      const mime = mimeOf(block);
      const url = str(block.url) || (data && mime ? `data:${mime};base64,${data}` : undefined);
      if (url === undefined) return undefined;
      return { type: "image_url", image_url: detail === undefined ? { url } : { url, detail } };
    }
    case "input_audio": {
      const audio = block.input_audio;
      if (isObject(audio) && typeof audio.data === "string" && typeof audio.format === "string") {
        return { type: "input_audio", input_audio: { data: audio.data, format: audio.format } };
      }
      return undefined;
    }
    case "audio": {
      const data = dataOf(block);
      const format = { "audio/wav": "wav", "audio/x-wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3" }[mimeOf(block) ?? ""];
      return data !== undefined && format ? { type: "input_audio", input_audio: { data, format } } : undefined;
    }
    case "file": {
      if (isObject(block.file)) {
        const file: Block = {};
        for (const key of ["file_data", "file_id", "filename"]) if (str(block.file[key])) file[key] = block.file[key];
        return file.file_data !== undefined || file.file_id !== undefined ? { type: "file", file } : undefined;
      }
      if (str(block.file_id)) return { type: "file", file: { file_id: block.file_id } };
      const data = dataOf(block);
      const mime = mimeOf(block);
      const filename = [block.filename, extras.filename, meta.filename].find((n): n is string => typeof n === "string");
      if (data === undefined || !mime || filename === undefined) return undefined;
      return { type: "file", file: { file_data: `data:${mime};base64,${data}`, filename } };
    }
    default:
      return undefined;
  }
}

/** An assistant's part: text, or OpenAI's refusal. */
function assistantPart(block: unknown): ContentPart | undefined {
  const text = textPart(block);
  if (text) return text;
  if (isObject(block) && block.type === "refusal" && typeof block.refusal === "string") return { type: "refusal", refusal: block.refusal };
  return undefined;
}

/** The body's content for `content`: a string as it is, a list as the parts `part` keeps. */
function projectContent(content: Content, part: (block: unknown) => ContentPart | undefined): string | ContentPart[] {
  if (typeof content === "string") return content;
  return (content as unknown[]).map(part).filter((p): p is ContentPart => p !== undefined);
}

/**
 * An assistant's content: text or parts; none beside tool calls when empty (as OpenAI writes a
 * tool-call message, and as another client's reads back), else "" for empty parts.
 */
function assistantContent(parts: string | ContentPart[], hasCalls: boolean): string | ContentPart[] | undefined {
  if (parts.length > 0) return parts;
  return hasCalls ? undefined : typeof parts === "string" ? parts : "";
}

/** The body's content of `role` for LangChain content `content` (undefined: none). */
function contentFor(role: Role, content: unknown, hasCalls: boolean): string | ContentPart[] | undefined {
  if (typeof content !== "string" && !Array.isArray(content)) return undefined;
  const c = content as Content;
  if (role === "user") return projectContent(c, userPart);
  if (role === "assistant") return assistantContent(projectContent(c, assistantPart), hasCalls);
  return projectContent(c, textPart);
}

/** An AI message's reasoning: `additional_kwargs.reasoning_content`, else its reasoning blocks' text. */
function reasoningOf(message: BaseMessage): string | undefined {
  const kwarg = message.additional_kwargs?.reasoning_content;
  if (typeof kwarg === "string") return kwarg;
  if (typeof message.content === "string") return undefined;
  const texts = (message.content as unknown[]).flatMap((block) => {
    if (!isObject(block)) return [];
    if (block.type === "reasoning" && typeof block.reasoning === "string") return [block.reasoning];
    if (block.type === "thinking" && typeof block.thinking === "string") return [block.thinking];
    return [];
  });
  return texts.length > 0 ? texts.join("") : undefined;
}

/** The chatmem role a `ChatMessage`'s role is shown to the model as. */
function chatRole(role: string): Role {
  switch (role) {
    case "assistant":
    case "ai":
      return "assistant";
    case "system":
      return "system";
    case "developer":
      return "developer";
    default:
      return "user";
  }
}

/**
 * Python's `message_to_dict` type of `message`: `human`, `ai`, `system`, `tool`, `chat`, or a
 * chunk's class name (`AIMessageChunk`, ...), which reads back as a chunk.
 */
function copyType(message: BaseMessage): string {
  if (BaseMessageChunk.isInstance(message)) return (message.constructor as { lc_name?: () => string }).lc_name?.() ?? message.type;
  return message.type === "generic" ? "chat" : message.type;
}

/** The body (the OpenAI projection) of `message`, without metadata. */
function project(message: BaseMessage, where: string): Message {
  const type = message.type;
  let role: Role;
  if (type === "human") role = "user";
  else if (type === "ai") role = "assistant";
  else if (type === "tool") role = "tool";
  else if (type === "system") role = message.additional_kwargs?.[OPENAI_ROLE] === "developer" ? "developer" : "system";
  else if (type === "generic") {
    const r = (message as ChatMessage).role;
    if (typeof r !== "string") throw new UnsupportedMessageError(`${where}.role: a ${typeof r} (a string)`);
    role = chatRole(r);
  } else {
    throw new UnsupportedMessageError(`${where}: a message of type ${JSON.stringify(type)} (human, ai, system, tool and chat messages only)`);
  }
  const out: Message = { role };
  const content = message.content as unknown;
  if (typeof content !== "string" && !Array.isArray(content)) {
    throw new UnsupportedMessageError(`${where}.content: a ${content === null ? "null" : typeof content} (a string or a list of blocks)`);
  }
  if (role === "user") out.content = projectContent(message.content, userPart);
  else if (role === "assistant") {
    const parts = projectContent(message.content, assistantPart);
    const calls: ToolCall[] = [];
    for (const call of type === "ai" ? ((message as AIMessage).tool_calls ?? []) : []) {
      // A call without an id or a name cannot be answered: kept in the copy, not shown.
      if (typeof call.id === "string" && call.id !== "" && typeof call.name === "string" && call.name !== "") {
        calls.push({ id: call.id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) } });
      }
    }
    const content = assistantContent(parts, calls.length > 0);
    if (content !== undefined) out.content = content;
    if (calls.length > 0) out.tool_calls = calls;
    const reasoning = reasoningOf(message);
    if (reasoning !== undefined) out.reasoning_content = reasoning;
  } else {
    out.content = projectContent(message.content, textPart);
  }
  if (type === "tool") {
    const tool = message as ToolMessage;
    if (typeof tool.tool_call_id !== "string" || tool.tool_call_id === "") {
      throw new UnsupportedMessageError(`${where}.tool_call_id: a tool result without the id of the call it answers`);
    }
    out.tool_call_id = tool.tool_call_id;
    if (tool.status === "error") out.is_error = true;
  }
  if (typeof message.name === "string") out.name = message.name;
  else if (message.name != null) throw new UnsupportedMessageError(`${where}.name: a ${typeof message.name} (a string)`);
  return out;
}

/**
 * A LangChain message as chatmem stores it: the body the model should see, and the message
 * itself in `metadata.langchain` (see the module's documentation). A message chatmem cannot
 * hold (a function message, a `RemoveMessage`, a value that is not JSON, a tool result without
 * its call's id) throws an {@link UnsupportedMessageError} naming the field. `index` only names
 * the message in errors.
 */
export function toChatmemMessage(message: BaseMessage, index = 0): Message {
  const where = `messages[${index}] (${message.type})`;
  const type = message.type;
  checkJson(message.content, `${where}.content`);
  if (type === "ai") checkJson((message as AIMessage).tool_calls ?? [], `${where}.tool_calls`);
  const body = project(message, where);
  const data: Record<string, unknown> = { type: copyType(message) };
  const put = (field: string, value: unknown) => {
    checkJson(value, `${where}.${field}`);
    data[field] = value;
  };
  const back = fromBody(body);
  if (!same(back.content, message.content)) put("content", message.content);
  if (!isEmptyObject(message.additional_kwargs ?? {})) put("additional_kwargs", message.additional_kwargs);
  if (!isEmptyObject(message.response_metadata ?? {})) put("response_metadata", message.response_metadata);
  if (message.id != null) put("id", message.id);
  if (type === "ai") {
    const ai = message as AIMessage;
    const backAi = back as AIMessage;
    const calls = ai.tool_calls ?? [];
    if (!same(backAi.tool_calls, calls)) put("tool_calls", calls);
    if ((ai.invalid_tool_calls ?? []).length > 0) put("invalid_tool_calls", ai.invalid_tool_calls);
    if (ai.usage_metadata !== undefined) put("usage_metadata", ai.usage_metadata);
    const chunks = (message as AIMessageChunk).tool_call_chunks;
    if (Array.isArray(chunks) && chunks.length > 0) put("tool_call_chunks", chunks);
  } else if (type === "tool") {
    const tool = message as ToolMessage;
    if (tool.artifact !== undefined) put("artifact", tool.artifact);
    // `is_error` says "error"; "success" and no status at all need the copy to tell apart.
    if (tool.status !== undefined && tool.status !== "error") put("status", tool.status);
    if (tool.metadata !== undefined) put("metadata", tool.metadata);
  } else if (type === "generic") {
    put("role", (message as ChatMessage).role);
  }
  return { ...body, metadata: { [LANGCHAIN_KEY]: { type: copyType(message), data: structuredClone(data) } } };
}

// ---------------------------------------------------------------------------------------------
// chatmem → LangChain

/** The body's content as LangChain content of `role`: parts become blocks as they are. */
function contentOf(message: Message): Content {
  const content = message.content;
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  return content.map((part) => ({ ...part })) as Content;
}

/** `text` as a JSON object, or undefined when it is not one. */
function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The body's tool calls as LangChain's: arguments that are not a JSON object as invalid calls. */
function callsOf(message: Message): { tool_calls: LangChainToolCall[]; invalid_tool_calls: InvalidToolCall[] } {
  const tool_calls: LangChainToolCall[] = [];
  const invalid_tool_calls: InvalidToolCall[] = [];
  for (const { id, function: fn } of message.tool_calls ?? []) {
    const args = parseObject(fn.arguments);
    if (args) tool_calls.push({ id, name: fn.name, args, type: "tool_call" });
    else invalid_tool_calls.push({ id, name: fn.name, args: fn.arguments, error: "arguments are not a JSON object", type: "invalid_tool_call" });
  }
  return { tool_calls, invalid_tool_calls };
}

/** A message converted from its body alone. */
function fromBody(message: Message): BaseMessage {
  const name = message.name ?? undefined;
  const content = contentOf(message);
  switch (message.role) {
    case "system":
      return new SystemMessage({ content, name });
    case "developer":
      return new SystemMessage({ content, name, additional_kwargs: { [OPENAI_ROLE]: "developer" } });
    case "user":
      return new HumanMessage({ content, name });
    case "assistant": {
      const additional_kwargs = typeof message.reasoning_content === "string" ? { reasoning_content: message.reasoning_content } : {};
      return new AIMessage({ content, name, ...callsOf(message), additional_kwargs });
    }
    case "tool":
      return new ToolMessage({ content, name, tool_call_id: message.tool_call_id ?? "", status: message.is_error ? "error" : "success" });
  }
}

/** The `metadata.langchain` of `message`, when it is a copy this module can read. */
function copyOf(message: Message): LangChainCopy | undefined {
  const copy = message.metadata?.[LANGCHAIN_KEY];
  if (!isObject(copy) || typeof copy.type !== "string" || !isObject(copy.data)) return undefined;
  return { type: copy.type, data: copy.data };
}

/** A message rebuilt from its copy, what the copy leaves out taken from the body. */
function fromCopy(message: Message, copy: LangChainCopy): BaseMessage | undefined {
  // A copy of its own: LangChain's constructors change what they are given.
  const data = structuredClone(copy.data);
  const body = fromBody(message);
  const has = (field: string) => Object.prototype.hasOwnProperty.call(data, field) && data[field] !== null;
  // The body's content wins when the copy's does not project to it (a summary rendered into it).
  const projected = has("content") ? contentFor(message.role, data.content, (message.tool_calls ?? []).length > 0) : undefined;
  const content = has("content") && same(projected, message.content ?? undefined) ? (data.content as Content) : body.content;
  const fields = {
    content,
    name: message.name ?? str(data.name),
    id: str(data.id),
    additional_kwargs: (isObject(data.additional_kwargs) ? data.additional_kwargs : {}) as Record<string, unknown>,
    response_metadata: (isObject(data.response_metadata) ? data.response_metadata : {}) as Record<string, unknown>,
  };
  const chunk = copy.type.endsWith("MessageChunk");
  switch (chunk ? copy.type.slice(0, -"MessageChunk".length).toLowerCase() : copy.type) {
    case "human":
      return chunk ? new HumanMessageChunk(fields) : new HumanMessage(fields);
    case "system":
      return chunk ? new SystemMessageChunk(fields) : new SystemMessage(fields);
    case "ai": {
      const bodyAi = body as AIMessage;
      const tool_calls = has("tool_calls") ? (data.tool_calls as LangChainToolCall[]) : bodyAi.tool_calls;
      const invalid = has("invalid_tool_calls") ? (data.invalid_tool_calls as InvalidToolCall[]) : has("tool_calls") ? [] : bodyAi.invalid_tool_calls;
      const usage = has("usage_metadata") ? { usage_metadata: data.usage_metadata as AIMessage["usage_metadata"] } : {};
      const ai = { ...fields, tool_calls, invalid_tool_calls: invalid, ...usage };
      if (!chunk) return new AIMessage(ai);
      const chunks = has("tool_call_chunks") ? { tool_call_chunks: data.tool_call_chunks as ToolCallChunk[] } : {};
      return new AIMessageChunk({ ...ai, ...chunks });
    }
    case "tool": {
      const status: "success" | "error" | undefined = data.status === "success" || data.status === "error" ? data.status : message.is_error ? "error" : undefined;
      const tool = {
        ...fields,
        tool_call_id: message.tool_call_id ?? str(data.tool_call_id) ?? "",
        ...(status === undefined ? {} : { status }),
        ...(Object.prototype.hasOwnProperty.call(data, "artifact") ? { artifact: data.artifact } : {}),
      };
      if (chunk) return new ToolMessageChunk(tool);
      return new ToolMessage({ ...tool, ...(has("metadata") ? { metadata: data.metadata as Record<string, unknown> } : {}) });
    }
    case "chat":
    case "generic": {
      const chat = { ...fields, role: str(data.role) ?? message.role };
      return chunk ? new ChatMessageChunk(chat) : new ChatMessage(chat);
    }
    default:
      return undefined;
  }
}

/**
 * A chatmem message as LangChain's: rebuilt from `metadata.langchain` when it has one (see the
 * module's documentation), else converted from the body (system and developer messages as
 * system messages, `reasoning_content` as `additional_kwargs.reasoning_content`, tool calls
 * whose arguments are not a JSON object as invalid tool calls, `is_error` as status "error").
 */
export function fromChatmemMessage(message: Message): BaseMessage {
  const copy = copyOf(message);
  return (copy && fromCopy(message, copy)) ?? fromBody(message);
}

// ---------------------------------------------------------------------------------------------
// A user's facts

/** The first line of the message a user's facts are sent in (the server's `FACTS_HEADING`). */
export const FACTS_HEADING = "What is known about the user (kept across conversations):";

const isSystem = (m: Message | undefined) => m?.role === "system" || m?.role === "developer";

/**
 * The facts message of `prompt` (an empty turn's `POST …/prompt` for the user) and the part of
 * `window` (the conversation's window, with each message's LangChain copy) that the prompt
 * sends with it; `facts` undefined and `window` whole when the prompt has no facts message.
 *
 * The server sends the facts message right after the system message, under
 * {@link FACTS_HEADING}; under a token window it leaves room for it by sending fewer of the
 * oldest messages, so the window keeps as many of its newest as the prompt sends (what recall
 * adds aside), and the facts never make it pass the budget. A message of the window at the
 * facts' place that reads the same is the conversation's own, not the facts message; and the
 * facts are left out rather than leave none of the window.
 */
export function windowWithFacts(window: Message[], prompt: Prompt): { window: Message[]; facts?: Message } {
  const at = isSystem(prompt.messages[0]) ? 1 : 0;
  const m = prompt.messages[at];
  if (!m || m.role !== "user" || typeof m.content !== "string" || !m.content.startsWith(`${FACTS_HEADING}\n`)) return { window };
  const head = isSystem(window[0]) ? 1 : 0;
  const own = window[head];
  if (own && own.role === "user" && own.content === m.content) return { window };
  const body = window.slice(head);
  const sent = prompt.messages.length - at - 1 - (prompt.recalled.seqs.length > 0 ? 1 : 0);
  if (sent <= 0 && body.length > 0) return { window };
  return { window: [...window.slice(0, head), ...body.slice(Math.max(body.length - sent, 0))], facts: { role: "user", content: m.content } };
}

// ---------------------------------------------------------------------------------------------
// The history

/** A write that failed, not yet reported by a read. */
interface FailedWrite {
  messages: number;
  error: unknown;
}

/** The failed writes of each client, by conversation: every history over a client sees them. */
const failedWrites = new WeakMap<ChatmemClient, Map<string, FailedWrite>>();

/** The client of histories given neither a client nor client options, by `CHATMEM_URL`/`CHATMEM_TOKEN`. */
const defaultClients = new Map<string, ChatmemClient>();

function defaultClient(): ChatmemClient {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
  const key = JSON.stringify([env.CHATMEM_URL ?? "", env.CHATMEM_TOKEN ?? ""]);
  let client = defaultClients.get(key);
  if (!client) {
    client = new ChatmemClient();
    defaultClients.set(key, client);
  }
  return client;
}

/**
 * A {@link ChatmemError} for a write that failed earlier and was not stored, thrown by the next
 * read of the conversation: LangChain's `RunnableWithMessageHistory` adds a turn from a callback
 * whose errors it only logs, so this is where its caller learns of it. `status` and `code` are
 * the failed write's (0 and its name when it was not a {@link ChatmemError}); `cause` is its error.
 */
export class UnstoredWriteError extends ChatmemError {
  /** The conversation the write was for. */
  readonly conversationId: string;
  /** How many messages the write held (none of them was stored). */
  readonly messages: number;

  constructor(conversationId: string, failed: FailedWrite) {
    const e = failed.error;
    const status = e instanceof ChatmemError ? e.status : 0;
    const code = e instanceof ChatmemError ? e.code : e instanceof Error ? e.name : "error";
    const why = e instanceof Error ? e.message : String(e);
    super(
      status,
      {
        code,
        message:
          `an earlier write of ${failed.messages} message${failed.messages === 1 ? "" : "s"} to conversation ` +
          `${JSON.stringify(conversationId)} was not stored (none of it is in chatmem): ${why}`,
        ...(e instanceof ChatmemError && e.requestId !== undefined ? { request_id: e.requestId } : {}),
      },
      { cause: e },
    );
    this.name = "UnstoredWriteError";
    this.conversationId = conversationId;
    this.messages = failed.messages;
  }
}

/** What a {@link ChatmemChatMessageHistory} keeps. */
export interface ChatmemChatMessageHistoryInput {
  /** The conversation (LangChain's `sessionId`). */
  conversationId: string;
  /**
   * The client to use (default: one made from `clientOptions`, or else one shared client from
   * `CHATMEM_URL`/`CHATMEM_TOKEN`). Histories over the same client share what failed writes
   * they have not reported yet.
   */
  client?: ChatmemClient;
  /** Options of the client made when `client` is not given. */
  clientOptions?: ChatmemClientOptions;
  /** A window policy sent with every read and write, instead of the server's. */
  policy?: Policy;
  /**
   * The conversation's user (any id the facts routes take), sent with every write and every
   * {@link ChatmemChatMessageHistory.getPromptMessages}: the turns are theirs (with
   * `chatmem serve --facts-model` their messages are read for facts), and the prompt has their
   * facts (`--facts`). `getMessages()` never holds the facts message.
   */
  user?: string;
  /**
   * Called with the error and the messages when a write fails, before `addMessages` throws
   * (which `RunnableWithMessageHistory` only logs).
   */
  onError?: (error: unknown, messages: BaseMessage[]) => void;
}

/**
 * A LangChain chat message history stored by `chatmem serve`. `getMessages()` is the window the
 * model should see, not everything stored: the system message first, with the summary of what
 * left the window (`--summarize`) after its text as the server renders it (a system message of
 * its own when there is none), then the recent turns. `addMessages()` is one atomic POST.
 *
 * With a `user`, every write names the conversation's user, and {@link getPromptMessages} (a
 * dry run through `POST …/prompt`) is what the model should be sent with that user's facts.
 * `getMessages()` stays the window without them (a GET carries no user): LangChain reads it
 * back as what is stored (`RunnableWithMessageHistory` counts it to tell the history it
 * prepended from the new input, and code that reads and writes messages back would store a
 * facts message as the user's own), so the facts message is never in it and never written.
 *
 * A write that fails throws; it is also remembered, and the next `getMessages()` of the
 * conversation (through any history over the same client) throws an {@link UnstoredWriteError}
 * saying so, once, unless a later write succeeded first. `RunnableWithMessageHistory` stores a
 * turn from a listener whose errors it only logs: this is how its caller learns the turn is lost.
 */
export class ChatmemChatMessageHistory extends BaseListChatMessageHistory {
  /** LangChain's serialization namespace. */
  lc_namespace = ["chatmem", "langchain"];
  /** The conversation's id. */
  readonly conversationId: string;
  /** The client the history calls. */
  readonly client: ChatmemClient;
  /** The conversation's user, sent with every write and prompt (undefined: none). */
  readonly user: string | undefined;
  readonly #policy: Policy | undefined;
  readonly #onError: ChatmemChatMessageHistoryInput["onError"];

  /** The history of conversation `fields.conversationId`. */
  constructor(fields: ChatmemChatMessageHistoryInput) {
    super();
    this.conversationId = fields.conversationId;
    this.client = fields.client ?? (fields.clientOptions ? new ChatmemClient(fields.clientOptions) : defaultClient());
    this.user = fields.user;
    this.#policy = fields.policy;
    this.#onError = fields.onError;
  }

  /** The turn options naming the history's user, if it has one. */
  #turn(): { user: string } | undefined {
    return this.user === undefined ? undefined : { user: this.user };
  }

  /** Throws an {@link UnstoredWriteError} for a write of the conversation that failed since the last read. */
  #reportFailed(): void {
    const failed = this.#failed().get(this.conversationId);
    if (failed) {
      this.#failed().delete(this.conversationId);
      throw new UnstoredWriteError(this.conversationId, failed);
    }
  }

  #failed(): Map<string, FailedWrite> {
    let map = failedWrites.get(this.client);
    if (!map) {
      map = new Map();
      failedWrites.set(this.client, map);
    }
    return map;
  }

  /**
   * The window the model should see, the user's facts aside (see the class; they come through
   * {@link getPromptMessages}); empty for a conversation not stored yet. Throws an
   * {@link UnstoredWriteError} if a write of the conversation failed since the last read.
   */
  async getMessages(): Promise<BaseMessage[]> {
    this.#reportFailed();
    try {
      const window = await this.client.getMessages(this.conversationId, this.#policy);
      return window.messages.map(fromChatmemMessage);
    } catch (e) {
      if (e instanceof ChatmemError && e.status === 404 && e.code === "not_found") return [];
      throw e;
    }
  }

  /**
   * What the next model call would be sent if `messages` were said now (none: the prompt as
   * it stands), as `POST …/prompt` answers it with the history's policy and user: the system
   * message with the summary, the user's facts (`chatmem serve --facts`) in one human message
   * under {@link FACTS_HEADING}, the window (old tool results cleared as the policy says), what
   * recall finds for the new messages, then `messages`. Nothing is committed: add the turn
   * with `addMessages` after the model answered. The messages are the bodies the model is
   * sent, converted (no LangChain copies: no ids, no `additional_kwargs` beyond reasoning);
   * the facts message is not one of the conversation's, so it is never to be added back.
   * Throws an {@link UnstoredWriteError} as `getMessages()` does.
   */
  async getPromptMessages(messages: BaseMessage[] = []): Promise<BaseMessage[]> {
    this.#reportFailed();
    const prompt = await this.client.prompt(this.conversationId, messages.map(toChatmemMessage), this.#policy, this.#turn());
    return prompt.messages.map(fromChatmemMessage);
  }

  /** Adds one message (one POST). */
  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /**
   * Adds `messages` in one atomic POST: all are stored or none. A message chatmem cannot hold
   * throws an {@link UnsupportedMessageError} before anything is sent. A failed write throws,
   * and is reported again by the next `getMessages()` (see the class).
   */
  override async addMessages(messages: BaseMessage[]): Promise<void> {
    if (messages.length === 0) return;
    try {
      await this.client.postMessages(this.conversationId, messages.map(toChatmemMessage), this.#policy, this.#turn());
    } catch (e) {
      this.#failed().set(this.conversationId, { messages: messages.length, error: e });
      this.#onError?.(e, messages);
      throw e;
    }
    this.#failed().delete(this.conversationId);
  }

  /** Deletes the conversation: window, history and summary (nothing to do if there is none). */
  override async clear(): Promise<void> {
    try {
      await this.client.deleteConversation(this.conversationId);
    } catch (e) {
      if (!(e instanceof ChatmemError && e.status === 404 && e.code === "not_found")) throw e;
    }
  }
}
