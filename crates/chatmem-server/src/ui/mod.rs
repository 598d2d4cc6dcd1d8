//! The memory inspector at `/ui`: web pages that show what the model sees of a conversation
//! (its history with the window marked, the summary, the budget, the prompt), for people
//! debugging an answer, and a user's facts with where they came from and their history
//! (`facts.rs`). Same tenants and tokens as the API; it reads through the same
//! [`ChatMemory`](chatmem::ChatMemory) and writes only to delete.
//!
//! - Pages are rendered on the server (maud, which escapes every value) with one small
//!   script and one style sheet, both served from the binary: nothing is fetched from
//!   elsewhere, and each page's `Content-Security-Policy` allows scripts, styles, images and
//!   requests from the server alone, with no inline script (a message's `<script>` is text,
//!   and would not run if it were not).
//! - With `--auth`, a browser signs in by posting a token (`POST /ui/sign-in`, JSON, which
//!   the edge rules require anyway) and gets a session (`session.rs`): a random id in an
//!   `HttpOnly`, `SameSite=Strict` cookie scoped to `/ui`, which only these routes read, or,
//!   behind TLS (`X-Forwarded-Proto: https`), a `__Host-` cookie with `Secure`, which no other
//!   port or subdomain of the host can set. A request carrying two session cookies (one planted
//!   with a narrower path, say) is not signed in. Signing out ends the session. A request with
//!   `Authorization: Bearer` works too. Without either, a page answers 401 with the sign-in
//!   form.
//! - Deleting is `DELETE /ui/conversations/{id}` (or `/ui/users/{user}/facts/{fact}`) from the
//!   page's script, for a token that may write; a page cannot be made to send it from another
//!   site (a `DELETE` needs a preflight, and the cookie is `SameSite=Strict`).
//! - Errors are pages holding the one error shape's status, code, message, the parameter it
//!   names, and request id.

mod facts;
mod page;
mod session;
mod view;

pub(crate) use session::Sessions;

use std::time::Instant;

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chatmem::store::{RecentCursor, now_micros};
use chatmem::{ConversationId, Message};
use serde::Deserialize;

use crate::auth::{Tenant, bearer_token};
use crate::error::ApiError;
use crate::extract::{ApiQuery, JsonBody, key};
use crate::route;
use crate::state::{AppState, RequestId};
use page::{ListRow, Paging, RecallPanel, Viewer};
use session::SESSION_LIFETIME;
use view::{BudgetBar, ConversationView};

/// The cookie that carries a signed-in browser's session id over plain HTTP.
const COOKIE: &str = "chatmem_session";
/// The same behind TLS: a `__Host-` cookie (`Secure`, `Path=/`, no domain), which browsers
/// accept only from the host itself over HTTPS.
const SECURE_COOKIE: &str = "__Host-chatmem_session";
/// Conversations on one list page.
const LIST_PAGE: usize = 50;
/// History messages on one conversation page: a 10,000-message conversation is 20 pages.
const HISTORY_PAGE: usize = 500;

/// The pages' policy: everything from the server itself, no inline script or style, no
/// framing, no form posted elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLE: &str = include_str!("assets/ui.css");
const SCRIPT: &str = include_str!("assets/ui.js");

/// The inspector's routes, merged into the app's router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(route::UI, get(list))
        .route(route::UI_SIGN_IN, post(sign_in))
        .route(route::UI_SIGN_OUT, post(sign_out))
        .route(route::UI_CONVERSATION, get(conversation).delete(delete))
        .route(route::UI_USERS, get(facts::open))
        .route(route::UI_FACTS, get(facts::facts))
        .route(route::UI_FACT, axum::routing::delete(facts::delete))
        .route(route::UI_FACT_HISTORY, get(facts::history))
        .route(
            route::UI_STYLE,
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route(
            route::UI_SCRIPT,
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A page with the headers every page has: its policy, no caching (it shows private text),
/// no sniffing, no referrer.
fn html(status: StatusCode, markup: maud::Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// An error as a page (the sign-in form for a 401), logged as the API's are.
fn error_page(rid: &RequestId, e: ApiError) -> Response {
    let status = e.status();
    if status.is_server_error() {
        tracing::warn!(status = status.as_u16(), code = e.code().as_str(), "failed");
    } else {
        tracing::debug!(status = status.as_u16(), code = e.code().as_str(), "refused");
    }
    if status == StatusCode::UNAUTHORIZED {
        return html(status, page::sign_in(None));
    }
    html(
        status,
        page::error(status.as_u16(), e.code().as_str(), e.message(), e.param(), &rid.0),
    )
}

/// Whether `path` is one of the inspector's: its errors are pages too.
pub(crate) fn is_page(path: &str) -> bool {
    path == route::UI || path.starts_with("/ui/")
}

/// The page of a path under `/ui` that no route serves, or a method it does not take.
pub(crate) fn no_such_page(rid: &RequestId, e: ApiError) -> Response {
    error_page(rid, e)
}

/// The tenant of a page's request: as the API's (a bearer token), or from the sign-in cookie.
fn viewer(state: &AppState, headers: &HeaderMap) -> Result<Tenant, ApiError> {
    let Some(auth) = &state.config.auth else {
        return Ok(Tenant::open());
    };
    let from_header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let tenant = match from_header {
        Some(token) => auth
            .tenant_for(token)
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("the token is not valid"))?,
        None => {
            let id = session_cookie(headers).ok_or_else(|| ApiError::unauthorized("sign in with a token"))?;
            state
                .sessions
                .tenant(id, Instant::now())
                .ok_or_else(|| ApiError::unauthorized("the sign-in has ended: sign in again"))?
        }
    };
    tracing::Span::current().record("tenant", tenant.name());
    Ok(tenant)
}

/// The session id of the request's one session cookie: none when it has none, or more than
/// one (a cookie another origin on the host planted beside the browser's own cannot choose
/// the session).
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    let mut ids = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE || *name == SECURE_COOKIE)
        .map(|(_, value)| value);
    match (ids.next(), ids.next()) {
        (Some(id), None) if !id.is_empty() => Some(id),
        _ => None,
    }
}

/// Whether the browser reached the server over TLS, as the proxy in front of it says. A
/// client can claim it falsely, which only makes its own cookie one its browser keeps from
/// plain HTTP.
fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The `Set-Cookie` value that keeps session `id` (empty and expired: that clears it).
fn session_cookie_header(id: &str, secure: bool, max_age: u64) -> Option<HeaderValue> {
    let cookie = if secure {
        format!("{SECURE_COOKIE}={id}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={max_age}")
    } else {
        format!("{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}")
    };
    HeaderValue::from_str(&cookie).ok()
}

fn viewing<'a>(state: &AppState, tenant: &'a Tenant) -> Viewer<'a> {
    Viewer {
        tenant: tenant.name(),
        signed_in: state.config.auth.is_some(),
    }
}

/// The query of `GET /ui`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    prefix: String,
    cursor: Option<String>,
}

/// `GET /ui`: the tenant's conversations whose id starts with the prefix, most recently
/// written first, from the cursor on; each with its counts, budget, last update and expiry.
async fn list(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    query: Result<ApiQuery<ListQuery>, ApiError>,
) -> Response {
    let ApiQuery(ListQuery { prefix, cursor }) = match query {
        Ok(query) => query,
        Err(e) => return error_page(&rid, e),
    };
    let result = async {
        let tenant = viewer(&state, &headers)?;
        // The page's cursor holds the client's id; the store's, the stored key.
        let before = match &cursor {
            None => None,
            Some(cursor) => {
                let RecentCursor { updated_micros, id } = cursor
                    .parse::<RecentCursor>()
                    .map_err(|_| ApiError::invalid("`cursor` is not a cursor this page gave"))?;
                Some(RecentCursor {
                    updated_micros,
                    id: key(&state, &tenant, id.as_str(), "cursor")?,
                })
            }
        };
        let within = format!("{}{prefix}", tenant.prefix_str());
        let page = state.memory.recent(&within, before.as_ref(), LIST_PAGE).await?;
        let policy = state.memory.policy().clone();
        let mut rows = Vec::with_capacity(page.conversations.len());
        for listed in &page.conversations {
            let Some(id) = tenant.client_id(&listed.id) else {
                continue;
            };
            let loaded = state.memory.load(&listed.id).await?;
            rows.push(ListRow {
                id: id.to_owned(),
                written: loaded.snapshot().next_seq.saturating_sub(1),
                window_len: loaded.stored_turns().count(),
                budget: BudgetBar::new(&loaded, &policy),
                updated_micros: listed.updated_micros,
                expires_micros: listed.expires_micros,
            });
        }
        let next = page.next.as_ref().and_then(|next| {
            let id = tenant.client_id(&next.id)?;
            Some(format!("{}.{id}", next.updated_micros))
        });
        let markup = page::list(viewing(&state, &tenant), &rows, &prefix, next.as_deref(), now_micros());
        Ok(html(StatusCode::OK, markup))
    }
    .await;
    result.unwrap_or_else(|e| error_page(&rid, e))
}

/// The query of a conversation page.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewQuery {
    /// The history page starts after this sequence number (default: the last page).
    from: Option<u64>,
    /// A question to show what recall would find for (empty: none asked).
    #[serde(default)]
    q: String,
}

/// `GET /ui/conversations/{id}`: one conversation (404 when the tenant has none by that id).
async fn conversation(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
    query: Result<ApiQuery<ViewQuery>, ApiError>,
) -> Response {
    let (Path(id), ApiQuery(ViewQuery { from, q })) = match (id, query) {
        (Ok(id), Ok(query)) => (id, query),
        (Err(e), _) => {
            return error_page(
                &rid,
                ApiError::invalid(format!("the conversation id: {}", e.body_text())),
            );
        }
        (_, Err(e)) => return error_page(&rid, e),
    };
    let result = async {
        let tenant = viewer(&state, &headers)?;
        let conversation = key(&state, &tenant, &id, "conversation id")?;
        let loaded = state.memory.load(&conversation).await?;
        if !loaded.snapshot().exists() {
            return Err(ApiError::not_found(format!("no conversation {id:?}")));
        }
        let written = loaded.snapshot().next_seq.saturating_sub(1);
        let asked_from = from;
        let page_len = HISTORY_PAGE as u64;
        let from = from.unwrap_or_else(|| written.saturating_sub(page_len)).min(written);
        let history = state.memory.history_page(&conversation, from, HISTORY_PAGE).await?;
        let policy = state.memory.policy().clone();
        let view = ConversationView::new(&loaded, &policy, state.memory.counter().as_ref(), &history.messages);
        let prompt: Vec<Message> = loaded.messages();
        let prompt = chatmem_openai::passthrough::messages_json(&prompt.iter().collect::<Vec<_>>());
        let prompt = page::json_shown(&serde_json::to_string_pretty(&prompt).unwrap_or_default());
        let mut recall = recall_panel(&state, &conversation, q).await?;
        recall.from = asked_from;
        let paging = Paging {
            first: history.messages.first().map(|m| m.seq),
            last: history.messages.last().map(|m| m.seq),
            earlier: (from > 0 && history.messages.first().is_some_and(|m| m.seq > 1))
                .then(|| from.saturating_sub(page_len)),
            later: history.next(),
        };
        let markup = page::conversation(
            viewing(&state, &tenant),
            &id,
            &view,
            &prompt,
            &recall,
            paging,
            tenant.can_write(),
        );
        Ok(html(StatusCode::OK, markup))
    }
    .await;
    result.unwrap_or_else(|e| error_page(&rid, e))
}

/// The page's recall panel: the server's settings, and what recall finds for `q` when a
/// question was asked (as `GET …/recall` finds it, with the server's `k`).
async fn recall_panel(state: &AppState, conversation: &ConversationId, q: String) -> Result<RecallPanel, ApiError> {
    let k = crate::recall::default_k(&state.memory);
    let settings = state.memory.recall_settings().copied();
    let (floor, budget) = settings.map_or(
        (
            chatmem::recall::DEFAULT_MIN_RELEVANCE,
            chatmem::recall::DEFAULT_RECALL_MAX_TOKENS,
        ),
        |r| (r.relevance_floor(), r.token_budget()),
    );
    let found = if q.is_empty() {
        None
    } else {
        crate::recall::find(&state.memory, conversation, &q, k).await?
    };
    Ok(RecallPanel {
        enabled: settings.is_some(),
        k,
        floor,
        budget,
        q,
        found,
        from: None,
    })
}

/// `DELETE /ui/conversations/{id}`: the page's delete button; 204, or the API's error JSON
/// (the script shows its message).
async fn delete(State(state): State<AppState>, rid: RequestId, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let result = async {
        let tenant = viewer(&state, &headers)?;
        tenant.check_write()?;
        let conversation = key(&state, &tenant, &id, "conversation id")?;
        if state.memory.clear(&conversation).await? {
            Ok(StatusCode::NO_CONTENT.into_response())
        } else {
            Err(ApiError::not_found(format!("no conversation {id:?}")))
        }
    }
    .await;
    crate::extract::respond(&rid, result)
}

/// The body of `POST /ui/sign-in`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

/// `POST /ui/sign-in`: 204 with a new session's cookie for a valid token, else 401 (JSON).
async fn sign_in(
    State(state): State<AppState>,
    rid: RequestId,
    headers: HeaderMap,
    JsonBody(body): JsonBody<SignIn>,
) -> Response {
    let result = (|| {
        let auth = state
            .config
            .auth
            .as_ref()
            .ok_or_else(|| ApiError::invalid("this server has no auth: there is nothing to sign in to"))?;
        let tenant = auth
            .tenant_for(body.token.trim())
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("the token is not valid"))?;
        let id = state.sessions.start(tenant, Instant::now())?;
        let cookie = session_cookie_header(&id, behind_tls(&headers), SESSION_LIFETIME.as_secs())
            .ok_or_else(|| ApiError::invalid("the session cannot be kept in a cookie"))?;
        Ok(([(header::SET_COOKIE, cookie)], StatusCode::NO_CONTENT).into_response())
    })();
    crate::extract::respond(&rid, result)
}

/// `POST /ui/sign-out`: 204; the session ended and both cookies cleared.
async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(id) = session_cookie(&headers) {
        state.sessions.end(id);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    for secure in [false, true] {
        if let Some(cleared) = session_cookie_header("", secure, 0) {
            response.headers_mut().append(header::SET_COOKIE, cleared);
        }
    }
    response
}
