/**
 * chatmem as the memory of a LangChain.js agent (`createAgent` of the `langchain` package):
 * {@link chatmemMiddleware}. For the agent's thread (a conversation id given to it, or the
 * run's `configurable.thread_id`) each model call commits the turn's messages chatmem does not
 * hold yet, sends the model chatmem's window (bounded by the policy: the system message with
 * the summary, then the recent turns) instead of the state's whole list, and commits the
 * model's answer. An answer with tool calls is committed with their results, in one atomic
 * commit at the next model call, so a stored tool call never lacks its results; what is left
 * at the end of the run (a tool that returned directly) is committed then.
 *
 * With a `user`, every commit names the conversation's user (with `chatmem serve --facts-model`
 * their messages are read for facts), and each model call is sent that user's facts (`--facts`)
 * right after the system message, as the server renders them: one human message under
 * {@link FACTS_HEADING}, read through `POST …/prompt` with the user (the window's GET carries
 * none; under a token window the window sent is then as much shorter as the prompt's, so the
 * facts never pass the budget). It is only in what the model is sent: never in the agent's
 * state, never committed.
 *
 * @example
 * ```ts
 * import { createAgent } from "langchain";
 * import { chatmemMiddleware } from "chatmem/langchain/middleware";
 * const agent = createAgent({ model, tools, systemPrompt: "You are after-sale support.", middleware: [chatmemMiddleware({ client })] });
 * await agent.invoke({ messages: [{ role: "user", content: "Can that order be refunded?" }] }, { configurable: { thread_id: "user-42" } });
 * ```
 *
 * @packageDocumentation
 */

import { AIMessage, type BaseMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { createMiddleware } from "langchain";

import { ChatmemClient, type ChatmemClientOptions, ChatmemError, type Message, type Policy } from "./client.js";
import { FACTS_HEADING, fromChatmemMessage, LANGCHAIN_KEY, toChatmemMessage, windowWithFacts } from "./langchain.js";

/** What a {@link chatmemMiddleware} keeps. */
export interface ChatmemMiddlewareOptions {
  /** The conversation (default: each run's `configurable.thread_id`). */
  conversationId?: string;
  /** The client to use (default: one made from `clientOptions`, or `CHATMEM_URL`/`CHATMEM_TOKEN`). */
  client?: ChatmemClient;
  /** Options of the client made when `client` is not given. */
  clientOptions?: ChatmemClientOptions;
  /** A window policy sent with every read and write, instead of the server's. */
  policy?: Policy;
  /**
   * The conversation's user (any id the facts routes take): sent with every commit, and each
   * model call is sent their facts (see the module's documentation). None: no facts.
   */
  user?: string;
}

/** The id chatmem's copy of `m` holds. */
function storedId(m: Message): string | undefined {
  const copy = m.metadata?.[LANGCHAIN_KEY] as { data?: { id?: unknown } } | undefined;
  return typeof copy?.data?.id === "string" ? copy.data.id : undefined;
}

/** The ids of the tool calls a message makes (empty for any but an AI message). */
function callIds(m: BaseMessage): string[] {
  return AIMessage.isInstance(m) ? (m.tool_calls ?? []).flatMap((c) => (c.id ? [c.id] : [])) : [];
}

/** Whether state message `m` is stored message `s`: the same id, role and tool calls. */
function isStored(m: BaseMessage, s: Message): boolean {
  if (m.id == null || storedId(s) !== m.id) return false;
  const roles: Record<string, string> = { human: "user", ai: "assistant", tool: "tool", system: "system", generic: s.role };
  const role = roles[m.type];
  if (s.role !== role && !(role === "system" && s.role === "developer")) return false;
  return JSON.stringify(callIds(m)) === JSON.stringify((s.tool_calls ?? []).map((c) => c.id));
}

/**
 * The messages of `messages` that `window` does not hold: those after the last one it holds
 * (all of them when it holds none, as for a new agent without a checkpointer), up to the last
 * AI message whose tool calls are not all answered after it (it waits for its results).
 */
function unstored(messages: BaseMessage[], window: Message[]): BaseMessage[] {
  let last = -1;
  for (let i = messages.length - 1; i >= 0 && last < 0; i--) {
    if (window.some((s) => isStored(messages[i]!, s))) last = i;
  }
  const pending = messages.slice(last + 1);
  for (let i = pending.length - 1; i >= 0; i--) {
    const calls = callIds(pending[i]!);
    if (calls.length === 0) continue;
    const answered = new Set(pending.slice(i + 1).flatMap((m) => (ToolMessage.isInstance(m) ? [m.tool_call_id] : [])));
    if (!calls.every((id) => answered.has(id))) return pending.slice(0, i);
    break;
  }
  return pending;
}

/** The text of content: its strings and text blocks, joined. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b: { type?: string; text?: unknown }) => (typeof b === "string" ? b : b?.type === "text" && typeof b.text === "string" ? b.text : "")).join("");
}

/** The heading under which the server renders the summary into the system message. */
const SUMMARY_HEADING = "\n\nSummary of the earlier conversation:\n";

/** Whether the window's first message is `system` as it was stored (a summary after its text aside). */
function holdsSystem(window: Message[], system: SystemMessage): boolean {
  const first = window[0];
  if (!first || (first.role !== "system" && first.role !== "developer")) return false;
  const stored = textOf(first.content);
  const text = textOf(system.content);
  return stored === text || stored.startsWith(text + SUMMARY_HEADING) || (text === "" && stored.startsWith(SUMMARY_HEADING.trimStart()));
}

/**
 * A middleware for `createAgent` that keeps the agent's conversation in chatmem (see the
 * module's documentation). The agent's system prompt is stored as the conversation's system
 * message (again when it changes). A turn whose messages do not fit the window, so that chatmem
 * evicted them as they were committed, throws a {@link ChatmemError} (`window_too_small`)
 * rather than send the model a prompt without its question; so does a run with no
 * conversation id.
 */
export function chatmemMiddleware(options: ChatmemMiddlewareOptions = {}) {
  const client = options.client ?? new ChatmemClient(options.clientOptions);
  const policy = options.policy;
  const turn = options.user === undefined ? undefined : { user: options.user };

  const conversationOf = (runtime: { configurable?: { thread_id?: unknown } } | undefined): string => {
    const id = options.conversationId ?? runtime?.configurable?.thread_id;
    if (typeof id === "string" && id !== "") return id;
    throw new ChatmemError(0, {
      code: "invalid_request",
      message: "chatmemMiddleware has no conversation: give it conversationId, or invoke the agent with configurable.thread_id",
    });
  };

  const windowOf = async (id: string): Promise<Message[]> => {
    try {
      return (await client.getMessages(id, policy)).messages;
    } catch (e) {
      if (e instanceof ChatmemError && e.status === 404 && e.code === "not_found") return [];
      throw e;
    }
  };

  /** Commits `messages` (ids given to those without one) and answers the window after it. */
  const commit = async (id: string, messages: BaseMessage[]): Promise<Message[]> => {
    for (const m of messages) {
      if (m.id == null) {
        // The id finds the message again in the state of later calls.
        m.id = globalThis.crypto.randomUUID();
        m.lc_kwargs.id = m.id;
      }
    }
    const window = (await client.postMessages(id, messages.map(toChatmemMessage), policy, turn)).messages;
    const last = messages.at(-1);
    if (last && !window.some((s) => isStored(last, s))) {
      throw new ChatmemError(0, {
        code: "window_too_small",
        message:
          `conversation ${JSON.stringify(id)}: the turn's messages do not fit the window (policy ${JSON.stringify(policy ?? "the server's")}), ` +
          "so chatmem evicted them as they were stored; give the window room for a whole turn",
      });
    }
    return window;
  };

  return createMiddleware({
    name: "ChatmemMemory",
    wrapModelCall: async (request, handler) => {
      const id = conversationOf(request.runtime);
      let window = await windowOf(id);
      const pending = unstored(request.messages, window);
      const system = request.systemMessage;
      const batch = system && textOf(system.content) !== "" && !holdsSystem(window, system) ? [system, ...pending] : pending;
      if (batch.length > 0) window = await commit(id, batch);

      let seen = window.map(fromChatmemMessage);
      if (turn) {
        // The window as committed keeps every message's LangChain copy; the prompt's bodies do
        // not, so only the facts message (and the room it takes) is taken from it.
        const { window: kept, facts } = windowWithFacts(window, await client.prompt(id, [], policy, turn));
        if (facts) {
          seen = kept.map(fromChatmemMessage);
          seen.splice(seen[0] && SystemMessage.isInstance(seen[0]) ? 1 : 0, 0, fromChatmemMessage(facts));
        }
      }
      const first = seen[0];
      const response = await handler({
        ...request,
        ...(first && SystemMessage.isInstance(first) ? { systemMessage: first, messages: seen.slice(1) } : { messages: seen }),
      });
      // An answer of tool calls waits for their results; an answer without is stored now.
      if (AIMessage.isInstance(response) && callIds(response).length === 0) await commit(id, [response]);
      return response;
    },
    afterAgent: async (state, runtime) => {
      const id = conversationOf(runtime);
      const pending = unstored(state.messages, await windowOf(id));
      if (pending.length > 0) await commit(id, pending);
      return undefined;
    },
  });
}
