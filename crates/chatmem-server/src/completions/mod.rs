//! `POST /v1/chat/completions`: OpenAI's chat-completions endpoint with memory, as a
//! pass-through proxy. The `X-Chatmem-Conversation` header names the conversation. The
//! client's request goes upstream as it was sent (every field, in its order and types), with
//! `messages` replaced by memory's window and the turn's new messages; the answer comes back
//! as the upstream sent it, plain or as server-sent events, and the turn is committed once
//! the answer is complete (before the stream's `[DONE]` is passed on). A failed call, or a
//! client that hangs up mid-stream, commits nothing.
//!
//! - `request.rs`: the request as the proxy reads it (`messages`, `stream`, `n`);
//! - `sse.rs`: a stream split into events without changing a byte.

mod request;
mod sse;

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use chatmem::{ChatMemory, ConversationId, DeltaAccumulator, Store};
use chatmem_openai::passthrough::{messages_json, read_chunk, read_completion};
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use self::request::ChatRequest;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{body_bytes, conversation_to_write, respond, tenant};
use crate::state::{AppState, RequestId};
use crate::upstream::{Failure, UpstreamPool, passed};

/// The header that names the conversation of a chat completion.
pub const CONVERSATION_HEADER: &str = "x-chatmem-conversation";

pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = async {
        let header = headers.get(CONVERSATION_HEADER).ok_or_else(|| {
            ApiError::invalid(
                "the X-Chatmem-Conversation header is required: it names the conversation whose memory the call uses",
            )
        })?;
        // UTF-8, not only visible ASCII: an id may be any text (`订单-LC202610060018`).
        let id = std::str::from_utf8(header.as_bytes())
            .map_err(|_| ApiError::invalid("the X-Chatmem-Conversation header is not UTF-8 text"))?;
        let key = conversation_to_write(&state, &headers, id)?;
        let body = body_bytes(&state, body)?;
        let request = ChatRequest::parse(&body, &state.config.limits)?;
        let pool = state.upstream.clone()?;
        proxy(Arc::clone(&state.memory), pool, key, request, &rid).await
    }
    .await;
    respond(&rid, result)
}

/// What the proxy's answer is made of: a whole response, or a head and then body chunks.
enum Part {
    Whole(Response),
    Head(StatusCode, Option<HeaderValue>),
    Chunk(Bytes),
}

/// Runs the call and answers with its first part; a streamed answer's body is the rest, sent
/// as it comes. The call is one stream so that the turn (which borrows the memory) lives as
/// long as the answer's body, and ends with it: a client that hangs up drops it uncommitted.
async fn proxy(
    memory: Arc<ChatMemory<Arc<dyn Store>>>,
    pool: Arc<UpstreamPool>,
    key: ConversationId,
    request: ChatRequest,
    rid: &RequestId,
) -> Result<Response, ApiError> {
    let mut parts = Box::pin(call(memory, pool, key, request, rid.clone()));
    match parts.next().await {
        Some(Ok(Part::Whole(response))) => Ok(response),
        Some(Ok(Part::Head(status, content_type))) => {
            let chunks = parts.filter_map(|p| async move {
                match p {
                    Ok(Part::Chunk(bytes)) => Some(Ok::<_, Infallible>(bytes)),
                    _ => None,
                }
            });
            Ok(passed(status, content_type, Body::from_stream(chunks)))
        }
        Some(Ok(Part::Chunk(_))) | None => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "the answer had no head",
        )),
        Some(Err(e)) => Err(e),
    }
}

/// The call, as the parts of its answer: the turn begun and given the request's new
/// messages, its prompt put in the request, the request sent upstream, the answer read and
/// committed, and passed on.
fn call(
    memory: Arc<ChatMemory<Arc<dyn Store>>>,
    pool: Arc<UpstreamPool>,
    key: ConversationId,
    request: ChatRequest,
    rid: RequestId,
) -> impl Stream<Item = Result<Part, ApiError>> + Send {
    // The stream runs after the handler (and its span) returned: its lines are logged in
    // the request's span all the same.
    let span = tracing::Span::current();
    async_stream::stream! {
        let ChatRequest { mut body, messages, stream } = request;
        let mut turn = match memory.begin(&key).await {
            Ok(turn) => turn,
            Err(e) => {
                yield Err(ApiError::from(e));
                return;
            }
        };
        let skipped = turn.push_unstored(messages);
        let prompt = turn.prompt();
        span.in_scope(|| tracing::debug!(
            loaded = turn.loaded().snapshot().messages.len(),
            already_stored = skipped,
            prompt = prompt.len(),
            "turn prepared"
        ));
        if let Some(slot) = body.get_mut("messages") {
            *slot = messages_json(&prompt);
        }
        drop(prompt);
        let sent = match serde_json::to_vec(&body) {
            Ok(bytes) => bytes,
            Err(e) => {
                yield Err(ApiError::invalid(format!("the request cannot be sent: {e}")));
                return;
            }
        };
        drop(body);
        let deadline = tokio::time::Instant::now() + pool.timeout();
        let response = match pool.chat(sent).await {
            Ok(response) => response,
            Err(Failure::Api(e)) => {
                yield Err(e);
                return;
            }
            Err(Failure::Passed(response)) => {
                yield Ok(Part::Whole(response));
                return;
            }
        };
        let status = response.status();
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let is_sse = content_type
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));

        if !stream || !is_sse {
            // A whole answer: read, committed, then passed on as it came.
            let bytes = match pool.read_body(response, deadline).await {
                Ok(bytes) => bytes,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            if stream {
                yield Err(pool.unreadable("a stream was asked for, and the answer is not server-sent events"));
                return;
            }
            let value: Value = match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                Err(e) => {
                    yield Err(pool.unreadable(&format!("it is not JSON ({e})")));
                    return;
                }
            };
            if value.get("error").is_some() {
                // An error in a 200 (some providers send these): the upstream failed, and
                // its text is not passed on.
                pool.metrics().upstream_error(chatmem::ModelErrorKind::Server);
                yield Err(ApiError::new(StatusCode::BAD_GATEWAY, ErrorCode::UpstreamError, "the upstream model failed (an error in a 200 answer)"));
                return;
            }
            pool.count_usage(value.get("usage"));
            let answer = match read_completion(value) {
                Ok(answer) => answer,
                Err(e) => {
                    yield Err(pool.unreadable(&e.to_string()));
                    return;
                }
            };
            turn.push(answer.message);
            if let Err(e) = turn.commit().await {
                span.in_scope(|| tracing::warn!("the turn was answered but not committed"));
                yield Err(ApiError::from(e));
                return;
            }
            yield Ok(Part::Whole(passed(status, content_type, bytes)));
            return;
        }

        // A stream: each event passed on as it came while the answer is gathered; `[DONE]`
        // (and whatever follows it) held back until the turn is committed.
        yield Ok(Part::Head(status, content_type));
        let mut response = response;
        let mut events = sse::Splitter::default();
        let mut answer = DeltaAccumulator::default();
        let mut finished = false;
        let mut held: Vec<Bytes> = Vec::new();
        let failed = |e: ApiError| {
            span.in_scope(|| tracing::warn!(status = e.status().as_u16(), code = e.code().as_str(), "the stream failed"));
            error_event(e, &rid)
        };
        loop {
            let chunk = match tokio::time::timeout(pool.timeout(), response.chunk()).await {
                Err(_) => {
                    yield Ok(Part::Chunk(failed(pool.timed_out())));
                    return;
                }
                Ok(Err(e)) => {
                    yield Ok(Part::Chunk(failed(pool.unreachable(&e))));
                    return;
                }
                Ok(Ok(None)) => None,
                Ok(Ok(Some(chunk))) => Some(chunk),
            };
            let ended = chunk.is_none();
            if let Some(chunk) = chunk {
                events.push(&chunk);
            }
            let mut ready = Vec::new();
            while let Some(event) = events.next_event() {
                ready.push(event);
            }
            if ended {
                ready.extend(events.rest());
            }
            for event in ready {
                if !held.is_empty() {
                    held.push(event.raw);
                    continue;
                }
                match event.data.as_deref() {
                    None => {}
                    Some("[DONE]") => {
                        held.push(event.raw);
                        continue;
                    }
                    Some(data) => {
                        let value: Value = match serde_json::from_str(data) {
                            Ok(v) => v,
                            Err(e) => {
                                yield Ok(Part::Chunk(failed(pool.unreadable(&format!("an event is not JSON ({e})")))));
                                return;
                            }
                        };
                        if value.get("error").is_some() {
                            // The upstream failed mid-stream: its text is not passed on.
                            pool.metrics().upstream_error(chatmem::ModelErrorKind::Server);
                            let e = ApiError::new(StatusCode::BAD_GATEWAY, ErrorCode::UpstreamError, "the upstream model failed mid-stream");
                            yield Ok(Part::Chunk(failed(e)));
                            return;
                        }
                        if value.get("usage").is_some_and(Value::is_object) {
                            pool.count_usage(value.get("usage"));
                        }
                        match read_chunk(value) {
                            Ok(Some(delta)) => {
                                finished |= delta.finish_reason.is_some();
                                answer.push(&delta);
                            }
                            Ok(None) => {}
                            Err(e) => {
                                yield Ok(Part::Chunk(failed(pool.unreadable(&e.to_string()))));
                                return;
                            }
                        }
                    }
                }
                yield Ok(Part::Chunk(event.raw));
            }
            if ended {
                break;
            }
        }
        if !finished {
            let e = pool.unreadable("the stream ended before the model finished");
            yield Ok(Part::Chunk(failed(e)));
            return;
        }
        let message = match answer.finish() {
            Ok(r) => r.message,
            Err(e) => {
                yield Ok(Part::Chunk(failed(pool.unreadable(&e.to_string()))));
                return;
            }
        };
        turn.push(message);
        if let Err(e) = turn.commit().await {
            span.in_scope(|| tracing::warn!("the turn was answered but not committed"));
            yield Ok(Part::Chunk(failed(ApiError::from(e))));
            return;
        }
        for bytes in held {
            yield Ok(Part::Chunk(bytes));
        }
    }
}

/// A failure after the answer began, as OpenAI ends a stream with one: an event whose data
/// is `{"error": {...}}` (which OpenAI's clients raise), and no `[DONE]`.
fn error_event(e: ApiError, rid: &RequestId) -> Bytes {
    Bytes::from(e.with_request_id(&rid.0).stream_event())
}

/// `GET /v1/models`: the upstream's model list as it came, for clients that list models
/// before they chat, through the same connection pool. Same callers as every route (the
/// bearer token with `--auth`).
pub(crate) async fn models(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        tenant(&state, &headers)?;
        let pool = state.upstream.clone()?;
        match pool.models().await {
            Ok(response) => Ok(response),
            Err(Failure::Api(e)) => Err(e),
            Err(Failure::Passed(response)) => Ok(response),
        }
    }
    .await;
    respond(&rid, result)
}
