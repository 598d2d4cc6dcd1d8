//! The handlers of the memory API and the server's own routes. Each takes what it needs as
//! extractors (`extract.rs`: the request id, the tenant, the conversation of the path's `{id}`,
//! the query, the JSON body), calls the memory, and answers JSON or an [`ApiError`].

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chatmem::{Message, TokenCounter};
use serde::Deserialize;

use crate::auth::Tenant;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiQuery, Conversation, JsonBody, key, respond};
use crate::openapi::{ForbiddenWrite, IdTooLong, NoConversation, NotJson, StoreDown, Unauthorized};
use crate::policy::{ClearQuerySchema, PolicyOverride, PolicyQuery, PolicySchema};
use crate::state::{AppState, RequestId};

/// The answer of the message routes; written directly (not through a JSON value) so each
/// message keeps its field order, `role` first.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Window)]
pub(crate) struct WindowBody<'a> {
    /// The conversation id, as the client gave it.
    conversation: &'a str,
    /// The system message (if any) first, then the window (or, for `/history`, everything
    /// stored).
    #[schema(value_type = Vec<crate::schemas::MessageSchema>)]
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

/// `GET /healthz`: 200 when the store answers.
#[utoipa::path(get, path = "/healthz", security(()),
    responses((status = 200, description = "the store answers", body = Health),
              StoreDown))]
pub(crate) async fn healthz(State(state): State<AppState>, rid: RequestId) -> Response {
    let result = state.memory.list(None, 1).await.map(drop).map_err(ApiError::from);
    respond(&rid, result.map(|()| Json(Health { status: "ok" }).into_response()))
}

/// `GET /metrics`: the server's metrics in the format the `Accept` header asks for, for the same callers as every other route (a bearer token when the server
/// has `--auth`; a scraper without one uses `chatmem serve --metrics-listen`).
#[utoipa::path(get, path = "/metrics",
    responses((status = 200, description = "requests by route template, method and status, latency histograms, commits, version conflicts, store and upstream errors, summaries, what clearing and recall did to the prompts sent upstream; as OpenMetrics 1.0.0 when the `Accept` header prefers `application/openmetrics-text` (as Prometheus's does), otherwise (no `Accept`, `*/*`, `text/plain`) as Prometheus's text format 0.0.4 (`Vary: Accept`)",
               content((String = "text/plain"), (String = "application/openmetrics-text"))),
              (status = 401, description = "with `--auth`, no valid bearer token (a scraper without one uses `--metrics-listen`)", body = ErrorBody)))]
pub(crate) async fn metrics(State(state): State<AppState>, _: Tenant, headers: HeaderMap) -> Response {
    crate::metrics::respond(&state.config.metrics, &headers)
}

/// Any path no route serves. A conversation path with more segments than a route has most
/// likely holds an id with a `/` sent as is: the message says how to send one.
pub(crate) async fn not_found(rid: RequestId, uri: Uri) -> Response {
    if crate::ui::is_page(uri.path()) {
        return crate::ui::no_such_page(&rid, ApiError::not_found("no such page; the inspector starts at /ui"));
    }
    let message = if uri.path().starts_with("/v1/conversations/") {
        "no such route; a `/` in a conversation id is sent as %2F (GET /openapi.json lists the routes)"
    } else {
        "no such route; GET /openapi.json lists them"
    };
    respond(&rid, Err(ApiError::not_found(message)))
}

/// A known route with another method: the one error shape too (axum's own 405 has no body).
pub(crate) async fn method_not_allowed(rid: RequestId, uri: Uri) -> Response {
    let e = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "this route does not take that method; the Allow header lists those it takes",
    );
    if crate::ui::is_page(uri.path()) {
        return crate::ui::no_such_page(&rid, e);
    }
    respond(&rid, Err(e))
}

/// The 404 of a conversation that does not exist (for this tenant).
fn missing(id: &str) -> ApiError {
    ApiError::not_found(format!("no conversation {id:?}"))
}

/// `GET /v1/conversations/{id}/messages`: the window the model sees, by the server's policy
/// or the one the query asks for.
#[utoipa::path(get, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`"), PolicySchema, ClearQuerySchema),
    responses((status = 200, description = "the window the model sees", body = WindowBody),
              (status = 400, description = "an invalid id or policy, named", body = ErrorBody),
              (status = 414, description = "a request URI over the server's URI limit (a long `clear_tool_results.exclude_tools` list, most likely)", body = ErrorBody),
              Unauthorized, NoConversation, IdTooLong, StoreDown))]
pub(crate) async fn get_messages(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, .. }: Conversation,
    ApiQuery(PolicyQuery(policy)): ApiQuery<PolicyQuery>,
) -> Response {
    let result = async {
        let memory = policy.apply(&state.memory, &state.config.limits, "query")?;
        let loaded = memory.load(&key).await?;
        if !loaded.snapshot().exists() {
            return Err(missing(&id));
        }
        Ok(window_json(&id, &loaded.into_messages()))
    }
    .await;
    respond(&rid, result)
}

/// `GET /v1/conversations/{id}/history`: a page of everything stored.
#[utoipa::path(get, path = "/v1/conversations/{id}/history",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`"),
           ("cursor" = Option<String>, Query, description = "the previous page's `next_cursor`"),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000 messages (default 100); a page also ends once it holds about the body limit's bytes of text")),
    responses((status = 200, description = "one page of everything stored, oldest first", body = HistoryBody),
              (status = 400, description = "an invalid id, `limit` or `cursor`", body = ErrorBody),
              Unauthorized, NoConversation, IdTooLong, StoreDown))]
pub(crate) async fn get_history(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, .. }: Conversation,
    ApiQuery(page): ApiQuery<HistoryQuery>,
) -> Response {
    let result = async {
        let (after, limit) = page.bounds()?;
        let page = state.memory.history_page(&key, after, limit).await?;
        if page.system.is_none() && page.messages.is_empty() {
            // An empty page past a cursor is the end of a conversation that exists, or a
            // conversation that does not (deleted since the cursor was given): the first page
            // tells which.
            let exists = after > 0 && {
                let first = state.memory.history_page(&key, 0, 1).await?;
                first.system.is_some() || !first.messages.is_empty()
            };
            if !exists {
                return Err(missing(&id));
            }
        }
        Ok(history_json(&id, page, state.config.limits.max_body_bytes))
    }
    .await;
    respond(&rid, result)
}

/// The query of `GET …/history`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HistoryQuery {
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
            Some(c) => Some(c)
                .filter(|c| is_cursor(c))
                .and_then(|c| c.parse::<u64>().ok())
                .ok_or_else(|| ApiError::invalid("`cursor` is not a cursor this route gave"))?,
        };
        Ok((after, limit))
    }
}

/// Whether `c` is written as `next_cursor` writes one, and as the document's pattern
/// ([`HISTORY_CURSOR_PATTERN`](crate::openapi_schemas::HISTORY_CURSOR_PATTERN)) says: a
/// positive decimal of at most 19 digits, no sign, no leading zero.
fn is_cursor(c: &str) -> bool {
    let digits = c.as_bytes();
    (1..=19).contains(&digits.len()) && digits[0] != b'0' && digits.iter().all(u8::is_ascii_digit)
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
    #[schema(value_type = Vec<crate::schemas::MessageSchema>)]
    messages: &'a [Message],
    /// Give it as `cursor` for the next page; null on the last page.
    next_cursor: Option<&'a str>,
}

/// The body of `POST …/messages`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PostMessages {
    /// The batch, committed atomically (system message rules as in `chatmem add`).
    #[schema(value_type = Vec<crate::schemas::MessageSchema>, min_items = 1)]
    messages: Vec<Message>,
    /// A window policy for this request instead of the server's.
    #[serde(default)]
    #[schema(value_type = Option<crate::policy::PolicySchema>, nullable = false)]
    policy: Option<PolicyOverride>,
    /// The conversation's user (any id the facts routes take): the turn is begun for them,
    /// with their facts (and, with a facts model, their messages read for more).
    #[serde(default)]
    #[schema(nullable = false, min_length = 1)]
    user: Option<String>,
}

/// `POST /v1/conversations/{id}/messages`: the batch committed atomically; the window after.
#[utoipa::path(post, path = "/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`")),
    request_body = PostMessages,
    responses((status = 200, description = "committed atomically; the window after the commit", body = WindowBody),
              (status = 400, description = "an invalid id, body or policy; the message names the field", body = ErrorBody),
              (status = 408, description = "the body did not arrive within the body timeout", body = ErrorBody),
              (status = 409, description = "too many concurrent writers to the conversation; retry", body = ErrorBody),
              (status = 413, description = "over a limit (body, messages per request, text per message, id)", body = ErrorBody),
              Unauthorized, ForbiddenWrite, NotJson, StoreDown))]
pub(crate) async fn post_messages(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, tenant }: Conversation,
    JsonBody(PostMessages { messages, policy, user }): JsonBody<PostMessages>,
) -> Response {
    let result = async {
        tenant.check_write()?;
        if messages.is_empty() {
            return Err(ApiError::invalid("`messages` is empty"));
        }
        state.config.limits.batch.check(&messages)?;
        let memory = policy
            .unwrap_or_default()
            .apply(&state.memory, &state.config.limits, "policy")?;
        let user = user
            .map(|u| crate::users::user_id(&state, &tenant, &u, "user"))
            .transpose()?;
        let mut turn = begin(&memory, &key, user.as_ref()).await?;
        turn.extend(messages);
        let after = turn.commit_window().await?;
        tracing::debug!("messages committed");
        Ok(window_json(&id, &after.into_messages()))
    }
    .await;
    respond(&rid, result)
}

/// A turn on conversation `key`, begun for `user` (with their facts) when one is named.
async fn begin<'m>(
    memory: &'m chatmem::ChatMemory<std::sync::Arc<dyn chatmem::Store>>,
    key: &chatmem::ConversationId,
    user: Option<&chatmem::UserId>,
) -> Result<chatmem::Turn<'m, std::sync::Arc<dyn chatmem::Store>>, chatmem::Error> {
    match user {
        Some(user) => memory.begin_as(key, user).await,
        None => memory.begin(key).await,
    }
}

/// The body of `POST …/prompt`: what `POST …/messages` takes, read the same way.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromptRequest {
    /// The messages to say next, as `POST …/messages` takes them (or a whole conversation
    /// resent: what memory already holds is left out, as the OpenAI door does). Empty: the
    /// prompt as it stands.
    #[schema(value_type = Vec<crate::schemas::MessageSchema>)]
    messages: Vec<Message>,
    /// A window policy for this request instead of the server's.
    #[serde(default)]
    #[schema(value_type = Option<crate::policy::PolicySchema>, nullable = false)]
    policy: Option<PolicyOverride>,
    /// The conversation's user (any id the facts routes take): the turn is begun for them,
    /// with their facts (and, with a facts model, their messages read for more).
    #[serde(default)]
    #[schema(nullable = false, min_length = 1)]
    user: Option<String>,
}

/// The answer of `POST …/prompt`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Prompt)]
pub(crate) struct PromptBody<'a> {
    /// The conversation id, as the client gave it.
    conversation: &'a str,
    /// What the next model call is sent, as the OpenAI door sends it: the system message
    /// (with the summary), the window, the new messages; old tool results cleared as the
    /// policy says; never `reasoning_content`, `metadata` or `is_error`.
    #[schema(value_type = Vec<crate::schemas::MessageSchema>)]
    messages: serde_json::Value,
    /// The prompt's tokens, by the memory's counter (the policy's tokenizer), the list's
    /// overhead included.
    tokens: usize,
    /// Of the request's messages, how many memory already holds (left out of the prompt's
    /// new messages).
    already_stored: usize,
    /// What clearing old tool results took out of the prompt.
    cleared: ClearedBody,
    /// What recall put in the prompt (nothing when the server does not recall).
    recalled: RecalledBody,
}

/// What recall put in a prompt: the messages that left the window and came back for the new
/// user message, sent in one user message just before it.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Recalled)]
pub(crate) struct RecalledBody {
    /// The recalled messages' sequence numbers (as in `…/history`), oldest first; empty when
    /// nothing was recalled.
    seqs: Vec<u64>,
    /// The tokens of the message they are sent in (0 when nothing was recalled).
    tokens: usize,
}

/// What clearing took out of a prompt (`chatmem::Cleared`).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Cleared)]
pub(crate) struct ClearedBody {
    /// Tool results sent as placeholders.
    results: usize,
    /// Calls sent with their arguments cleared (`{}`).
    inputs: usize,
    /// The tokens the window would cost uncleared, less what it costs as sent.
    tokens_saved: u64,
}

/// `POST /v1/conversations/{id}/prompt`: a dry run. What the next model call would be sent if
/// these messages were said now, as the OpenAI door would send it (with what recall finds for
/// the new user message, when the server recalls); nothing is committed. A conversation that
/// does not exist yet is no error: its prompt is the new messages.
#[utoipa::path(post, path = "/v1/conversations/{id}/prompt",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`")),
    request_body = PromptRequest,
    responses((status = 200, description = "the prompt the next model call would be sent; nothing was committed", body = PromptBody),
              (status = 400, description = "an invalid id, body or policy; the message names the field", body = ErrorBody),
              (status = 403, description = "a Host or Origin the server does not answer to", body = ErrorBody),
              (status = 408, description = "the body did not arrive within the body timeout", body = ErrorBody),
              (status = 413, description = "over a limit (body, messages per request, text per message, id)", body = ErrorBody),
              Unauthorized, NotJson, StoreDown))]
pub(crate) async fn post_prompt(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, tenant }: Conversation,
    JsonBody(PromptRequest { messages, policy, user }): JsonBody<PromptRequest>,
) -> Response {
    let result = async {
        state.config.limits.batch.check(&messages)?;
        let memory = policy
            .unwrap_or_default()
            .apply(&state.memory, &state.config.limits, "policy")?;
        // Begun as a write is, given the messages as the door gives them, then dropped
        // uncommitted.
        let user = user
            .map(|u| crate::users::user_id(&state, &tenant, &u, "user"))
            .transpose()?;
        let mut turn = begin(&memory, &key, user.as_ref()).await?;
        let already_stored = turn.push_unstored(messages);
        // As the door does: the search, then the prompt with what it found.
        let recalled = crate::recall::recall_for(&mut turn, memory.recall_settings().is_some()).await?;
        let prompt = turn.prompt();
        let chatmem::Cleared {
            results,
            inputs,
            tokens_saved,
        } = turn.cleared();
        Ok(Json(PromptBody {
            conversation: &id,
            messages: chatmem_openai::passthrough::messages_json(&prompt),
            tokens: memory.counter().count_messages(&prompt),
            already_stored,
            cleared: ClearedBody {
                results,
                inputs,
                tokens_saved,
            },
            recalled: RecalledBody {
                seqs: recalled.seqs,
                tokens: recalled.tokens,
            },
        })
        .into_response())
    }
    .await;
    respond(&rid, result)
}

/// `DELETE /v1/conversations/{id}`: 204, or 404 when there was nothing to delete.
#[utoipa::path(delete, path = "/v1/conversations/{id}",
    params(("id" = String, Path, description = "the conversation id, one path segment: a `/` in it is sent as `%2F`")),
    responses((status = 204, description = "deleted: window, history and summary"),
              (status = 400, description = "an invalid id", body = ErrorBody),
              (status = 403, description = "a read-only token (`read_only_token`)", body = ErrorBody),
              Unauthorized, NoConversation, IdTooLong, StoreDown))]
pub(crate) async fn delete_conversation(
    State(state): State<AppState>,
    rid: RequestId,
    Conversation { id, key, tenant }: Conversation,
) -> Response {
    let result = async {
        tenant.check_write()?;
        if state.memory.clear(&key).await? {
            Ok(StatusCode::NO_CONTENT.into_response())
        } else {
            Err(missing(&id))
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

/// `GET /v1/conversations`: the tenant's ids, a page at a time.
#[utoipa::path(get, operation_id = "list_conversations", path = "/v1/conversations",
    params(("cursor" = Option<String>, Query, description = "the last id of the previous page"),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "1 to 1000 (default 100)")),
    responses((status = 200, description = "a page of the tenant's conversation ids", body = ConversationPage),
              (status = 400, description = "an invalid `limit` or `cursor`, or an unknown parameter", body = ErrorBody),
              (status = 413, description = "a `cursor` over the id limit", body = ErrorBody),
              Unauthorized, StoreDown))]
pub(crate) async fn list(
    State(state): State<AppState>,
    rid: RequestId,
    tenant: Tenant,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Response {
    let result = async {
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
