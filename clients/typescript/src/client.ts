/**
 * A typed client for `chatmem serve`: every REST route of its `/openapi.json`, over `fetch`,
 * with no runtime dependencies.
 *
 * @example
 * ```ts
 * import { ChatmemClient } from "chatmem";
 * const chatmem = new ChatmemClient({ baseUrl: "http://127.0.0.1:8080" });
 * await chatmem.postMessages("user-42", [{ role: "user", content: "Order LC202610060018 hasn't shipped." }]);
 * const { messages } = await chatmem.getMessages("user-42"); // the window the model sees
 * ```
 *
 * @packageDocumentation
 */

// ---------------------------------------------------------------------------------------------
// Messages

/** Who wrote a message (`developer` is the system message under OpenAI's newer name). */
export type Role = "system" | "developer" | "user" | "assistant" | "tool";

/** A text part of a user message. */
export interface TextPart {
  /** `text`. */
  type: "text";
  /** The text. */
  text: string;
}

/** An image part of a user message: a URL or a `data:` URL. */
export interface ImageUrlPart {
  /** `image_url`. */
  type: "image_url";
  /** The URL, and the provider's detail hint (`low`, `high`, `auto`). */
  image_url: { url: string; detail?: string };
}

/**
 * One part of a message's content: text (every role), an image or another type (a user's
 * `input_audio`, `file`, ..., stored as they came), a refusal (an assistant's).
 */
export type ContentPart = TextPart | ImageUrlPart | RefusalPart | { type: string; [field: string]: unknown };

/** An assistant's refusal to answer, as a content part. */
export interface RefusalPart {
  type: "refusal";
  /** What the model said instead of answering. */
  refusal: string;
}

/** The function a tool call calls. */
export interface FunctionCall {
  /** The function's name. */
  name: string;
  /** Its arguments, as JSON text (as the model wrote it, not parsed). */
  arguments: string;
}

/** One tool call of an assistant message. */
export interface ToolCall {
  /** The call's id, which the tool result names in `tool_call_id`. */
  id: string;
  /** `function`. */
  type: "function";
  /** The function and its arguments. */
  function: FunctionCall;
}

/**
 * A message in OpenAI's Chat Completions shape plus chatmem's own fields, as the server reads
 * and writes it: a field that is absent is left out of answers.
 */
export interface Message {
  /** Who wrote it. */
  role: Role;
  /** Text or parts; absent or null on an assistant's tool calls. */
  content?: string | ContentPart[] | null;
  /** The participant's name. */
  name?: string | null;
  /** An assistant's tool calls. */
  tool_calls?: ToolCall[];
  /** The call a tool result answers. */
  tool_call_id?: string | null;
  /** Reasoning text (DeepSeek's): kept in memory, never sent to a model. */
  reasoning_content?: string | null;
  /** A tool result that reports a failure. */
  is_error?: boolean | null;
  /** Application data kept with the message, never sent to a model. */
  metadata?: Record<string, unknown> | null;
}

// ---------------------------------------------------------------------------------------------
// Requests and answers of the memory routes

/**
 * A window policy for one request instead of the server's (not stored: send it with every
 * request that wants it). A field left out is the server's.
 */
export interface Policy {
  /** At most this many messages in the window, the system message included. */
  max_messages?: number;
  /** At most this many tokens in the window; not with `max_messages`. */
  max_tokens?: number;
  /** The token counter: `cl100k` (default), `o200k` or `heuristic`. */
  tokenizer?: "cl100k" | "cl100k_base" | "o200k" | "o200k_base" | "heuristic";
  /** Block eviction: once over the budget, evict until this many (below the budget) fit. */
  evict_to?: number;
  /** Where the window may start: `user` (default) or `pair-safe`. */
  boundary?: "user" | "pair-safe";
  /** Old tool results cleared from the prompt, never from memory. */
  clear_tool_results?: ClearToolResults;
}

/**
 * Old tool results cleared from the prompt, never from memory: each is sent as a placeholder
 * naming the tool, the call and its size in tokens, except the `keep` most recent tool uses. A
 * field left out is the server's, or the default.
 */
export interface ClearToolResults {
  /** The most recent tool uses kept whole (1 to 1000; default 3). */
  keep?: number;
  /** Clear only once the window, uncleared, would exceed this many tokens. */
  trigger_tokens?: number;
  /** Clear in blocks that save at least this many tokens each (default 0: one at a time). */
  clear_at_least_tokens?: number;
  /** Tools whose results are never cleared. */
  exclude_tools?: string[];
  /** Send the cleared calls' arguments as `{}` too. */
  clear_inputs?: boolean;
}

/** The body of `POST /v1/conversations/{id}/messages`. */
export interface PostMessages {
  /** The batch, committed atomically. */
  messages: Message[];
  /** A window policy for this request. */
  policy?: Policy;
  /** The conversation's user (any id the facts routes take): the turn is theirs, with their facts. */
  user?: string;
}

/** The body of `POST /v1/conversations/{id}/prompt`: what `POST …/messages` takes. */
export interface PromptRequest {
  /** The messages to say next (or the whole conversation resent); empty: the prompt as it stands. */
  messages: Message[];
  /** A window policy for this request. */
  policy?: Policy;
  /** The conversation's user (any id the facts routes take): the prompt has their facts. */
  user?: string;
}

/** What clearing old tool results took out of a prompt. */
export interface Cleared {
  /** Tool results sent as placeholders. */
  results: number;
  /** Calls sent with their arguments cleared (`{}`). */
  inputs: number;
  /** The tokens the window would cost uncleared, less what it costs as sent. */
  tokens_saved: number;
}

/**
 * What recall put in a prompt: the messages that left the window and came back for the new
 * user message, sent in one user message just before it.
 */
export interface Recalled {
  /** The recalled messages' sequence numbers, oldest first (empty: nothing recalled). */
  seqs: number[];
  /** The tokens of the message they are sent in (0 when nothing was recalled). */
  tokens: number;
}

/**
 * The answer of `POST /v1/conversations/{id}/prompt`: what the next model call would be sent,
 * as the OpenAI door sends it; nothing was committed.
 */
export interface Prompt {
  /** The conversation id, as the client gave it. */
  conversation: string;
  /** The system message (with the summary), the window, what recall found, the new messages. */
  messages: Message[];
  /** The prompt's tokens, by the server's counter (or the policy's tokenizer). */
  tokens: number;
  /** Of the messages given, how many the conversation already holds (left out). */
  already_stored: number;
  /** What clearing took out. */
  cleared: Cleared;
  /** What recall put in (nothing when the server does not recall). */
  recalled: Recalled;
}

/**
 * What became of a message recall found: recalled (`injected`), or cut by the relevance floor,
 * by `k`, by the token budget, or as a tool result found without its call.
 */
export type RecallOutcome = "injected" | "below_threshold" | "past_k" | "over_budget" | "without_its_call";

/** One message a recall search found, with what a turn asking the question would do with it. */
export interface RecallHit {
  /** Its sequence number (as in the history). */
  seq: number;
  /** Its role. */
  role: Role;
  /** Its text (every text part); null when it has none (an assistant's tool calls alone). */
  content?: string | null;
  /** The message, as the other routes return messages. */
  message: Message;
  /** Its BM25 score for the question. */
  score: number;
  /** Its score made comparable across questions, 0 to 1: what the relevance floor applies to. */
  relevance: number;
  /** Its place among the hits by words, from 1; null when only its vector found it. */
  lexical_rank?: number | null;
  /** Its place among the hits by vector, from 1; null without embeddings or when not found so. */
  vector_rank?: number | null;
  /** Its vector's cosine similarity with the question's, -1 to 1: what the similarity floor applies to. */
  similarity?: number | null;
  /** Its reciprocal-rank-fusion score over both rankings: what orders the hits. */
  fused: number;
  /** When it was written, RFC 3339 (null when the store did not record it). */
  at?: string | null;
  /** What a turn would do with it. */
  outcome: RecallOutcome;
}

/**
 * The answer of `GET /v1/conversations/{id}/recall`: every message recall found for a question
 * among those that left the window, best first, and the message a turn would be sent.
 */
export interface Recall {
  /** The conversation id, as the client gave it. */
  conversation: string;
  /** Whether the server's turns recall (`chatmem serve --recall K`). */
  enabled: boolean;
  /** At most this many messages are recalled. */
  k: number;
  /** Every message found, best first. */
  hits: RecallHit[];
  /** The user message the recalled ones are sent in, just before the question; null: nothing. */
  injected?: Message | null;
  /** The tokens of `injected` (0 when nothing would be recalled). */
  injected_tokens: number;
}

/** The answer of the message routes: a conversation's window. */
export interface Window {
  /** The conversation id, as the client gave it. */
  conversation: string;
  /** The system message (if any) first, then the window the model sees. */
  messages: Message[];
}

/** The answer of `GET /v1/conversations/{id}/history`: one page of everything stored. */
export interface HistoryPage {
  /** The conversation id, as the client gave it. */
  conversation: string;
  /** The system message first (on the first page), then stored messages in order. */
  messages: Message[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  next_cursor?: string | null;
}

/** The answer of `GET /v1/conversations`: a page of the tenant's conversation ids. */
export interface ConversationPage {
  /** Ids, ascending. */
  conversations: string[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  next_cursor?: string | null;
}

/** Paging of `GET /v1/conversations` and `GET …/history`. */
export interface PageParams {
  /** The previous page's `next_cursor`. */
  cursor?: string;
  /** 1 to 1000 (default 100). */
  limit?: number;
}

/** The answer of `GET /healthz`. */
export interface Health {
  /** `ok`. */
  status: string;
}

/** What went wrong, as every error body of the server carries it. */
export interface ErrorDetail {
  /** A stable machine-readable code (`invalid_request`, `not_found`, `too_large`, ...). */
  code: string;
  /** One line for people; it names the field when a request was invalid. */
  message: string;
  /** OpenAI's error type (`invalid_request_error`, `authentication_error`, ...). */
  type: string;
  /** The request field the error is about, when it names one. */
  param?: string | null;
  /** The request's id, as in the server's logs. */
  request_id?: string | null;
}

/** The JSON body of every error answer. */
export interface ErrorBody {
  /** What went wrong. */
  error: ErrorDetail;
}

// ---------------------------------------------------------------------------------------------
// The OpenAI door

/** A message of a chat-completion request (OpenAI's shape). */
export interface ChatMessage {
  /** Who wrote it. */
  role: Role;
  /** Text or parts; absent or null on an assistant message with tool calls. */
  content?: string | ContentPart[] | null;
  /** The participant's name. */
  name?: string | null;
  /** An assistant's tool calls. */
  tool_calls?: ToolCall[] | null;
  /** The call a tool result answers. */
  tool_call_id?: string | null;
}

/**
 * OpenAI's chat-completion request. chatmem reads `model`, `messages`, `stream`,
 * `stream_options` and `n`; every other field reaches the upstream as sent.
 */
export interface ChatCompletionRequest {
  /** The upstream's model, forwarded as given. */
  model: string;
  /** The turn's new messages (or the whole conversation: what memory holds is not stored twice). */
  messages: ChatMessage[];
  /** 1 (memory keeps one answer per turn). */
  n?: 1 | null;
  /** Set by the client's methods: `chatCompletion` sends false, `streamChatCompletion` true. */
  stream?: boolean | null;
  /** With a stream, `{include_usage: true}` asks for a last chunk with the usage. */
  stream_options?: { include_usage?: boolean } | null;
  /** The answer's token limit (older models). */
  max_tokens?: number | null;
  /** The answer's token limit, reasoning included (newer models). */
  max_completion_tokens?: number | null;
  /** Sampling temperature. */
  temperature?: number | null;
  /** Nucleus sampling. */
  top_p?: number | null;
  /** Up to four stop sequences. */
  stop?: string | string[] | null;
  /** `{type: "json_object"}` or `{type: "json_schema", json_schema: {...}}`. */
  response_format?: Record<string, unknown> | null;
  /** Tools the model may call (`{type: "function", function: {...}}`). */
  tools?: Record<string, unknown>[] | null;
  /** `none`, `auto`, `required`, or `{type: "function", function: {name}}`. */
  tool_choice?: unknown;
  /** Any other field of OpenAI's request, or a provider's own, forwarded unchanged. */
  [field: string]: unknown;
}

/** The model's answer in a chat completion. */
export interface AssistantMessage {
  /** `assistant`. */
  role: string;
  /** The text; null when the answer is tool calls only. */
  content?: string | null;
  /** Tools the model calls. */
  tool_calls?: ToolCall[] | null;
  /** The model's refusal, if it refused. */
  refusal?: string | null;
  /** Reasoning text (DeepSeek's). */
  reasoning_content?: string | null;
  /** Citations and the like. */
  annotations?: Record<string, unknown>[] | null;
}

/** One answer of a chat completion. */
export interface Choice {
  /** 0. */
  index: number;
  /** The answer. */
  message: AssistantMessage;
  /** `stop`, `length`, `tool_calls`, `content_filter`. */
  finish_reason?: string | null;
  /** Token log probabilities, when asked for. */
  logprobs?: Record<string, unknown> | null;
}

/** Tokens the upstream counted for a call. */
export interface CompletionUsage {
  /** Tokens of the prompt (memory's window and the new messages). */
  prompt_tokens: number;
  /** Tokens of the answer. */
  completion_tokens: number;
  /** Their sum. */
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: Record<string, unknown> | null;
}

/** OpenAI's `chat.completion` object, as the upstream sent it. */
export interface ChatCompletion {
  /** The upstream's id of the completion. */
  id: string;
  /** `chat.completion`. */
  object: string;
  /** Unix time, in seconds. */
  created: number;
  /** The model that answered. */
  model: string;
  /** One choice. */
  choices: Choice[];
  /** Tokens counted, if the upstream reported them. */
  usage?: CompletionUsage | null;
  /** The upstream's backend configuration. */
  system_fingerprint?: string | null;
  /** The tier that served the request. */
  service_tier?: string | null;
  /** Whatever else the upstream sent. */
  [field: string]: unknown;
}

/** One choice's part of a streamed chunk. */
export interface ChunkChoice {
  /** 0. */
  index: number;
  /** What this chunk adds: `role`, `content`, `tool_calls` (in pieces), ... */
  delta: Record<string, unknown>;
  finish_reason?: string | null;
  logprobs?: Record<string, unknown> | null;
}

/** One server-sent event of a streamed chat completion. */
export interface ChatCompletionChunk {
  /** The completion's id, the same in every chunk. */
  id: string;
  /** `chat.completion.chunk`. */
  object: string;
  /** Unix time, in seconds. */
  created: number;
  /** The model that answers. */
  model: string;
  /** The delta of the one choice; empty in a usage chunk. */
  choices: ChunkChoice[];
  /** Only in the last chunk, with `stream_options.include_usage`. */
  usage?: CompletionUsage | null;
  /** Whatever else the upstream sent. */
  [field: string]: unknown;
}

/** One model the upstream serves. */
export interface Model {
  /** Its name, for a request's `model`. */
  id: string;
  /** `model`. */
  object: string;
  /** Unix time, in seconds. */
  created?: number | null;
  /** Who publishes it. */
  owned_by?: string | null;
  /** Whatever else the upstream sent. */
  [field: string]: unknown;
}

/** The upstream's `GET /models` answer. */
export interface ModelList {
  /** `list`. */
  object: string;
  /** The models. */
  data: Model[];
}

// ---------------------------------------------------------------------------------------------
// The client

/** How a {@link ChatmemClient} reaches its server. */
export interface ChatmemClientOptions {
  /** The server, e.g. `http://127.0.0.1:8080` (default: `CHATMEM_URL`, else that address). */
  baseUrl?: string;
  /**
   * The bearer token of a server started with `--auth` (default: `CHATMEM_TOKEN`; `""` sends
   * none).
   */
  token?: string;
  /** How long one call may take, in milliseconds (default 30,000). */
  timeoutMs?: number;
  /**
   * How long a chat completion may take, a stream's every chunk included, in milliseconds
   * (default 600,000: the server waits up to 120 s for the upstream's answer, and as long
   * between two chunks).
   */
  completionTimeoutMs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** Per-call options. */
export interface CallOptions {
  /** This call's timeout in milliseconds, instead of the client's. */
  timeoutMs?: number;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** Per-call options of a turn: whose it is, besides {@link CallOptions}. */
export interface TurnOptions extends CallOptions {
  /**
   * The conversation's user (any id the facts routes take): with `chatmem serve --facts` the
   * turn is sent that user's facts (and with `--facts-model` their messages are read for more).
   */
  user?: string;
}

/**
 * An error answer of the server (its status and JSON error body), or a call that got no answer
 * (`status` 0, `code` `timeout` or `connection_error`, the reason as `cause`).
 */
export class ChatmemError extends Error {
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The server's machine-readable code (`invalid_request`, `not_found`, `too_large`, ...). */
  readonly code: string;
  /** The request's id (the error body's `request_id` or the `x-request-id` header), if any. */
  readonly requestId: string | undefined;
  /** OpenAI's error type, if the server gave one. */
  readonly type: string | undefined;
  /** The request field the error is about, if the server named one. */
  readonly param: string | undefined;

  /** An error of `status` with the server's `detail`. */
  constructor(status: number, detail: Partial<ErrorDetail> & { code: string; message: string }, options?: { cause?: unknown }) {
    super(detail.message, options);
    this.name = "ChatmemError";
    this.status = status;
    this.code = detail.code;
    this.requestId = detail.request_id ?? undefined;
    this.type = detail.type;
    this.param = detail.param ?? undefined;
  }
}

const DEFAULT_URL = "http://127.0.0.1:8080";
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_COMPLETION_TIMEOUT_MS = 600_000;

/** `name` from the environment, where there is one (Node, Deno, Bun; not a browser). */
function env(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value === undefined || value === "" ? undefined : value;
}

/**
 * An id as one path segment. `/` becomes `%2F`; `.` and `..` are refused, since `fetch`'s URL
 * parser would remove them as dot segments (even percent-encoded) and reach another route.
 */
function segment(id: string): string {
  if (id === "." || id === "..") {
    throw new ChatmemError(0, {
      code: "invalid_request",
      message: `conversation id ${JSON.stringify(id)} cannot be sent with fetch (a URL dot segment)`,
    });
  }
  return encodeURIComponent(id);
}

/**
 * `id` (a conversation or user id, `what` names it) as the value of `header`: its UTF-8
 * bytes, one character each (a "binary string"), since `fetch` sends each character of a
 * header value as one byte and throws on any above U+00FF; the server reads the bytes as
 * UTF-8, so an id may be any text (`订单-LC202610060018`), as in a path. An id a header cannot
 * carry as it is throws a {@link ChatmemError} (`invalid_request`, `param` the header) before
 * any request: a control character (`fetch` refuses some, the server the rest), a space or
 * tab at either end (`fetch` strips them: another id would arrive), or a lone surrogate (not
 * text UTF-8 can encode). The message never shows the id.
 */
function headerId(id: string, header: string, what: string): string {
  const refuse = (why: string) =>
    new ChatmemError(0, { code: "invalid_request", message: `${what}: ${why}`, param: header });
  if (typeof id !== "string") throw refuse(`a string, not ${typeof id}`);
  const bad = [...id].findIndex((c) => c < " " || c === "\x7f");
  if (bad >= 0) {
    throw refuse(`a control character at position ${bad}; the ${header} header cannot carry it (and no id has one)`);
  }
  if (id !== id.replace(/^[ \t]+|[ \t]+$/g, "")) {
    throw refuse(`a space or tab at either end; the ${header} header would lose it`);
  }
  if (/\p{Cs}/u.test(id)) {
    throw refuse(`a lone surrogate; the ${header} header carries UTF-8, which cannot encode it`);
  }
  let binary = "";
  for (const byte of new TextEncoder().encode(id)) binary += String.fromCharCode(byte);
  return binary;
}

/** The headers of a chat completion: its conversation, and its user when one is named. */
function doorHeaders(conversation: string, user: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    "x-chatmem-conversation": headerId(conversation, "X-Chatmem-Conversation", "conversation id"),
  };
  if (user !== undefined) headers["x-chatmem-user"] = headerId(user, "X-Chatmem-User", "user id");
  return headers;
}

/** A turn's body: `messages`, and `policy` and `user` when given. */
function turnBody(messages: Message[], policy: Policy | undefined, user: string | undefined): PostMessages {
  const body: PostMessages = { messages };
  if (policy !== undefined) body.policy = policy;
  if (user !== undefined) body.user = user;
  return body;
}

/** Call options without a turn's `user` (which goes in the body or a header, never to fetch). */
function callOptions(options: TurnOptions | undefined): CallOptions | undefined {
  if (options === undefined) return undefined;
  const { user: _user, ...call } = options;
  return call;
}

/** `params` as a query string (`?a=1&b=x`), leaving out undefined values. */
/**
 * A policy as the query of `GET …/messages`: clearing's fields flat
 * (`clear_tool_results.keep`), each excluded tool a repeated parameter.
 */
function policyQuery(policy: Policy | undefined): string {
  const search = new URLSearchParams();
  const add = (key: string, value: unknown) => {
    if (value === undefined || value === null) return;
    if (Array.isArray(value)) {
      for (const v of value) search.append(key, String(v));
    } else if (typeof value === "object") {
      for (const [field, v] of Object.entries(value)) add(`${key}.${field}`, v);
    } else {
      search.set(key, String(value));
    }
  };
  for (const [key, value] of Object.entries(policy ?? {})) add(key, value);
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

function query(params: object | undefined): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params ?? {})) {
    if (value !== undefined && value !== null) search.set(key, String(value));
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

/** A message a fact was read from. */
export interface FactSource {
  /** The conversation id, as the tenant knows it. */
  conversation: string;
  /** The message's sequence number in it. */
  seq: number;
}

/** What is known about a user, as `GET /v1/users/{user}/facts` answers it. */
export interface Fact {
  /** Unique among the user's facts, current and past; never given again. */
  id: number;
  /** What is known, one line. */
  text: string;
  /** What it is about (`home.city`): a newer fact with the same key supersedes it. */
  key: string | null;
  /** The messages it was read from (none for a fact added by hand). */
  sources: FactSource[];
  /** When it was made, RFC 3339. */
  created: string | null;
  /** When it last changed, RFC 3339. */
  updated: string | null;
  /** When it was last said to hold, RFC 3339. */
  confirmed: string | null;
  /** A pinned fact never leaves by the bounds and is written first. */
  pinned: boolean;
}

/** A user's current facts, in the order a turn sends them, and their version. */
export interface Facts {
  facts: Fact[];
  version: number;
}

/** What happened to a fact, oldest first: each entry's `kind` says which fields it has. */
export interface FactHistory {
  history: Array<{ fact: number; kind: string; when: string | null; cause: Record<string, unknown> } & Record<string, unknown>>;
}

/** A change to a fact by hand: a new text, a new key (`null` removes it), a pin. */
export interface FactEdit {
  text?: string;
  key?: string | null;
  pinned?: boolean;
}

/**
 * A client of `chatmem serve`: one method per REST route. Each call has a timeout
 * ({@link ChatmemClientOptions.timeoutMs}), and an error answer throws a {@link ChatmemError}.
 */
export class ChatmemClient {
  /** The server's base URL, without a trailing `/`. */
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #completionTimeoutMs: number;
  readonly #fetch: typeof fetch;

  /**
   * A client of the server `options` (or `CHATMEM_URL` and `CHATMEM_TOKEN`) names. A token with
   * a character that is not printable ASCII throws a {@link ChatmemError} (`invalid_request`):
   * an HTTP header cannot carry it, and no server token has one. The message never shows it.
   */
  constructor(options: ChatmemClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? env("CHATMEM_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.#token = options.token ?? env("CHATMEM_TOKEN");
    const bad = [...(this.#token ?? "")].findIndex((c) => c < "!" || c > "~");
    if (bad >= 0) {
      throw new ChatmemError(0, {
        code: "invalid_request",
        message:
          `${options.token === undefined ? "CHATMEM_TOKEN" : "options.token"} has a character that is not ` +
          `printable ASCII at position ${bad}: a bearer token is sent in an HTTP header, which carries only those`,
      });
    }
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#completionTimeoutMs = options.completionTimeoutMs ?? DEFAULT_COMPLETION_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** `GET /healthz`: whether the server and its store answer. */
  healthz(options?: CallOptions): Promise<Health> {
    return this.#json("GET", "/healthz", undefined, options);
  }

  /** `GET /openapi.json`: the API's description (OpenAPI 3.1). */
  openapi(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.#json("GET", "/openapi.json", undefined, options);
  }

  /**
   * `GET /metrics`: the server's counters, as Prometheus text (0.0.4), or OpenMetrics when
   * `openMetrics` is set.
   */
  async metrics(options?: CallOptions & { openMetrics?: boolean }): Promise<string> {
    const accept = options?.openMetrics ? "application/openmetrics-text" : "text/plain";
    const response = await this.#request("GET", "/metrics", undefined, options, { accept });
    return response.text();
  }

  /** `GET /v1/conversations`: a page of the tenant's conversation ids. */
  listConversations(page?: PageParams, options?: CallOptions): Promise<ConversationPage> {
    return this.#json("GET", `/v1/conversations${query(page)}`, undefined, options);
  }

  /** Every conversation id of the tenant, page after page. */
  async *conversations(options?: CallOptions & { limit?: number }): AsyncGenerator<string> {
    let cursor: string | undefined;
    do {
      const page = await this.listConversations({ cursor, limit: options?.limit }, options);
      yield* page.conversations;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** `GET /v1/conversations/{id}/messages`: the window the model sees. */
  getMessages(id: string, policy?: Policy, options?: CallOptions): Promise<Window> {
    return this.#json("GET", `/v1/conversations/${segment(id)}/messages${policyQuery(policy)}`, undefined, options);
  }

  /**
   * `POST /v1/conversations/{id}/messages`: adds `messages` in one atomic commit (all or
   * nothing) and answers the window after it. `options.user` (sent as the body's `user`)
   * names the conversation's user: the turn is theirs (the server checks the id, 400 naming
   * `user`).
   */
  postMessages(id: string, messages: Message[], policy?: Policy, options?: TurnOptions): Promise<Window> {
    const body = turnBody(messages, policy, options?.user);
    return this.#json("POST", `/v1/conversations/${segment(id)}/messages`, body, callOptions(options));
  }

  /**
   * `POST /v1/conversations/{id}/prompt`: a dry run, committing nothing. What the next model
   * call would be sent if `messages` were said now (empty: the prompt as it stands), as the
   * OpenAI door sends it, with its tokens and what clearing took out. A conversation that does
   * not exist yet is no error: its prompt is `messages`. With `options.user` (the body's
   * `user`) and `chatmem serve --facts` the prompt has that user's facts.
   */
  prompt(id: string, messages: Message[], policy?: Policy, options?: TurnOptions): Promise<Prompt> {
    const body: PromptRequest = turnBody(messages, policy, options?.user);
    return this.#json("POST", `/v1/conversations/${segment(id)}/prompt`, body, callOptions(options));
  }

  /**
   * `GET /v1/conversations/{id}/recall`: what recall finds for the question `q` among the
   * messages that left the window, best first, each with what a turn asking it would do
   * (`injected`, or why not), and the message it would be sent. At most `k` recalled (1 to
   * 100; default: the server's `--recall K`, else 5). Reads only; 404 for a conversation that
   * does not exist.
   */
  async recall(id: string, q: string, k?: number, options?: CallOptions): Promise<Recall> {
    if (typeof q !== "string" || q === "") {
      throw new ChatmemError(0, { code: "invalid_request", message: "q is empty: give the question to recall for" });
    }
    return await this.#json("GET", `/v1/conversations/${segment(id)}/recall${query({ q, k })}`, undefined, options);
  }

  /** `GET /v1/conversations/{id}/history`: one page of everything stored, oldest first. */
  getHistory(id: string, page?: PageParams, options?: CallOptions): Promise<HistoryPage> {
    return this.#json("GET", `/v1/conversations/${segment(id)}/history${query(page)}`, undefined, options);
  }

  /** Everything stored for conversation `id`, page after page. */
  async *history(id: string, options?: CallOptions & { limit?: number }): AsyncGenerator<Message> {
    let cursor: string | undefined;
    do {
      const page = await this.getHistory(id, { cursor, limit: options?.limit }, options);
      yield* page.messages;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** `DELETE /v1/conversations/{id}`: deletes window, history and summary. */
  async deleteConversation(id: string, options?: CallOptions): Promise<void> {
    const response = await this.#request("DELETE", `/v1/conversations/${segment(id)}`, undefined, options);
    await response.body?.cancel();
  }

  /** `GET /v1/users/{user}/facts`: the user's current facts and their version. */
  listFacts(user: string, options?: CallOptions): Promise<Facts> {
    return this.#json("GET", `/v1/users/${segment(user)}/facts`, undefined, options);
  }

  /** `POST /v1/users/{user}/facts`: adds a fact by hand (a `key` supersedes the fact with it). */
  addFact(user: string, text: string, key?: string | null, options?: CallOptions): Promise<Fact> {
    const body = key === undefined ? { text } : { text, key };
    return this.#json("POST", `/v1/users/${segment(user)}/facts`, body, options);
  }

  /** `PATCH /v1/users/{user}/facts/{fact}`: changes a fact's text or key, then pins or unpins it. */
  editFact(user: string, fact: number, edit: FactEdit, options?: CallOptions): Promise<Fact> {
    return this.#json("PATCH", `/v1/users/${segment(user)}/facts/${fact}`, edit, options);
  }

  /** `DELETE /v1/users/{user}/facts/{fact}`: the fact is gone, its history with it. */
  async deleteFact(user: string, fact: number, options?: CallOptions): Promise<void> {
    const response = await this.#request("DELETE", `/v1/users/${segment(user)}/facts/${fact}`, undefined, options);
    await response.body?.cancel();
  }

  /** `GET /v1/users/{user}/facts/{fact}/history`: what happened to the fact, oldest first. */
  factHistory(user: string, fact: number, options?: CallOptions): Promise<FactHistory> {
    return this.#json("GET", `/v1/users/${segment(user)}/facts/${fact}/history`, undefined, options);
  }

  /** `DELETE /v1/users/{user}/facts`: forgets everything kept about the user. */
  async forgetUser(user: string, options?: CallOptions): Promise<void> {
    const response = await this.#request("DELETE", `/v1/users/${segment(user)}/facts`, undefined, options);
    await response.body?.cancel();
  }

  /**
   * `POST /v1/chat/completions` (a server started with `--upstream-base-url`): the upstream's
   * answer, with conversation `conversation`'s memory. For `stream: true` use
   * {@link ChatmemClient.streamChatCompletion}.
   *
   * `conversation` goes in the `X-Chatmem-Conversation` header and `options.user` in
   * `X-Chatmem-User` (with `chatmem serve --facts` the model is sent that user's facts; the
   * request's own `user` field is OpenAI's, passed to the upstream), both as UTF-8, so any
   * id the REST routes take works. An id a header cannot carry (a control character, a space
   * or tab at either end, a lone surrogate) rejects with a {@link ChatmemError}
   * (`invalid_request`, status 0, `param` the header) before any request.
   */
  async chatCompletion(conversation: string, request: ChatCompletionRequest, options?: TurnOptions): Promise<ChatCompletion> {
    const headers = doorHeaders(conversation, options?.user);
    const timed = { timeoutMs: this.#completionTimeoutMs, ...callOptions(options) };
    return await this.#json("POST", "/v1/chat/completions", { ...request, stream: false }, timed, headers);
  }

  /**
   * `POST /v1/chat/completions` with `stream: true`: the answer's chunks as they come. The
   * completion timeout bounds the whole stream; an error event of the stream, or a stream
   * that ends without `[DONE]`, throws a {@link ChatmemError}. The ids and `options.user` as
   * in {@link ChatmemClient.chatCompletion}.
   */
  async *streamChatCompletion(
    conversation: string,
    request: ChatCompletionRequest,
    options?: TurnOptions,
  ): AsyncGenerator<ChatCompletionChunk> {
    const headers = doorHeaders(conversation, options?.user);
    const timed = { timeoutMs: this.#completionTimeoutMs, ...callOptions(options) };
    const response = await this.#request("POST", "/v1/chat/completions", { ...request, stream: true }, timed, {
      ...headers,
      accept: "text/event-stream",
    });
    const requestId = response.headers.get("x-request-id") ?? undefined;
    for await (const data of serverSentEvents(response)) {
      if (data === "[DONE]") return;
      const event = JSON.parse(data) as ChatCompletionChunk & { error?: Partial<ErrorDetail> };
      if (event.error) {
        const { code = "upstream_error", message = "the stream ended with an error" } = event.error;
        throw new ChatmemError(response.status, { request_id: requestId, ...event.error, code, message });
      }
      yield event;
    }
    throw new ChatmemError(response.status, {
      code: "incomplete_stream",
      message: "the stream ended without [DONE]",
      request_id: requestId,
    });
  }

  /** `GET /v1/models`: the upstream's model list, as it came. */
  models(options?: CallOptions): Promise<ModelList> {
    return this.#json("GET", "/v1/models", undefined, options);
  }

  async #json<T>(
    method: string,
    path: string,
    body: unknown,
    options: CallOptions | undefined,
    headers: Record<string, string> = {},
  ): Promise<T> {
    const response = await this.#request(method, path, body, options, { accept: "application/json", ...headers });
    return (await response.json()) as T;
  }

  /** One call: the answer if it is a success, else a {@link ChatmemError}. */
  async #request(
    method: string,
    path: string,
    body: unknown,
    options: CallOptions | undefined,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const timeout = AbortSignal.timeout(options?.timeoutMs ?? this.#timeoutMs);
    const signal = options?.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
    const all: Record<string, string> = { ...headers };
    if (this.#token) all.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) all["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.#fetch(`${this.baseUrl}${path}`, {
        method,
        headers: all,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      throw noAnswer(e, method, path);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

/** A {@link ChatmemError} for a call that got no answer. */
function noAnswer(e: unknown, method: string, path: string): ChatmemError {
  const name = e instanceof Error ? e.name : "";
  const timedOut = name === "TimeoutError";
  // The route, as the server's logs name it: never an id, a query or message text.
  const route = `${method} ${path.split("?")[0]!.replace(/^\/v1\/conversations\/[^/]+/, "/v1/conversations/{id}")}`;
  return new ChatmemError(
    0,
    {
      code: timedOut ? "timeout" : name === "AbortError" ? "aborted" : "connection_error",
      message: timedOut ? `${route}: no answer within the timeout` : `${route}: ${reason(e)}`,
    },
    { cause: e },
  );
}

/** Why `fetch` failed: its message, and its cause's code (`ECONNREFUSED`) or message. */
function reason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause as { code?: unknown; message?: unknown } | undefined;
  const why = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : undefined;
  return why === undefined ? e.message : `${e.message} (${why})`;
}

/** The {@link ChatmemError} of an error answer, from its JSON body (or its status alone). */
async function errorOf(response: Response): Promise<ChatmemError> {
  const requestId = response.headers.get("x-request-id") ?? undefined;
  const text = await response.text().catch(() => "");
  let detail: Partial<ErrorDetail> | undefined;
  try {
    detail = (JSON.parse(text) as Partial<ErrorBody>).error;
  } catch {
    detail = undefined;
  }
  if (detail && typeof detail.code === "string" && typeof detail.message === "string") {
    return new ChatmemError(response.status, { ...detail, code: detail.code, message: detail.message, request_id: detail.request_id ?? requestId });
  }
  return new ChatmemError(response.status, {
    code: "http_error",
    message: `HTTP ${response.status} ${response.statusText}`.trim(),
    request_id: requestId,
  });
}

/** The `data` of each server-sent event of `response`. */
async function* serverSentEvents(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line === "") {
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
    if (data.length > 0) yield data.join("\n");
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
