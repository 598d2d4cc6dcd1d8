//! `POST /v1/chat/completions`: an OpenAI-compatible endpoint that adds memory. The
//! `X-Chatmem-Conversation` header names the conversation; the request's messages are the
//! turn's new messages; the [`MemoryAdvisor`] loads the window, calls the upstream model with
//! memory prepended, and commits the turn on success. Answers come back as OpenAI's JSON, or
//! as its server-sent events when `"stream": true`.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use chatmem::{ChatDelta, Message, SamplingOptions, ToolDefinition, Usage};
use chatmem_advisor::{MemoryAdvisor, TurnEvent, TurnRequest};
use chatmem_openai::OpenAiModel;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::{AppState, RequestId};
use crate::config::Upstream;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::routes::{body_bytes, conversation_key, parse_body, respond, tenant};

/// The header that names the conversation of a chat completion.
pub const CONVERSATION_HEADER: &str = "x-chatmem-conversation";

/// The OpenAI request fields chatmem uses; others (`n`, `user`, `stream_options`, ...) are
/// accepted and ignored, as clients send them freely.
#[derive(Deserialize)]
struct CompletionRequest {
    model: String,
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stop: Option<Stop>,
    #[serde(default)]
    tools: Vec<WireTool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct WireTool {
    function: ToolDefinition,
}

pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = async {
        let upstream = configured_upstream(&state)?;
        let header = headers.get(CONVERSATION_HEADER).ok_or_else(|| {
            ApiError::invalid(
                "the X-Chatmem-Conversation header is required: it names the conversation whose memory the call uses",
            )
        })?;
        // UTF-8, not only visible ASCII: an id may be any text (`订单-LC202610060018`).
        let id = std::str::from_utf8(header.as_bytes())
            .map_err(|_| ApiError::invalid("the X-Chatmem-Conversation header is not UTF-8 text"))?
            .to_owned();
        let key = conversation_key(&state, &headers, &id)?;
        let body = body_bytes(&state, body)?;
        let request: CompletionRequest = parse_body(&body, "chat completion request")?;
        state.config.limits.batch.check(&request.messages)?;
        let model = upstream_model(&state, upstream, &request.model)?;
        let advisor = MemoryAdvisor::new(model, (*state.memory).clone());
        let turn = TurnRequest {
            messages: request.messages,
            tools: request.tools.into_iter().map(|t| t.function).collect(),
            options: SamplingOptions {
                temperature: request.temperature,
                top_p: request.top_p,
                max_tokens: request.max_tokens.or(request.max_completion_tokens),
                stop: match request.stop {
                    None => Vec::new(),
                    Some(Stop::One(s)) => vec![s],
                    Some(Stop::Many(v)) => v,
                },
            },
        };
        let completion_id = format!("chatcmpl-{}", rid.0);
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if request.stream {
            let metrics = state.config.metrics.clone();
            return Ok(stream(
                advisor,
                key,
                turn,
                completion_id,
                created,
                request.model,
                metrics,
            ));
        }
        let done = advisor
            .call(&key, turn)
            .await
            .map_err(|e| advisor_error(&state.config.metrics, e))?;
        Ok(Json(json!({
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "message": answer_json(&done.message), "finish_reason": done.finish_reason}],
            "usage": done.usage.map(usage_json),
        }))
        .into_response())
    }
    .await;
    respond(&rid, result)
}

/// The answer as OpenAI's assistant message: role, content, tool calls (never reasoning text
/// or metadata beyond what the provider sent).
fn answer_json(message: &Message) -> Value {
    let mut v = serde_json::to_value(message).unwrap_or_else(|_| json!({"role": "assistant", "content": null}));
    if let Some(obj) = v.as_object_mut() {
        obj.remove("metadata");
        obj.entry("content").or_insert(Value::Null);
    }
    v
}

fn usage_json(u: Usage) -> Value {
    json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens})
}

/// The turn as server-sent events: each delta as a `chat.completion.chunk`, then `[DONE]` once
/// the turn is committed. An error after the first byte is sent as an `error` event.
fn stream(
    advisor: MemoryAdvisor<OpenAiModel, std::sync::Arc<dyn chatmem::Store>>,
    key: chatmem::ConversationId,
    turn: TurnRequest,
    id: String,
    created: u64,
    model: String,
    metrics: Metrics,
) -> Response {
    // The body is sent after the handler (and its span) returned: its failures are logged in
    // the request's span all the same.
    let span = tracing::Span::current();
    let failed = move |e: chatmem_advisor::Error| {
        span.in_scope(|| {
            let e = advisor_error(&metrics, e);
            if e.status().is_server_error() {
                tracing::warn!(status = e.status().as_u16(), code = e.code(), "the stream failed");
            } else {
                tracing::debug!(status = e.status().as_u16(), code = e.code(), "the stream was refused");
            }
            error_event(&e)
        })
    };
    let events = async_stream::stream! {
        let chunk = |delta: Value, finish: Option<String>, usage: Option<Usage>| {
            json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": usage.map(usage_json),
            })
        };
        let mut turn_stream = match advisor.stream(&key, turn).await {
            Ok(s) => s,
            Err(e) => {
                yield Ok::<Event, std::convert::Infallible>(failed(e));
                return;
            }
        };
        let mut first = true;
        while let Some(event) = turn_stream.next().await {
            match event {
                Ok(TurnEvent::Delta(d)) => {
                    let ChatDelta { content, reasoning_content, tool_calls, finish_reason, usage, .. } = d;
                    let mut delta = serde_json::Map::new();
                    if first {
                        delta.insert("role".into(), json!("assistant"));
                        first = false;
                    }
                    if let Some(c) = content {
                        delta.insert("content".into(), json!(c));
                    }
                    if let Some(r) = reasoning_content {
                        delta.insert("reasoning_content".into(), json!(r));
                    }
                    if !tool_calls.is_empty() {
                        let calls: Vec<Value> = tool_calls.iter().map(|c| json!({
                            "index": c.index, "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })).collect();
                        delta.insert("tool_calls".into(), json!(calls));
                    }
                    yield Ok(Event::default().data(chunk(Value::Object(delta), finish_reason, usage).to_string()));
                }
                Ok(TurnEvent::Done(_)) => {
                    yield Ok(Event::default().data("[DONE]"));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    yield Ok(failed(e));
                    return;
                }
            }
        }
    };
    Sse::new(events).into_response()
}

fn error_event(e: &ApiError) -> Event {
    Event::default().data(json!({"error": {"code": e.code(), "message": e.to_string()}}).to_string())
}

/// An advisor error as the client sees it: its own bad request is 400, the upstream's
/// failure 502 (counted), memory's failures as [`ApiError::from`] says.
fn advisor_error(metrics: &Metrics, e: chatmem_advisor::Error) -> ApiError {
    use chatmem_advisor::Error;
    match e {
        Error::InvalidRequest(r) => ApiError::invalid(r),
        Error::Load(source) => ApiError::from(source),
        Error::Commit { source, .. } => ApiError::from(source),
        Error::Model(m) => upstream_failed(metrics, &m),
        other => {
            metrics.upstream_error(chatmem::ModelErrorKind::Other);
            ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", other.to_string())
        }
    }
}

/// 502 for a failed upstream call, naming its HTTP status when it answered one (the
/// [`chatmem::ModelError`]'s text does); counted in the metrics.
fn upstream_failed(metrics: &Metrics, m: &chatmem::ModelError) -> ApiError {
    metrics.upstream_error(m.kind());
    tracing::warn!(error = %m, "upstream model failed");
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "upstream_error",
        format!("the upstream model failed: {m}"),
    )
}

/// The configured upstream, or 503 when the server has none.
fn configured_upstream(state: &AppState) -> Result<&Upstream, ApiError> {
    state.config.upstream.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_upstream",
            "this server has no upstream model (start it with --upstream-base-url)",
        )
    })
}

/// A client of `upstream` for `model`, with the server's upstream timeout.
fn upstream_model(state: &AppState, upstream: &Upstream, model: &str) -> Result<OpenAiModel, ApiError> {
    let builder = OpenAiModel::builder()
        .base_url(upstream.base_url.clone())
        .model(model)
        .timeout(state.config.limits.upstream_timeout);
    let builder = match &upstream.api_key {
        Some(key) => builder.api_key(key.clone()),
        None => builder.no_api_key(),
    };
    builder
        .build()
        .map_err(|e| ApiError::invalid(format!("the upstream model cannot be used: {e}")))
}

/// `GET /v1/models`: the upstream's model list as it came, for clients that list models
/// before they chat. Same callers as every route (the bearer token with `--auth`).
pub(crate) async fn models(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
) -> Response {
    /// The builder wants a model name; listing never sends it.
    const LISTING: &str = "(listing models)";
    let result = async {
        tenant(&state, &headers)?;
        let upstream = configured_upstream(&state)?;
        let model = upstream_model(&state, upstream, LISTING)?;
        match model.list_models().await {
            Ok(list) => Ok(Json(list).into_response()),
            Err(e) => Err(upstream_failed(&state.config.metrics, &e)),
        }
    }
    .await;
    respond(&rid, result)
}
