//! [`ApiError`]: the one error type of the server, [`ErrorCode`] its codes, and [`ErrorBody`]
//! the one JSON shape every error the server sends has:
//! `{"error": {"code": "...", "message": "...", "type": "...", "param": ..., "request_id": "..."}}`
//! (OpenAI's error object, so OpenAI clients read chatmem's errors as their own, plus the
//! request id). REST answers, the listener's refusals, a stream's error event and the
//! stand-in for an upstream's unreadable refusal are all built from it.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

mod code;

pub use self::code::ErrorCode;

/// An error answered to a client: a status, a stable machine-readable `code` and a one-line
/// `message` (escaped with [`chatmem::printable::printable`], so it never carries raw control characters
/// from the request).
///
/// ```
/// use chatmem_server::ApiError;
/// let e = ApiError::not_found("no conversation \"c1\"");
/// assert_eq!(e.status().as_u16(), 404);
/// assert_eq!(e.code(), chatmem_server::ErrorCode::NotFound);
/// assert_eq!(e.code().as_str(), "not_found");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    param: Option<String>,
    request_id: Option<String>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl AsRef<str>) -> Self {
        Self {
            status,
            code,
            message: chatmem::printable::printable(message.as_ref()).into_owned(),
            param: None,
            request_id: None,
        }
    }

    /// The same error, naming the request field it is about (OpenAI's `param`: `n`,
    /// `messages[1].role`).
    ///
    /// ```
    /// let e = chatmem_server::ApiError::invalid("`n` must be 1").with_param("n");
    /// assert_eq!(e.param(), Some("n"));
    /// ```
    pub fn with_param(mut self, param: impl AsRef<str>) -> Self {
        self.param = Some(chatmem::printable::printable(param.as_ref()).into_owned());
        self
    }

    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The request field the error is about, if it names one.
    pub fn param(&self) -> Option<&str> {
        self.param.as_deref()
    }

    /// OpenAI's error `type` for the status: `invalid_request_error` (4xx but those below),
    /// `authentication_error` (401), `permission_error` (403), `rate_limit_error` (429),
    /// `server_error` (5xx).
    ///
    /// ```
    /// assert_eq!(chatmem_server::ApiError::not_found("x").kind(), "invalid_request_error");
    /// ```
    pub fn kind(&self) -> &'static str {
        error_type(self.status)
    }

    /// 400 `invalid_request`: the request was malformed; the message names what was wrong.
    pub fn invalid(message: impl AsRef<str>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
    }

    /// 401 `unauthorized`: no valid bearer token.
    pub fn unauthorized(message: impl AsRef<str>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl AsRef<str>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    /// 413 `too_large`: over one of the server's limits.
    pub fn too_large(message: impl AsRef<str>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge, message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The machine-readable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The same error, naming the request it answers.
    pub fn with_request_id(mut self, id: &str) -> Self {
        self.request_id = Some(id.to_owned());
        self
    }
}

/// A memory error as the client sees it: bad input is the client's (400/413), what
/// [`chatmem::Error::is_transient`] calls retryable is the server's to report (409 when other
/// writers won, 503 otherwise), the rest 500 without internals.
impl From<chatmem::Error> for ApiError {
    fn from(e: chatmem::Error) -> Self {
        use chatmem::Error;
        match &e {
            Error::InvalidConversationId(_) | Error::InvalidMessages { .. } | Error::InvalidConfig(_) => {
                Self::invalid(e.to_string())
            }
            Error::BatchTooLarge { .. } => Self::too_large(e.to_string()),
            _ if e.is_transient() => match e.store_error() {
                Some(store) if !store.is_conflict() => {
                    log_store_error(tracing::Level::WARN, store);
                    Self::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        ErrorCode::StoreUnavailable,
                        "the store is unavailable",
                    )
                }
                // Too much contention, or one lost version check.
                _ => Self::new(StatusCode::CONFLICT, ErrorCode::Contention, e.to_string()),
            },
            _ => {
                match e.store_error() {
                    Some(store) => log_store_error(tracing::Level::ERROR, store),
                    None => tracing::error!("store failure"),
                }
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::StoreError,
                    "the store failed",
                )
            }
        }
    }
}

/// Logs a store's failure without the conversation it names (ids are the client's data): its
/// kind, its context (free of user data by [`chatmem::store::StoreError::new`]'s contract) and
/// the driver's error behind it.
fn log_store_error(level: tracing::Level, e: &chatmem::store::StoreError) {
    use std::error::Error as _;
    let kind = e.kind();
    let context = e.context();
    let cause = e.source().map(ToString::to_string).unwrap_or_default();
    if level == tracing::Level::ERROR {
        tracing::error!(kind = ?kind, context, cause, "store failure");
    } else {
        tracing::warn!(kind = ?kind, context, cause, "store failure");
    }
}

/// A request's messages over the server's [`BatchLimits`](chatmem::BatchLimits): 413, the
/// message naming what is too large (the one wording of every route that takes messages).
impl From<chatmem::TooLarge> for ApiError {
    fn from(e: chatmem::TooLarge) -> Self {
        Self::too_large(e.to_string())
    }
}

/// OpenAI's error `type` for an HTTP status (see [`ApiError::kind`]).
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The JSON body of every error the server sends. `ApiError` answers exactly this, and
/// `/openapi.json` documents this type, so the documented shape is the real one.
#[derive(utoipa::ToSchema)]
#[schema(as = Error)]
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong.
#[derive(utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// A stable machine-readable code.
    code: ErrorCode,
    /// One line for people; it names the field when a request was invalid.
    message: String,
    /// OpenAI's error type, from the status: `invalid_request_error`, `authentication_error`,
    /// `permission_error`, `rate_limit_error` or `server_error`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The request field the error is about (`n`, `messages[1].role`), when it names one.
    param: Option<String>,
    /// The request's id (also in its `x-request-id` header and every log line of it).
    request_id: Option<String>,
    /// The order its fields are written in.
    #[serde(skip)]
    order: FieldOrder,
}

/// The order an error's fields are written in: the same fields either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOrder {
    /// chatmem's own answers: `code`, `message`, `type`, `param`, `request_id` (null when the
    /// request has no id).
    Chatmem,
    /// Where the error stands in for one of OpenAI's (a stream's error event, an upstream's
    /// refusal): `message`, `type`, `param`, `code` as OpenAI writes them, then `request_id`
    /// only when there is one.
    OpenAi,
}

impl serde::Serialize for ErrorBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("error", &self.error)?;
        map.end()
    }
}

impl serde::Serialize for ErrorDetail {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        if self.order == FieldOrder::Chatmem {
            map.serialize_entry("code", &self.code)?;
        }
        map.serialize_entry("message", &self.message)?;
        map.serialize_entry("type", self.kind)?;
        map.serialize_entry("param", &self.param)?;
        match self.order {
            FieldOrder::Chatmem => map.serialize_entry("request_id", &self.request_id)?,
            FieldOrder::OpenAi => {
                map.serialize_entry("code", &self.code)?;
                if let Some(id) = &self.request_id {
                    map.serialize_entry("request_id", id)?;
                }
            }
        }
        map.end()
    }
}

impl ErrorBody {
    /// The body of `e`, its message as given, in `order`.
    fn new(e: &ApiError, message: String, order: FieldOrder) -> Self {
        Self {
            error: ErrorDetail {
                code: e.code,
                message,
                kind: error_type(e.status),
                param: e.param.clone(),
                request_id: e.request_id.clone(),
                order,
            },
        }
    }

    /// As JSON bytes. Strings, a code and optional strings: serializing cannot fail.
    fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl ApiError {
    /// The body this error answers, in the one shape.
    fn body(&self) -> ErrorBody {
        ErrorBody::new(self, self.message.clone(), FieldOrder::Chatmem)
    }

    /// The body as JSON bytes, for an answer written outside axum (the listener's).
    pub(crate) fn body_json(&self) -> Vec<u8> {
        self.body().to_vec()
    }

    /// The server-sent event that ends a stream this error broke off, as OpenAI ends one: data
    /// `{"error": {...}}` in OpenAI's field order, the message led by the code (`upstream_timeout:
    /// ...`), as OpenAI's clients raise it.
    pub(crate) fn stream_event(&self) -> Vec<u8> {
        let body = ErrorBody::new(self, self.to_string(), FieldOrder::OpenAi).to_vec();
        let mut event = Vec::with_capacity(body.len() + 8);
        event.extend_from_slice(b"data: ");
        event.extend_from_slice(&body);
        event.extend_from_slice(b"\n\n");
        event
    }

    /// This error answered in place of an OpenAI error body, with its status: OpenAI's field
    /// order, and no request id (the client's SDK reads it as the upstream's own).
    pub(crate) fn into_openai_response(self) -> Response {
        let body = ErrorBody::new(&self, self.message.clone(), FieldOrder::OpenAi);
        (self.status, Json(body)).into_response()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        // The code rides along for the layers outside the handler (the metrics count refused
        // writes by it); it never reaches the wire.
        response.extensions_mut().insert(self.code);
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6750: a 401 says which scheme would be accepted.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use chatmem::store::{StoreError, StoreErrorKind};
    use chatmem::{ConversationId, Error};

    use super::*;

    #[test]
    fn retryable_errors_and_only_those_answer_409_or_503() {
        let id = ConversationId::new("c1").expect("a valid id");
        let store = |kind| Error::Store {
            id: id.clone(),
            source: StoreError::new(kind, "test"),
        };
        let cases = [
            (store(StoreErrorKind::Unavailable), 503),
            (
                Error::StoreGlobal(StoreError::new(StoreErrorKind::Unavailable, "test")),
                503,
            ),
            (store(StoreErrorKind::Conflict), 409),
            (
                Error::TooMuchContention {
                    id: id.clone(),
                    attempts: 3,
                },
                409,
            ),
            (store(StoreErrorKind::Corrupt), 500),
            (store(StoreErrorKind::SchemaTooNew), 500),
            (store(StoreErrorKind::InvalidInput), 500),
            (store(StoreErrorKind::Other), 500),
            (Error::InvalidConfig("x".into()), 400),
        ];
        for (e, status) in cases {
            let transient = e.is_transient();
            let text = e.to_string();
            let answered = ApiError::from(e).status().as_u16();
            assert_eq!(answered, status, "{text}");
            assert_eq!(transient, matches!(answered, 409 | 503), "{text}");
        }
    }
}
