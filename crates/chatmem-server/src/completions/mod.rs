//! `POST /v1/chat/completions`: OpenAI's chat-completions endpoint with memory, as a
//! pass-through proxy. The `X-Chatmem-Conversation` header names the conversation. The
//! client's request goes upstream as it was sent (every field, in its order and types), with
//! `messages` replaced by memory's window and the turn's new messages; the answer comes back
//! as the upstream sent it, plain or as server-sent events, and the turn is committed once
//! the answer is complete (before the stream's `[DONE]` is passed on). A failed call, or a
//! client that hangs up mid-stream, commits nothing.
//!
//! - `request.rs`: the request as the proxy reads it (`messages`, `stream`, `n`);
//! - [`Exchange`]: one call, from the turn begun to the answer passed on, whole ([`whole`]) or
//!   streamed ([`streamed`]);
//! - `sse.rs`: a stream split into events without changing a byte.

mod request;
mod sse;

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use chatmem::{ChatMemory, ConversationId, DeltaAccumulator, Store, Turn, UserId};
use chatmem_openai::passthrough::{messages_json, read_chunk, read_completion};
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use self::request::ChatRequest;
use crate::auth::Tenant;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{HeaderConversation, HeaderUser, RawBody, respond};
use crate::openapi::{ForbiddenWrite, NotJson, Unauthorized, UpstreamTimeout};
use crate::schemas::{ChatCompletion, ChatCompletionRequest, ModelList};
use crate::state::{AppState, RequestId};
use crate::upstream::{Failure, Head, UpstreamPool};

/// `POST /v1/chat/completions`: the conversation of the `X-Chatmem-Conversation` header, the
/// request read, then the exchange with the upstream.
#[utoipa::path(post, path = "/v1/chat/completions",
    params(("X-Chatmem-Conversation" = String, Header, description = "the conversation whose memory the call uses (UTF-8; any id the REST routes take)"),
           ("X-Chatmem-User" = Option<String>, Header, description = "the conversation's user (UTF-8; any id the facts routes take): the turn is sent with the user's facts, and with a facts model the user's messages are read for more")),
    request_body(content = ChatCompletionRequest, description = "OpenAI's chat-completion request"),
    responses((status = 200, description = "the upstream's chat completion, after the turn was committed; with `\"stream\": true`, server-sent events (`data: ` a `ChatCompletionChunk`, then `data: [DONE]`), the turn committed before `[DONE]`",
               content((ChatCompletion = "application/json"), (String = "text/event-stream"))),
              Unauthorized, ForbiddenWrite, NotJson, UpstreamTimeout,
              (status = 400, description = "an invalid request (the message names the field, e.g. `n` or `messages[0].role`), no conversation header, an invalid `X-Chatmem-User` header (`param` names it), or the upstream's own 400 passed through", body = ErrorBody),
              (status = 404, description = "the upstream's 404 (an unknown model), passed through", body = ErrorBody),
              (status = 409, description = "the upstream's 409, or too many concurrent writers to the conversation", body = ErrorBody),
              (status = 413, description = "over a limit (body, messages per request, text per message, id), or the upstream's 413", body = ErrorBody),
              (status = 422, description = "the upstream's 422, passed through", body = ErrorBody),
              (status = 429, description = "the upstream's rate limit, passed through with its `Retry-After` and `x-ratelimit-*` headers", body = ErrorBody,
               headers(("Retry-After" = String, description = "seconds (or a date) to wait, as the upstream said"))),
              (status = 502, description = "the upstream failed (a 5xx, its 401 or 403 about chatmem's key, or no connection); the message names its status, never its body", body = ErrorBody),
              (status = 503, description = "no upstream is configured, or the store does not answer", body = ErrorBody)))]
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    rid: RequestId,
    HeaderConversation(key): HeaderConversation,
    HeaderUser(user): HeaderUser,
    RawBody(body): RawBody,
) -> Response {
    let result = async {
        let request = ChatRequest::parse(&body, &state.config.limits)?;
        let pool = state.upstream.clone()?;
        let exchange = Exchange {
            memory: Arc::clone(&state.memory),
            pool,
            key,
            user,
            request,
            rid: rid.clone(),
        };
        exchange.answer().await
    }
    .await;
    respond(&rid, result)
}

/// What the answer is made of: a whole response, or a head and then body chunks.
enum Part {
    Whole(Response),
    Head(Head),
    Chunk(Bytes),
}

/// One chat completion with memory: the turn begun and given the request's new messages, its
/// prompt put in the request, the request sent upstream, the answer read, committed and passed
/// on. It owns what the answer's body needs, so that the turn (which borrows the memory)
/// lives as long as the body, and ends with it: a client that hangs up drops it uncommitted.
struct Exchange {
    memory: Arc<ChatMemory<Arc<dyn Store>>>,
    pool: Arc<UpstreamPool>,
    key: ConversationId,
    /// The conversation's user, whose facts the turn is sent with.
    user: Option<UserId>,
    request: ChatRequest,
    rid: RequestId,
}

impl Exchange {
    /// Runs the exchange and answers with its first part; a streamed answer's body is the
    /// rest, sent as it comes.
    async fn answer(self) -> Result<Response, ApiError> {
        let mut parts = Box::pin(self.parts());
        match parts.next().await {
            Some(Ok(Part::Whole(response))) => Ok(response),
            Some(Ok(Part::Head(head))) => {
                let chunks = parts.filter_map(|p| async move {
                    match p {
                        Ok(Part::Chunk(bytes)) => Some(Ok::<_, Infallible>(bytes)),
                        _ => None,
                    }
                });
                Ok(head.respond(Body::from_stream(chunks)))
            }
            Some(Ok(Part::Chunk(_))) | None => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal,
                "the answer had no head",
            )),
            Some(Err(e)) => Err(e),
        }
    }

    /// The exchange as the parts of its answer.
    fn parts(self) -> impl Stream<Item = Result<Part, ApiError>> + Send {
        // The stream runs after the handler (and its span) returned: its lines are logged in
        // the request's span all the same.
        let span = tracing::Span::current();
        let Self {
            memory,
            pool,
            key,
            user,
            request,
            rid,
        } = self;
        async_stream::stream! {
            let ChatRequest { body, messages, stream } = request;
            let begun = match &user {
                Some(user) => memory.begin_as(&key, user).await,
                None => memory.begin(&key).await,
            };
            let mut turn = match begun {
                Ok(turn) => turn,
                Err(e) => {
                    yield Err(ApiError::from(e));
                    return;
                }
            };
            let recalls = memory.recall_settings().is_some();
            let (response, deadline) = match send(&pool, &mut turn, recalls, body, messages, &span).await {
                Ok(sent) => sent,
                Err(Failure::Api(e)) => {
                    yield Err(e);
                    return;
                }
                Err(Failure::Passed(refusal)) => {
                    yield Ok(Part::Whole(refusal.respond(&rid)));
                    return;
                }
            };
            let head = Head::of(&response);
            if !stream || !is_event_stream(head.content_type()) {
                yield whole(&pool, turn, response, deadline, stream, &span).await.map(Part::Whole);
                return;
            }
            yield Ok(Part::Head(head));
            let mut chunks = std::pin::pin!(streamed(&pool, turn, response, &rid, &span));
            while let Some(chunk) = chunks.next().await {
                yield Ok(Part::Chunk(chunk));
            }
        }
    }
}

/// Gives the turn the request's new messages and, when the memory `recalls`, what recall finds
/// for them; puts its prompt in the request in place of the client's `messages`, and sends it
/// upstream: the 2xx response head and the deadline of a whole answer.
async fn send(
    pool: &UpstreamPool,
    turn: &mut Turn<'_, Arc<dyn Store>>,
    recalls: bool,
    mut body: serde_json::Map<String, Value>,
    messages: Vec<chatmem::Message>,
    span: &tracing::Span,
) -> Result<(reqwest::Response, tokio::time::Instant), Failure> {
    let skipped = turn.push_unstored(messages);
    let recalled = crate::recall::recall_for(turn, recalls).await.map_err(ApiError::from)?;
    let prompt = turn.prompt();
    span.in_scope(|| {
        tracing::debug!(
            loaded = turn.loaded().snapshot().messages.len(),
            already_stored = skipped,
            recalled = recalled.seqs.len(),
            prompt = prompt.len(),
            "turn prepared"
        )
    });
    if let Some(slot) = body.get_mut("messages") {
        *slot = messages_json(&prompt);
    }
    drop(prompt);
    let cleared = turn.cleared();
    let sent = serde_json::to_vec(&body).map_err(|e| ApiError::invalid(format!("the request cannot be sent: {e}")))?;
    drop(body);
    let deadline = tokio::time::Instant::now() + pool.timeout();
    pool.metrics().cleared(cleared);
    pool.metrics().recalled(&recalled);
    let response = pool.chat(sent).await?;
    Ok((response, deadline))
}

/// Whether a response's content type is server-sent events.
fn is_event_stream(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"))
}

/// A whole answer: read within `deadline`, committed, then passed on as it came. A stream was
/// asked for and this is not one: the upstream's answer cannot be read.
async fn whole(
    pool: &UpstreamPool,
    mut turn: Turn<'_, Arc<dyn Store>>,
    response: reqwest::Response,
    deadline: tokio::time::Instant,
    stream: bool,
    span: &tracing::Span,
) -> Result<Response, ApiError> {
    let head = Head::of(&response);
    let bytes = pool.read_body(response, deadline).await?;
    if stream {
        return Err(pool.unreadable("a stream was asked for, and the answer is not server-sent events"));
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| pool.unreadable(&format!("it is not JSON ({e})")))?;
    if value.get("error").is_some() {
        // An error in a 200 (some providers send these): the upstream failed, and its text is
        // not passed on.
        pool.metrics().upstream_error(chatmem::ModelErrorKind::Server);
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamError,
            "the upstream model failed (an error in a 200 answer)",
        ));
    }
    pool.count_usage(value.get("usage"));
    let answer = read_completion(value).map_err(|e| pool.unreadable(&e.to_string()))?;
    turn.push(answer.message);
    if let Err(e) = turn.commit().await {
        span.in_scope(|| tracing::warn!("the turn was answered but not committed"));
        return Err(ApiError::from(e));
    }
    Ok(head.respond(bytes))
}

/// A streamed answer's body: each event passed on as it came while the answer is gathered;
/// `[DONE]` (and whatever follows it) held back until the turn is committed. A failure ends
/// the stream with an error event instead.
fn streamed<'a>(
    pool: &'a UpstreamPool,
    turn: Turn<'a, Arc<dyn Store>>,
    mut response: reqwest::Response,
    rid: &'a RequestId,
    span: &'a tracing::Span,
) -> impl Stream<Item = Bytes> + Send + 'a {
    let failed = move |e: ApiError| {
        span.in_scope(|| {
            tracing::warn!(
                status = e.status().as_u16(),
                code = e.code().as_str(),
                "the stream failed"
            )
        });
        error_event(e, rid)
    };
    async_stream::stream! {
        let mut events = sse::Splitter::default();
        let mut gathered = Gathered::default();
        loop {
            let chunk = match tokio::time::timeout(pool.timeout(), response.chunk()).await {
                Err(_) => {
                    yield failed(pool.timed_out());
                    return;
                }
                Ok(Err(e)) => {
                    yield failed(pool.unreachable(&e));
                    return;
                }
                Ok(Ok(chunk)) => chunk,
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
                match gathered.take(pool, event) {
                    Ok(Some(bytes)) => yield bytes,
                    Ok(None) => {}
                    Err(e) => {
                        yield failed(e);
                        return;
                    }
                }
            }
            if ended {
                break;
            }
        }
        match gathered.commit(pool, turn, span).await {
            Ok(held) => {
                for bytes in held {
                    yield bytes;
                }
            }
            Err(e) => yield failed(e),
        }
    }
}

/// A streamed answer as it is read: the answer's deltas joined, whether the model finished,
/// and the events held back (from `[DONE]` on) until the turn is committed.
#[derive(Default)]
struct Gathered {
    answer: DeltaAccumulator,
    finished: bool,
    held: Vec<Bytes>,
}

impl Gathered {
    /// Takes one event: its bytes to pass on now, `None` when it is held back, or the error
    /// that ends the stream (an event that does not read, or the upstream's error).
    fn take(&mut self, pool: &UpstreamPool, event: sse::Event) -> Result<Option<Bytes>, ApiError> {
        if !self.held.is_empty() || event.data.as_deref() == Some("[DONE]") {
            self.held.push(event.raw);
            return Ok(None);
        }
        if let Some(data) = event.data.as_deref() {
            let value: Value =
                serde_json::from_str(data).map_err(|e| pool.unreadable(&format!("an event is not JSON ({e})")))?;
            if value.get("error").is_some() {
                // The upstream failed mid-stream: its text is not passed on.
                pool.metrics().upstream_error(chatmem::ModelErrorKind::Server);
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    ErrorCode::UpstreamError,
                    "the upstream model failed mid-stream",
                ));
            }
            if value.get("usage").is_some_and(Value::is_object) {
                pool.count_usage(value.get("usage"));
            }
            if let Some(delta) = read_chunk(value).map_err(|e| pool.unreadable(&e.to_string()))? {
                self.finished |= delta.finish_reason.is_some();
                self.answer.push(&delta);
            }
        }
        Ok(Some(event.raw))
    }

    /// Once the stream ended: the answer committed with the turn, and the events held back.
    async fn commit(
        self,
        pool: &UpstreamPool,
        mut turn: Turn<'_, Arc<dyn Store>>,
        span: &tracing::Span,
    ) -> Result<Vec<Bytes>, ApiError> {
        if !self.finished {
            return Err(pool.unreadable("the stream ended before the model finished"));
        }
        let answer = self.answer.finish().map_err(|e| pool.unreadable(&e.to_string()))?;
        turn.push(answer.message);
        if let Err(e) = turn.commit().await {
            span.in_scope(|| tracing::warn!("the turn was answered but not committed"));
            return Err(ApiError::from(e));
        }
        Ok(self.held)
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
#[utoipa::path(get, path = "/v1/models",
    responses((status = 200, description = "the upstream's `GET /models` answer, as it came", body = ModelList),
              (status = 502, description = "the upstream failed; the message names its status", body = ErrorBody),
              (status = 503, description = "no upstream is configured", body = ErrorBody),
              Unauthorized, UpstreamTimeout))]
pub(crate) async fn models(State(state): State<AppState>, rid: RequestId, _: Tenant) -> Response {
    let result = async {
        let pool = state.upstream.clone()?;
        match pool.models().await {
            Ok(response) => Ok(response),
            Err(Failure::Api(e)) => Err(e),
            Err(Failure::Passed(refusal)) => Ok(refusal.respond(&rid)),
        }
    }
    .await;
    respond(&rid, result)
}
