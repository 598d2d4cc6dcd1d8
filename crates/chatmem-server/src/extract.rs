//! What every handler needs from a request, as axum extractors whose rejection is an
//! [`ApiError`] carrying the request's id: the request id ([`RequestId`]), the caller's
//! [`Tenant`], the conversation a path's `{id}` names for it ([`Conversation`]), a query
//! ([`ApiQuery`]), the conversation the chat completion's header names ([`HeaderConversation`]),
//! a body within the body limit ([`RawBody`]) and a JSON one ([`JsonBody`], errors naming the
//! field).
//! A handler lists what it needs in its arguments; nothing is borrowed from another handler's
//! file.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chatmem::ConversationId;
use serde::de::DeserializeOwned;

use crate::auth::{Tenant, bearer_token};
use crate::error::ApiError;
use crate::state::{AppState, RequestId};

/// Answers `result`, an error naming the request. A failure of the server's (5xx: the store,
/// the upstream) is logged at `warn`, a refusal of the client's request (4xx) at `debug`; both
/// in the request's span, so with its id.
pub(crate) fn respond(id: &RequestId, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(r) => r,
        Err(e) => named(Some(id), e).into_response(),
    }
}

/// `e`, logged as [`respond`] logs it and naming request `id`.
fn named(id: Option<&RequestId>, e: ApiError) -> ApiError {
    let (status, code) = (e.status().as_u16(), e.code().as_str());
    if e.status().is_server_error() {
        tracing::warn!(status, code, "failed");
    } else {
        tracing::debug!(status, code, "refused");
    }
    match id {
        Some(id) => e.with_request_id(&id.0),
        None => e,
    }
}

/// An extractor's refusal: `e`, logged and naming the request of `parts`.
fn refused(parts: &Parts, e: ApiError) -> ApiError {
    named(parts.extensions.get::<RequestId>(), e)
}

/// The request's id, which `app.rs` gives every request before its handler runs.
impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Always there behind `app`'s middleware; a router built otherwise gets a fresh id.
        Ok(parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(|| RequestId(format!("{:016x}", fastrand::u64(..)))))
    }
}

/// The tenant the request speaks for: with `--auth`, the one of its bearer token (401
/// otherwise); without, [`Tenant::open`].
impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        tenant(state, &parts.headers).map_err(|e| refused(parts, e))
    }
}

/// The tenant of a request with these headers (see the extractor [`Tenant`]).
fn tenant(state: &AppState, headers: &HeaderMap) -> Result<Tenant, ApiError> {
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

/// The conversation a route's `{id}` names, for the caller's tenant: the id as the client
/// wrote it (percent-decoded: `a%2Fb` is `a/b`) and the stored key `<tenant>/<id>`. The tenant
/// is checked first (401), then the id (400 when it is not UTF-8 or not a valid id, 413 over
/// the id limit).
#[derive(Debug)]
pub(crate) struct Conversation {
    /// The client's id.
    pub(crate) id: String,
    /// The stored key.
    pub(crate) key: ConversationId,
    /// Whose it is: a write checks [`Tenant::check_write`].
    pub(crate) tenant: Tenant,
}

impl FromRequestParts<AppState> for Conversation {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let tenant = Tenant::from_request_parts(parts, state).await?;
        let id = match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => id,
            Err(e) => {
                let e = ApiError::invalid(format!("the conversation id cannot be read: {}", e.body_text()));
                return Err(refused(parts, e));
            }
        };
        match key(state, &tenant, &id, "conversation id") {
            Ok(key) => Ok(Self { id, key, tenant }),
            Err(e) => Err(refused(parts, e)),
        }
    }
}

/// The header that names the conversation of a chat completion.
pub const CONVERSATION_HEADER: &str = "x-chatmem-conversation";

/// The stored key of the conversation the `X-Chatmem-Conversation` header names, for a write
/// by the caller's tenant: the header is checked first (400 without it, or when it is not
/// UTF-8), then the tenant (401), its right to write (403), and the id (400, 413 over the id
/// limit).
#[derive(Debug)]
pub(crate) struct HeaderConversation(pub(crate) ConversationId);

impl FromRequestParts<AppState> for HeaderConversation {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        header_conversation(state, &parts.headers)
            .map(Self)
            .map_err(|e| refused(parts, e))
    }
}

fn header_conversation(state: &AppState, headers: &HeaderMap) -> Result<ConversationId, ApiError> {
    let header = headers.get(CONVERSATION_HEADER).ok_or_else(|| {
        ApiError::invalid(
            "the X-Chatmem-Conversation header is required: it names the conversation whose memory the call uses",
        )
    })?;
    // UTF-8, not only visible ASCII: an id may be any text (`订单-LC202610060018`).
    let id = std::str::from_utf8(header.as_bytes())
        .map_err(|_| ApiError::invalid("the X-Chatmem-Conversation header is not UTF-8 text"))?;
    let tenant = tenant(state, headers)?;
    tenant.check_write()?;
    key(state, &tenant, id, "conversation id")
}

/// The header that names the user of a chat completion's conversation: the turn is begun
/// for that user, with their facts.
pub const USER_HEADER: &str = "x-chatmem-user";

/// The user the `X-Chatmem-User` header names, for the caller's tenant (`None` without the
/// header): 400 naming the header when it is not UTF-8 or not a valid user id, 413 over the id
/// limit.
#[derive(Debug)]
pub(crate) struct HeaderUser(pub(crate) Option<chatmem::UserId>);

impl FromRequestParts<AppState> for HeaderUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        header_user(state, &parts.headers)
            .map(Self)
            .map_err(|e| refused(parts, e))
    }
}

fn header_user(state: &AppState, headers: &HeaderMap) -> Result<Option<chatmem::UserId>, ApiError> {
    let Some(header) = headers.get(USER_HEADER) else {
        return Ok(None);
    };
    let id = std::str::from_utf8(header.as_bytes())
        .map_err(|_| ApiError::invalid("the X-Chatmem-User header is not UTF-8 text").with_param("X-Chatmem-User"))?;
    let tenant = tenant(state, headers)?;
    crate::users::user_id(state, &tenant, id, "X-Chatmem-User").map(Some)
}

/// The stored key of `id` for `tenant`; `what` names it in errors (`conversation id`, or
/// `cursor` for a listing's cursor): over the id limit is 413, otherwise invalid is 400.
pub(crate) fn key(state: &AppState, tenant: &Tenant, id: &str, what: &str) -> Result<ConversationId, ApiError> {
    let max = state.config.limits.max_id_bytes;
    if id.len() > max {
        return Err(ApiError::too_large(format!(
            "{what} is {} bytes long; the limit is {max}",
            id.len()
        )));
    }
    tenant.key(id).map_err(|e| ApiError::invalid(format!("{what}: {e}")))
}

/// The query as `T`; a bad one answers 400 in the one error shape (axum's own rejection is
/// plain text), naming the parameter.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match Query::try_from_uri(&parts.uri) {
            Ok(Query(q)) => Ok(Self(q)),
            Err(e) => Err(refused(parts, ApiError::invalid(e.body_text()))),
        }
    }
}

/// A JSON body as `T`: within the body limit (413 over it, 408 past the body deadline), parsed
/// by [`chatmem::deserialize_json`] so an error names the field (`messages[1].role`), and with
/// nothing after the value. `app.rs`'s edge rules have already refused a body not declared
/// JSON.
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let id = request.extensions().get::<RequestId>().cloned();
        let RawBody(body) = RawBody::from_request(request, state).await?;
        parse_body(&body, "request body")
            .map(Self)
            .map_err(|e| named(id.as_ref(), e))
    }
}

/// A request body as it came, within the body limit (413 over it, 408 past the body deadline).
#[derive(Debug)]
pub(crate) struct RawBody(pub(crate) Bytes);

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let id = request.extensions().get::<RequestId>().cloned();
        let body = Bytes::from_request(request, state).await;
        body_bytes(state, body).map(Self).map_err(|e| named(id.as_ref(), e))
    }
}

/// A request body within the body limit, or the error that says why not.
fn body_bytes(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if let Some(timeout) = crate::request_limits::body_timeout(&e) {
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

/// A JSON body as `T`; the error names `what` and the field that was wrong
/// (`messages[1].role`), and nothing may follow the value.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = chatmem::deserialize_json(&mut de).map_err(|e| {
        // OpenAI's `param`: the field the error is about, as the message names it.
        let param = e.path().map(str::to_owned);
        let error = ApiError::invalid(format!("invalid {what}: {e}"));
        match param {
            Some(path) => error.with_param(path),
            None => error,
        }
    })?;
    de.end()
        .map_err(|e| ApiError::invalid(format!("invalid {what}: {e}")))?;
    Ok(parsed)
}
