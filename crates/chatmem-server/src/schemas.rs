//! Schemas of what the server passes through rather than (de)serializes, for `/openapi.json`:
//! a stored message (`chatmem::Message`'s hand-written codec), and the chat completion's
//! request and answer, OpenAI's objects, declared field by field from OpenAI's API (the fields
//! chatmem reads, and room for the rest it forwards). Schema-only types, never built.

use std::collections::HashMap;

use serde_json::Value;
use utoipa::ToSchema;

/// A message in OpenAI's Chat Completions shape plus chatmem's own fields, as
/// `chatmem::Message`'s hand-written JSON codec reads and writes it (a test checks the field
/// names against it).
#[derive(ToSchema)]
#[schema(as = Message)]
#[allow(dead_code)] // a schema only: the real type is chatmem::Message
pub(crate) struct MessageSchema {
    role: RoleSchema,
    /// Absent or null on an assistant message with tool calls.
    #[schema(required = false)]
    content: Option<ContentSchema>,
    /// The participant's name.
    name: Option<String>,
    /// An assistant's tool calls: `{"id", "type": "function", "function": {"name", "arguments"}}`.
    #[schema(value_type = Vec<Object>, required = false)]
    tool_calls: Option<Vec<serde_json::Value>>,
    /// A tool result's call id.
    tool_call_id: Option<String>,
    /// Reasoning text (DeepSeek's); kept in memory, never sent to a model.
    reasoning_content: Option<String>,
    /// A tool result that reports a failure.
    is_error: Option<bool>,
    /// Application data kept with the message, never sent to a model.
    #[schema(value_type = Object, required = false)]
    metadata: Option<serde_json::Value>,
}

/// A message's content: text, or a list of content parts, kept as sent.
#[derive(ToSchema)]
#[schema(as = Content)]
#[serde(untagged)]
#[allow(dead_code)] // a schema only: the real type is chatmem::Content
enum ContentSchema {
    /// Text.
    Text(String),
    /// Parts: text for every role; images and any other type for a user; refusals for an
    /// assistant.
    Parts(Vec<ContentPartSchema>),
}

/// One content part: `{"type": "text", "text"}`, `{"type": "image_url", "image_url": {"url",
/// "detail"}}`, `{"type": "refusal", "refusal"}`, or a user's part of another type (audio,
/// files, ...), kept with all its fields.
#[derive(ToSchema)]
#[schema(as = ContentPart)]
#[allow(dead_code)] // a schema only: the real type is chatmem::ContentPart
struct ContentPartSchema {
    /// `text`, `image_url`, `refusal`, or another type.
    #[schema(rename = "type")]
    kind: String,
    /// A text part's text.
    #[schema(required = false, nullable = false)]
    text: Option<String>,
    /// An image part's image.
    #[schema(required = false, nullable = false)]
    image_url: Option<ImageUrlSchema>,
    /// A refusal part's text.
    #[schema(required = false, nullable = false)]
    refusal: Option<String>,
}

/// An image part's image.
#[derive(ToSchema)]
#[schema(as = ImageUrl)]
#[allow(dead_code)] // a schema only: the real type is chatmem::ImageUrl
struct ImageUrlSchema {
    /// The image's URL (or a `data:` URL).
    url: String,
    /// The provider's detail hint (`low`, `high`, `auto`).
    #[schema(required = false, nullable = false)]
    detail: Option<String>,
}

/// Who wrote a message, in memory as in a chat completion (`developer` is kept with its role
/// and follows the system message's rules: one per conversation, first, never evicted).
#[derive(ToSchema)]
#[schema(as = Role)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the real type is chatmem::Role
enum RoleSchema {
    System,
    /// Instructions in the system slot, as a system message (OpenAI's newer name).
    Developer,
    User,
    Assistant,
    Tool,
}

// The chat completion: OpenAI's objects, as the server reads and passes them. Schema-only
// types (never built): `#[allow(dead_code)]` on each.

/// OpenAI's chat-completion request. chatmem reads `model`, `messages`, `stream`,
/// `stream_options` and `n`; the upstream receives the request as sent, every field in the
/// client's order and type, with `messages` replaced by memory's window followed by the turn's
/// new messages.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatCompletionRequest {
    /// The upstream's model, forwarded as given.
    model: String,
    /// The turn's new messages. A client that resends the whole conversation may: the leading
    /// messages the conversation already holds are recognised and not stored twice.
    #[schema(min_items = 1)]
    messages: Vec<ChatMessage>,
    /// `true`: the answer as server-sent events of `ChatCompletionChunk`s, ending with
    /// `data: [DONE]`.
    stream: Option<bool>,
    /// With `stream`: `{"include_usage": true}` asks for a last chunk with the usage (and
    /// `choices: []`); without it no usage chunk is sent.
    #[schema(value_type = Option<Object>)]
    stream_options: Option<Value>,
    /// How many answers to generate: 1. More is refused with 400 naming `n` before any
    /// upstream call (memory keeps one answer).
    #[schema(minimum = 1, maximum = 1)]
    n: Option<u32>,
    /// Tools the model may call: `{"type": "function", "function": {"name", "description",
    /// "parameters", "strict"}}`.
    #[schema(value_type = Option<Vec<Object>>)]
    tools: Option<Vec<Value>>,
    /// Sampling temperature.
    temperature: Option<f64>,
    /// Nucleus sampling.
    top_p: Option<f64>,
    /// The answer's token limit (older models).
    max_tokens: Option<u32>,
    /// The answer's token limit, reasoning included (newer models); forwarded as itself.
    max_completion_tokens: Option<u32>,
    /// Up to four stop sequences: a string or an array of strings.
    stop: Option<Value>,
    /// `none`, `auto`, `required`, or `{"type": "function", "function": {"name"}}`.
    tool_choice: Option<Value>,
    /// `{"type": "text"}`, `{"type": "json_object"}` or `{"type": "json_schema", "json_schema":
    /// {...}}` (structured outputs).
    #[schema(value_type = Option<Object>)]
    response_format: Option<Value>,
    /// Every other field of OpenAI's request (`parallel_tool_calls`, `seed`, `logprobs`,
    /// `top_logprobs`, `user`, `reasoning_effort`, `metadata`, `store`, `presence_penalty`,
    /// `frequency_penalty`, `logit_bias`, `service_tier`, `prediction`, `modalities`,
    /// `prompt_cache_key`, `verbosity`, `safety_identifier`, ...) and a provider's own
    /// (`top_k`, `thinking`) is forwarded unchanged.
    #[serde(flatten)]
    extra: HashMap<String, Value>,
}

/// A message of a chat-completion request, in OpenAI's shape.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatMessage {
    role: RoleSchema,
    /// Null on an assistant message with tool calls.
    content: Option<ContentSchema>,
    /// The participant's name.
    name: Option<String>,
    /// An assistant's tool calls.
    tool_calls: Option<Vec<ToolCall>>,
    /// A tool result's call id.
    tool_call_id: Option<String>,
}

/// One tool call of an assistant message.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ToolCall {
    /// The call's id, which the tool result names.
    id: String,
    /// `function`.
    #[serde(rename = "type")]
    kind: String,
    function: FunctionCall,
}

/// The function a tool call calls.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct FunctionCall {
    /// The function's name.
    name: String,
    /// Its arguments, as JSON text.
    arguments: String,
}

/// OpenAI's `chat.completion` object, as the upstream sent it (its id, `system_fingerprint`,
/// `logprobs`, `refusal`, annotations and any field not listed here pass through unchanged).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatCompletion {
    /// The completion's id (the upstream's).
    id: String,
    /// `chat.completion`.
    object: String,
    /// Unix time, in seconds.
    created: u64,
    /// The model that answered.
    model: String,
    /// One choice (`n` is 1).
    choices: Vec<Choice>,
    usage: Option<CompletionUsage>,
    /// The upstream's backend configuration.
    system_fingerprint: Option<String>,
    /// The tier that served the request.
    service_tier: Option<String>,
    /// Whatever else the upstream sent.
    #[serde(flatten)]
    extra: HashMap<String, Value>,
}

/// One answer of a chat completion.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Choice {
    /// 0.
    index: u32,
    message: AssistantMessage,
    /// `stop`, `length`, `tool_calls`, `content_filter`.
    finish_reason: Option<String>,
    /// Token log probabilities, when asked for.
    #[schema(value_type = Option<Object>)]
    logprobs: Option<Value>,
}

/// The model's answer.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct AssistantMessage {
    /// `assistant`.
    role: String,
    /// The text; null when the answer is tool calls only.
    content: Option<String>,
    /// The model's refusal, if it refused.
    refusal: Option<String>,
    /// Tools the model calls; the client runs them and sends the results in the next request.
    tool_calls: Option<Vec<ToolCall>>,
    /// Annotations (citations, ...).
    #[schema(value_type = Option<Vec<Object>>)]
    annotations: Option<Vec<Value>>,
    /// Reasoning text (DeepSeek's), stored in memory and never sent to a model.
    reasoning_content: Option<String>,
}

/// Tokens the upstream counted for the call.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct CompletionUsage {
    /// Tokens of the prompt (memory's window and the new messages).
    prompt_tokens: u64,
    /// Tokens of the answer.
    completion_tokens: u64,
    /// Their sum.
    total_tokens: u64,
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// Reasoning tokens and others, as the upstream reports them.
    #[schema(value_type = Option<Object>)]
    completion_tokens_details: Option<Value>,
}

/// What the prompt's tokens were.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct PromptTokensDetails {
    /// Tokens served from the upstream's prompt cache.
    cached_tokens: Option<u64>,
}

/// One server-sent event of a streamed chat completion (`data: {...}`); the stream ends with
/// `data: [DONE]`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatCompletionChunk {
    /// The completion's id, the same in every chunk.
    id: String,
    /// `chat.completion.chunk`.
    object: String,
    /// Unix time, in seconds.
    created: u64,
    /// The model that answers.
    model: String,
    /// The delta of the one choice; empty in the last chunk of `stream_options.include_usage`.
    choices: Vec<ChunkChoice>,
    /// Only in that last chunk.
    usage: Option<CompletionUsage>,
    /// Whatever else the upstream sent.
    #[serde(flatten)]
    extra: HashMap<String, Value>,
}

/// One choice's part of a chunk.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChunkChoice {
    /// 0.
    index: u32,
    /// What this chunk adds: `role` (first), `content`, `refusal`, `reasoning_content`,
    /// `tool_calls` (each with its `index`; id and name first, then arguments in pieces).
    #[schema(value_type = Object)]
    delta: Value,
    /// Set in the last chunk of the choice.
    finish_reason: Option<String>,
    /// Token log probabilities, when asked for.
    #[schema(value_type = Option<Object>)]
    logprobs: Option<Value>,
}

/// The upstream's `GET /models` answer.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ModelList {
    /// `list`.
    object: String,
    data: Vec<Model>,
}

/// One model the upstream serves.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Model {
    /// Its name, for a request's `model`.
    id: String,
    /// `model`.
    object: String,
    /// Unix time, in seconds.
    created: Option<u64>,
    /// Who publishes it.
    owned_by: Option<String>,
    /// Whatever else the upstream sent.
    #[serde(flatten)]
    extra: HashMap<String, Value>,
}
