//! What a request over the server's limits is answered, for the listener and the router alike:
//! [`BodyTimeout`] (the listener's body deadline, which body extractors turn into 408
//! `body_timeout` with [`body_timeout`]) and [`refuse_oversized`], which answers a request head
//! over the [`Limits`] in the one JSON shape before its body is read.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::Limits;
use crate::error::{ApiError, ErrorCode};
use crate::state::RequestId;

/// A request body not received within its deadline (the listener's
/// [`ServeOptions::body_timeout`](crate::ServeOptions::body_timeout)).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .0.as_millis())]
pub(crate) struct BodyTimeout(Duration);

impl BodyTimeout {
    /// The error of a body whose deadline was `timeout` after its head.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self(timeout)
    }
}

/// The 408 `body_timeout` answer if `error` (a body extractor's rejection) comes of a
/// [`BodyTimeout`].
pub(crate) fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(timeout) = e.downcast_ref::<BodyTimeout>() {
            return Some(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::BodyTimeout,
                timeout.to_string(),
            ));
        }
        cause = e.source();
    }
    None
}

/// Refuses a request whose head is over `limits` before its body is read: 414 `uri_too_long`
/// ([`Limits::max_uri_bytes`]), 431 `header_too_large` ([`Limits::max_header_bytes`], naming
/// the largest field), 413 `too_large` for a `Content-Length` over [`Limits::max_body_bytes`].
pub(crate) async fn refuse_oversized(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    match oversized(&limits, &request) {
        None => next.run(request).await,
        Some(e) => {
            tracing::debug!(status = e.status().as_u16(), code = e.code().as_str(), "refused");
            match request.extensions().get::<RequestId>() {
                Some(id) => e.with_request_id(&id.0),
                None => e,
            }
            .into_response()
        }
    }
}

fn oversized(limits: &Limits, request: &Request) -> Option<ApiError> {
    let uri = request.uri();
    let query = uri.query().map_or(0, |q| q.len() + 1);
    let uri_bytes = uri.path().len() + query + uri.authority().map_or(0, |a| a.as_str().len());
    if uri_bytes > limits.max_uri_bytes {
        let part = if query > uri.path().len() { "query" } else { "path" };
        return Some(ApiError::new(
            StatusCode::URI_TOO_LONG,
            ErrorCode::UriTooLong,
            format!(
                "the request URI is {uri_bytes} bytes, over the limit of {} (most of it the {part})",
                limits.max_uri_bytes
            ),
        ));
    }
    // As on the wire: `name: value` and CRLF.
    let field_bytes =
        |(name, value): (&header::HeaderName, &header::HeaderValue)| name.as_str().len() + value.len() + 4;
    let header_bytes: usize = request.headers().iter().map(field_bytes).sum();
    if header_bytes > limits.max_header_bytes {
        let largest = request
            .headers()
            .iter()
            .max_by_key(|&field| field_bytes(field))
            .map_or("", |(name, _)| name.as_str());
        return Some(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::HeaderTooLarge,
            format!(
                "the request headers are {header_bytes} bytes, over the limit of {} (the largest field: {largest})",
                limits.max_header_bytes
            ),
        ));
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(length) if length > limits.max_body_bytes as u64 => Some(ApiError::too_large(format!(
            "the request body is over the limit of {} bytes (Content-Length: {length})",
            limits.max_body_bytes
        ))),
        _ => None,
    }
}
