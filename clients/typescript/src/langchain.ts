/**
 * LangChain.js on chatmem: {@link ChatmemChatMessageHistory}, a `BaseListChatMessageHistory`
 * over `chatmem serve`, and the conversions between LangChain's messages and chatmem's.
 *
 * @example
 * ```ts
 * import { RunnableWithMessageHistory } from "@langchain/core/runnables";
 * import { ChatmemChatMessageHistory } from "chatmem/langchain";
 * const chain = new RunnableWithMessageHistory({
 *   runnable: prompt.pipe(model), inputMessagesKey: "input", historyMessagesKey: "history",
 *   getMessageHistory: (sessionId) => new ChatmemChatMessageHistory({ conversationId: sessionId }),
 * });
 * ```
 *
 * @packageDocumentation
 */

import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";

import {
  ChatmemClient,
  type ChatmemClientOptions,
  ChatmemError,
  type ContentPart,
  type Message,
  type Policy,
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

/** The `additional_kwargs` key `@langchain/openai` reads to send a system message as `developer`. */
const OPENAI_ROLE = "__openai_role__";

type Block = Record<string, unknown>;

/** The text of `content` (a string, or a list of text blocks), for a role that holds text only. */
function textOf(content: BaseMessage["content"], where: string): string {
  if (typeof content === "string") return content;
  return content
    .map((block: Block) => {
      if (block.type === "text" && typeof block.text === "string") return block.text;
      throw new UnsupportedMessageError(`${where}: a content block of type ${JSON.stringify(block.type)} (text only here)`);
    })
    .join("");
}

/** A human message's content block as a chatmem content part: text or an image. */
function partOf(block: Block, where: string): ContentPart {
  if (block.type === "text" && typeof block.text === "string") return { type: "text", text: block.text };
  if (block.type === "image_url") {
    const image = block.image_url;
    if (typeof image === "string") return { type: "image_url", image_url: { url: image } };
    if (image && typeof image === "object" && typeof (image as Block).url === "string") {
      const { url, detail } = image as { url: string; detail?: unknown };
      return { type: "image_url", image_url: typeof detail === "string" ? { url, detail } : { url } };
    }
  }
  if (block.type === "image") {
    // LangChain's standard image blocks: by URL, or base64 data with its MIME type.
    const mime = block.mime_type ?? block.mimeType;
    if (typeof block.url === "string") return { type: "image_url", image_url: { url: block.url } };
    if (typeof block.data === "string" && typeof mime === "string") {
      return { type: "image_url", image_url: { url: `data:${mime};base64,${block.data}` } };
    }
  }
  throw new UnsupportedMessageError(`${where}: a content block of type ${JSON.stringify(block.type)} (text and images only)`);
}

/**
 * A LangChain message as chatmem's: human, AI (text, tool calls, `reasoning_content`), system
 * (`developer` when `additional_kwargs.__openai_role__` says so) and tool results (an error
 * status as `is_error`). Anything else throws an {@link UnsupportedMessageError}.
 */
export function toChatmemMessage(message: BaseMessage, index = 0): Message {
  const type = message.type;
  const where = `messages[${index}] (${type})`;
  const name = message.name ? { name: message.name } : {};
  switch (type) {
    case "system": {
      const role = message.additional_kwargs?.[OPENAI_ROLE] === "developer" ? "developer" : "system";
      return { role, content: textOf(message.content, where), ...name };
    }
    case "human": {
      const { content } = message;
      if (typeof content === "string") return { role: "user", content, ...name };
      return { role: "user", content: content.map((block: Block) => partOf(block, where)), ...name };
    }
    case "ai": {
      const ai = message as AIMessage;
      const calls: ToolCall[] = (ai.tool_calls ?? []).map((call) => {
        if (!call.id) throw new UnsupportedMessageError(`${where}: a tool call without an id`);
        return { id: call.id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.args) } };
      });
      // Arguments that did not parse are kept as the model wrote them, as chatmem does.
      for (const call of ai.invalid_tool_calls ?? []) {
        if (!call.id || !call.name) throw new UnsupportedMessageError(`${where}: an invalid tool call without an id or name`);
        calls.push({ id: call.id, type: "function", function: { name: call.name, arguments: call.args ?? "" } });
      }
      const text = textOf(ai.content, where);
      const reasoning = ai.additional_kwargs?.reasoning_content;
      return {
        role: "assistant",
        ...(text !== "" || calls.length === 0 ? { content: text } : {}),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        ...(typeof reasoning === "string" ? { reasoning_content: reasoning } : {}),
        ...name,
      };
    }
    case "tool": {
      const tool = message as ToolMessage;
      if (!tool.tool_call_id) throw new UnsupportedMessageError(`${where}: a tool result without a tool_call_id`);
      return {
        role: "tool",
        tool_call_id: tool.tool_call_id,
        content: textOf(tool.content, where),
        ...(tool.status === "error" ? { is_error: true } : {}),
        ...name,
      };
    }
    default:
      throw new UnsupportedMessageError(`${where}: a message of type ${JSON.stringify(type)} (human, ai, system and tool only)`);
  }
}

/** A chatmem message as LangChain's (the inverse of {@link toChatmemMessage}). */
export function fromChatmemMessage(message: Message): BaseMessage {
  const name = message.name ?? undefined;
  const text = typeof message.content === "string" ? message.content : "";
  switch (message.role) {
    case "system":
      return new SystemMessage({ content: text, name });
    case "developer":
      return new SystemMessage({ content: text, name, additional_kwargs: { [OPENAI_ROLE]: "developer" } });
    case "user": {
      if (!Array.isArray(message.content)) return new HumanMessage({ content: text, name });
      return new HumanMessage({ content: message.content as Block[] as HumanMessage["content"], name });
    }
    case "assistant": {
      const tool_calls = [];
      const invalid_tool_calls = [];
      for (const call of message.tool_calls ?? []) {
        const { id, function: fn } = call;
        const args = parseObject(fn.arguments);
        if (args) tool_calls.push({ id, name: fn.name, args, type: "tool_call" as const });
        else invalid_tool_calls.push({ id, name: fn.name, args: fn.arguments, error: "arguments are not a JSON object", type: "invalid_tool_call" as const });
      }
      const additional_kwargs = message.reasoning_content ? { reasoning_content: message.reasoning_content } : {};
      return new AIMessage({ content: text, name, tool_calls, invalid_tool_calls, additional_kwargs });
    }
    case "tool":
      return new ToolMessage({
        content: text,
        name,
        tool_call_id: message.tool_call_id ?? "",
        status: message.is_error ? "error" : "success",
      });
  }
}

/** `text` as a JSON object, or undefined when it is not one. */
function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** What a {@link ChatmemChatMessageHistory} keeps. */
export interface ChatmemChatMessageHistoryInput {
  /** The conversation (LangChain's `sessionId`). */
  conversationId: string;
  /** The client to use (default: one made from `clientOptions`, or `CHATMEM_URL`/`CHATMEM_TOKEN`). */
  client?: ChatmemClient;
  /** Options of the client made when `client` is not given. */
  clientOptions?: ChatmemClientOptions;
  /** A window policy sent with every read and write, instead of the server's. */
  policy?: Policy;
}

/**
 * A LangChain chat message history stored by `chatmem serve`. `getMessages()` is the window the
 * model should see, not everything stored: the system message first, with the summary of what
 * left the window (`--summarize`) after its text as the server renders it (a system message of
 * its own when there is none), then the recent turns. `addMessages()` is one atomic POST.
 */
export class ChatmemChatMessageHistory extends BaseListChatMessageHistory {
  /** LangChain's serialization namespace. */
  lc_namespace = ["chatmem", "langchain"];
  /** The conversation's id. */
  readonly conversationId: string;
  /** The client the history calls. */
  readonly client: ChatmemClient;
  readonly #policy: Policy | undefined;

  /** The history of conversation `fields.conversationId`. */
  constructor(fields: ChatmemChatMessageHistoryInput) {
    super();
    this.conversationId = fields.conversationId;
    this.client = fields.client ?? new ChatmemClient(fields.clientOptions);
    this.#policy = fields.policy;
  }

  /** The window the model should see; empty for a conversation not stored yet. */
  async getMessages(): Promise<BaseMessage[]> {
    try {
      const window = await this.client.getMessages(this.conversationId, this.#policy);
      return window.messages.map(fromChatmemMessage);
    } catch (e) {
      if (e instanceof ChatmemError && e.status === 404 && e.code === "not_found") return [];
      throw e;
    }
  }

  /** Adds one message (one POST). */
  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /**
   * Adds `messages` in one atomic POST: all are stored or none. A message chatmem cannot hold
   * throws an {@link UnsupportedMessageError} before anything is sent.
   */
  override async addMessages(messages: BaseMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await this.client.postMessages(this.conversationId, messages.map(toChatmemMessage), this.#policy);
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
