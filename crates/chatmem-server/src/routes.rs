//! The handlers: each one checks the caller's tenant, maps the path to a stored key, calls the
//! memory, and answers JSON or an [`ApiError`].

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chatmem::{ConversationId, Message};
use serde::Deserialize;

use crate::app::{AppState, RequestId};
use crate::auth::{Tenant, bearer_token};
use crate::error::ApiError;
use crate::policy::PolicyOverride;

/// Answers `result`, an error naming the request. A failure of the server's (5xx: the store,
/// the upstream) is logged at `warn`, a refusal of the client's request (4xx) at `debug`; both
/// in the request's span, so with its id.
pub(crate) fn respond(id: &RequestId, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(r) => r,
        Err(e) => {
            let (status, code) = (e.status().as_u16(), e.code());
            if e.status().is_server_error() {
                tracing::warn!(status, code, "failed");
            } else {
                tracing::debug!(status, code, "refused");
            }
            e.with_request_id(&id.0).into_response()
        }
    }
}

/// The tenant the request speaks for.
pub(crate) fn tenant(state: &AppState, headers: &HeaderMap) -> Result<Tenant, ApiError> {
    let Some(auth) = &state.config.auth else {
        return Ok(Tenant::open());
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or_else(|| ApiError::unauthorized("an Authorization: Bearer <token> header is required"))?;
    let tenant = auth
        .tenant_for(token)
        .cloned()
        .ok_or_else(|| ApiError::unauthorized("the bearer token is not valid"))?;
    // The request's span (app.rs) names the tenant from here on; a name is configuration,
    // not user data.
    tracing::Span::current().record("tenant", tenant.name());
    Ok(tenant)
}

/// The conversation a path names, and what of it (`messages`, `history` or the conversation).
pub(crate) fn split_path(rest: &str) -> (&str, Option<&str>) {
    for what in ["messages", "history"] {
        if let Some(id) = rest.strip_suffix(what).and_then(|r| r.strip_suffix('/')) {
            return (id, Some(what));
        }
    }
    (rest, None)
}

/// The path after `/v1/conversations/`, percent-decoded; one that decodes to bytes that are not
/// UTF-8 is refused in the one error shape (axum's own rejection is plain text).
fn conversation_path(rest: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    rest.map(|Path(rest)| rest)
        .map_err(|e| ApiError::invalid(format!("the conversation path cannot be read: {}", e.body_text())))
}

/// What a conversation path names: the client's id, the part asked for, and the stored key.
struct Target<'a> {
    id: &'a str,
    what: Option<&'a str>,
    key: ConversationId,
}

/// The caller's tenant, then the conversation `rest` (the path after `/v1/conversations/`)
/// names for it.
fn target<'a>(state: &AppState, headers: &HeaderMap, rest: &'a str) -> Result<Target<'a>, ApiError> {
    let tenant = tenant(state, headers)?;
    let (id, what) = split_path(rest);
    let key = key(state, &tenant, id, "conversation id")?;
    Ok(Target { id, what, key })
}

/// The stored key of conversation `id` for the caller's tenant.
pub(crate) fn conversation_key(state: &AppState, headers: &HeaderMap, id: &str) -> Result<ConversationId, ApiError> {
    key(state, &tenant(state, headers)?, id, "conversation id")
}

/// A request body within the body limit, or the error that says why not.
pub(crate) fn body_bytes(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if let Some(timeout) = crate::serve::body_timeout(&e) {
            timeout
        } else if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(format!(
                "the request body is over the limit of {} bytes",
                state.config.limits.max_body_bytes
            ))
        } else {
            ApiError::invalid(e.body_text())
        }
    })
}

/// The stored key of `id` for `tenant`; `what` names it in errors (`conversation id`, or
/// `cursor` for a listing's cursor): over the id limit is 413, otherwise invalid is 400.
fn key(state: &AppState, tenant: &Tenant, id: &str, what: &str) -> Result<ConversationId, ApiError> {
    let max = state.config.limits.max_id_bytes;
    if id.len() > max {
        return Err(ApiError::too_large(format!(
            "{what} is {} bytes long; the limit is {max}",
            id.len()
        )));
    }
    tenant.key(id).map_err(|e| ApiError::invalid(format!("{what}: {e}")))
}

/// The answer of the message routes; written directly (not through a JSON value) so each
/// message keeps its field order, `role` first.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Window)]
pub(crate) struct WindowBody<'a> {
    /// The conversation id, as the client gave it.
    conversation: &'a str,
    /// The system message (if any) first, then the window (or, for `/history`, everything
    /// stored).
    #[schema(value_type = Vec<crate::openapi::MessageSchema>)]
    messages: &'a [Message],
}

/// The answer of `GET /v1/conversations`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ConversationPage<'a> {
    /// Ids, ascending.
    conversations: &'a [&'a str],
    /// Give it as `cursor` for the next page; null on the last page.
    next_cursor: Option<&'a str>,
}

/// The answer of `GET /healthz`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// `ok`.
    status: &'static str,
}

fn window_json(id: &str, messages: &[Message]) -> Response {
    Json(WindowBody {
        conversation: id,
        messages,
    })
    .into_response()
}

pub(crate) async fn healthz(State(state): State<AppState>, Extension(rid): Extension<RequestId>) -> Response {
    let result = state.memory.list(None, 1).await.map(drop).map_err(ApiError::from);
    respond(&rid, result.map(|()| Json(Health { status: "ok" }).into_response()))
}

/// `GET /metrics`: the server's metrics as OpenMetrics text, for the same callers as every
/// other route (a bearer token when the server has `--auth`; a scraper without one uses
/// `chatmem serve --metrics-listen`).
pub(crate) async fn metrics(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
) -> Response {
    let result = tenant(&state, &headers).map(|_| crate::metrics::respond(&state.config.metrics));
    respond(&rid, result)
}

pub(crate) async fn not_found(Extension(rid): Extension<RequestId>) -> Response {
    respond(
        &rid,
        Err(ApiError::not_found("no such route; GET /openapi.json lists them")),
    )
}

/// A known route with another method: the one error shape too (axum's own 405 has no body).
pub(crate) async fn method_not_allowed(Extension(rid): Extension<RequestId>) -> Response {
    respond(
        &rid,
        Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; the Allow header lists those it takes",
        )),
    )
}

pub(crate) async fn get_conversation(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    rest: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Response {
    let result = async {
        let rest = conversation_path(rest)?;
        let Target { id, what, key } = target(&state, &headers, &rest)?;
        let missing = || ApiError::not_found(format!("no conversation {id:?}"));
        match what {
            Some("messages") => {
                let Query(policy) = query::<PolicyOverride>(&uri)?;
                let memory = policy.apply(&state.memory, &state.config.limits, "query")?;
                let loaded = memory.load(&key).await?;
                if !loaded.snapshot().exists() {
                    return Err(missing());
                }
                Ok(window_json(id, &loaded.into_messages()))
            }
            Some("history") => {
                let Query(page) = query::<HistoryQuery>(&uri)?;
                let (after, limit) = page.bounds()?;
                let page = state.memory.history_page(&key, after, limit).await?;
                if after == 0 && page.system.is_none() && page.messages.is_empty() {
                    return Err(missing());
                }
                Ok(history_json(id, page, state.config.limits.max_body_bytes))
            }
            _ => Err(ApiError::not_found("GET /v1/conversations/{id}/messages or /history")),
        }
    }
    .await;
    respond(&rid, result)
}

/// The query of `GET …/history`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    cursor: Option<String>,
    limit: Option<usize>,
}

impl HistoryQuery {
    /// The page asked for: after which sequence number, and at most how many messages.
    fn bounds(&self) -> Result<(u64, usize), ApiError> {
        let limit = self.limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(ApiError::invalid("`limit` must be from 1 to 1000"));
        }
        let after = match &self.cursor {
            None => 0,
            Some(c) => c
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| ApiError::invalid("`cursor` is not a cursor this route gave"))?,
        };
        Ok((after, limit))
    }
}

/// The answer of `GET …/history`: a page, cut early once its text passes `max_bytes` (so a
/// page is never much larger than a request may be), with the cursor of the next.
fn history_json(id: &str, page: chatmem::HistoryPage, max_bytes: usize) -> Response {
    let mut messages: Vec<Message> = page.system.into_iter().collect();
    let mut bytes: usize = messages.iter().map(Message::payload_len).sum();
    let mut more = page.more;
    let mut last = None;
    for stored in page.messages {
        let size = stored.message.payload_len();
        if last.is_some() && bytes.saturating_add(size) > max_bytes {
            more = true;
            break;
        }
        bytes = bytes.saturating_add(size);
        last = Some(stored.seq);
        messages.push(stored.into_message());
    }
    let next = last.filter(|_| more).map(|seq| seq.to_string());
    Json(HistoryBody {
        conversation: id,
        messages: &messages,
        next_cursor: next.as_deref(),
    })
    .into_response()
}

/// The answer of `GET …/history`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = HistoryPage)]
pub(crate) struct HistoryBody<'a> {
    /// The conversation id, as the client gave it.
    conversation: &'a str,
    /// The system message first (on the first page), then stored messages in order.
    #[schema(value_type = Vec<crate::openapi::MessageSchema>)]
    messages: &'a [Message],
    /// Give it as `cursor` for the next page; null on the last page.
    next_cursor: Option<&'a str>,
}

/// The query of `uri` as `T`; a bad one answers 400 in the one error shape.
fn query<T: serde::de::DeserializeOwned>(uri: &Uri) -> Result<Query<T>, ApiError> {
    Query::try_from_uri(uri).map_err(|e| ApiError::invalid(e.body_text()))
}

/// The body of `POST …/messages`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PostMessages {
    /// The batch, committed atomically (system message rules as in `chatmem add`).
    #[schema(value_type = Vec<crate::openapi::MessageSchema>, min_items = 1)]
    messages: Vec<Message>,
    /// A window policy for this request instead of the server's.
    #[serde(default)]
    #[schema(value_type = Option<crate::policy::PolicySchema>, nullable = false)]
    policy: Option<PolicyOverride>,
}

pub(crate) async fn post_conversation(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    rest: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = async {
        let rest = conversation_path(rest)?;
        let Target { id, what, key } = target(&state, &headers, &rest)?;
        if what != Some("messages") {
            return Err(ApiError::not_found("POST /v1/conversations/{id}/messages"));
        }
        let body = body_bytes(&state, body)?;
        let PostMessages { messages, policy } = parse_messages(&state, &body)?;
        let memory = policy
            .unwrap_or_default()
            .apply(&state.memory, &state.config.limits, "policy")?;
        let mut turn = memory.begin(&key).await?;
        turn.extend(messages);
        let after = turn.commit_window().await?;
        tracing::debug!("messages committed");
        Ok((StatusCode::OK, window_json(id, &after.into_messages())).into_response())
    }
    .await;
    respond(&rid, result)
}

/// A JSON body as `T`; the error names `what` and the field that was wrong
/// (`messages[1].role`), and nothing may follow the value.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T =
        chatmem::deserialize_json(&mut de).map_err(|e| ApiError::invalid(format!("invalid {what}: {e}")))?;
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid {what}: {e}")))?;
    Ok(parsed)
}

/// `{"messages": [...]}` checked against the limits; errors name the field.
fn parse_messages(state: &AppState, body: &[u8]) -> Result<PostMessages, ApiError> {
    let parsed: PostMessages = parse_body(body, "request body")?;
    if parsed.messages.is_empty() {
        return Err(ApiError::invalid("`messages` is empty"));
    }
    state.config.limits.batch.check(&parsed.messages)?;
    Ok(parsed)
}

pub(crate) async fn delete_conversation(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    rest: Result<Path<String>, PathRejection>,
) -> Response {
    let result = async {
        let rest = conversation_path(rest)?;
        let Target { id, what, key } = target(&state, &headers, &rest)?;
        if what.is_some() {
            return Err(ApiError::not_found("DELETE /v1/conversations/{id}"));
        }
        if state.memory.clear(&key).await? {
            Ok(StatusCode::NO_CONTENT.into_response())
        } else {
            Err(ApiError::not_found(format!("no conversation {id:?}")))
        }
    }
    .await;
    respond(&rid, result)
}

/// The query of `GET /v1/conversations`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    cursor: Option<String>,
    limit: Option<usize>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(rid): Extension<RequestId>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let result = async {
        let tenant = tenant(&state, &headers)?;
        let Query(query) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
        let limit = query.limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(ApiError::invalid("`limit` must be from 1 to 1000"));
        }
        // From the tenant's cursor or its first key, to the first key that is not its.
        let after = match &query.cursor {
            Some(cursor) => Some(key(&state, &tenant, cursor, "cursor")?),
            None => tenant.list_start().cloned(),
        };
        let page = state.memory.list(after.as_ref(), limit + 1).await?;
        let mine: Vec<&str> = page.ids.iter().map_while(|k| tenant.client_id(k)).collect();
        let more = mine.len() > limit;
        let ids = &mine[..mine.len().min(limit)];
        let next = if more { ids.last().copied() } else { None };
        Ok(Json(ConversationPage {
            conversations: ids,
            next_cursor: next,
        })
        .into_response())
    }
    .await;
    respond(&rid, result)
}
