//! [`UpstreamPool`]: the one upstream of a server (its connection pool, built at start), its
//! calls bounded by the upstream timeout, and what its failures mean to the client (the chat
//! completion's and `/v1/models`').
//!
//! | upstream | client |
//! |---|---|
//! | 400, 404, 409, 413, 422, 429 (about the client's request) | the same status, the upstream's OpenAI error body (the key masked, the request's `request_id` added), `Retry-After` and `x-ratelimit-*` |
//! | 401, 403 (about chatmem's own key) | 502 `upstream_auth`, without the upstream's text |
//! | 408, a timeout | 504 `upstream_timeout` |
//! | 5xx, any other status | 502 `upstream_error` naming the status, without the upstream's text |
//! | no connection, a broken one | 502 `upstream_unavailable` |
//! | a 2xx answer that does not read | 502 `upstream_error` |

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chatmem::ModelErrorKind;
use chatmem_openai::passthrough::{Endpoint, status_kind};
use serde_json::Value;

use crate::config::{ServerConfig, Upstream};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::{Metrics, UpstreamTokens};
use crate::state::RequestId;

/// Statuses whose error is about the client's request: passed on as they came.
pub(crate) const CLIENTS: [u16; 6] = [400, 404, 409, 413, 422, 429];

/// At most this much of an upstream's error body is read.
const MAX_ERROR_BODY: usize = 64 << 10;

/// The server's upstream, built once at start (one connection pool for every call), or the
/// 503 every call is answered when there is none (or its settings cannot work).
pub(crate) fn pool(config: &ServerConfig) -> Result<Arc<UpstreamPool>, ApiError> {
    let no_upstream = |why: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NoUpstream, why);
    let upstream = config
        .upstream
        .as_ref()
        .ok_or_else(|| no_upstream("this server has no upstream model (start it with --upstream-base-url)".into()))?;
    UpstreamPool::new(upstream, config.limits.upstream_timeout, config.metrics.clone())
        .map(Arc::new)
        .map_err(|e| {
            tracing::error!(error = %e, "the upstream cannot be used");
            no_upstream(format!("this server's upstream model cannot be used: {e}"))
        })
}

/// The upstream model of a server: one [`Endpoint`] (whose connections every call reuses),
/// the timeout of a call, and the metrics its answers are counted in.
#[derive(Debug)]
pub(crate) struct UpstreamPool {
    endpoint: Endpoint,
    timeout: Duration,
    metrics: Metrics,
}

/// Why an upstream call gave no answer to pass on: chatmem's own error, or the upstream's
/// refusal of the client's request, passed on.
pub(crate) enum Failure {
    Api(ApiError),
    Passed(Refusal),
}

/// What of an upstream answer's head is passed on: its status, its content type, and the
/// headers a client reads from it (when to retry, the rate limits).
pub(crate) struct Head {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    passed: HeaderMap,
}

impl Head {
    pub(crate) fn of(response: &reqwest::Response) -> Self {
        let headers = response.headers();
        let passed = headers
            .iter()
            .filter(|(name, _)| {
                let name = name.as_str();
                name == "retry-after" || name == "retry-after-ms" || name.starts_with("x-ratelimit-")
            })
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        Self {
            status: response.status(),
            content_type: headers.get(header::CONTENT_TYPE).cloned(),
            passed,
        }
    }

    pub(crate) fn content_type(&self) -> Option<&HeaderValue> {
        self.content_type.as_ref()
    }

    /// The answer with this head and `body` as it came.
    pub(crate) fn respond(self, body: impl Into<Body>) -> Response {
        let mut response = Response::new(body.into());
        *response.status_mut() = self.status;
        let content_type = self
            .content_type
            .unwrap_or_else(|| HeaderValue::from_static("application/json"));
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
        response.headers_mut().extend(self.passed);
        response
    }
}

/// The upstream's refusal of the client's request, to pass on: OpenAI's error object as the
/// upstream wrote it (the key masked), or chatmem's error quoting a body of another shape;
/// with the head's headers a client reads.
pub(crate) struct Refusal {
    body: Result<Value, ApiError>,
    status: StatusCode,
    passed: HeaderMap,
}

impl Refusal {
    /// The answer, its error naming request `id` as every error the server sends does.
    pub(crate) fn respond(self, id: &RequestId) -> Response {
        let mut response = match self.body {
            Ok(mut v) => {
                if let Some(error) = v.get_mut("error").and_then(Value::as_object_mut) {
                    error.insert("request_id".into(), Value::String(id.0.clone()));
                }
                (self.status, axum::Json(v)).into_response()
            }
            Err(e) => e.with_request_id(&id.0).into_openai_response(),
        };
        response.headers_mut().extend(self.passed);
        response
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl UpstreamPool {
    /// The pool for `upstream`.
    ///
    /// # Errors
    /// The upstream's settings that cannot work (a URL that is not http(s), a key that cannot
    /// be a header).
    pub(crate) fn new(
        upstream: &Upstream,
        timeout: Duration,
        metrics: Metrics,
    ) -> Result<Self, chatmem_openai::ConfigError> {
        let endpoint = Endpoint::new(&upstream.base_url, upstream.api_key.as_deref(), timeout)?;
        Ok(Self {
            endpoint,
            timeout,
            metrics,
        })
    }

    /// The server's upstream timeout: for a response head, a whole answer, or the wait
    /// between two chunks of a stream.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Sends a chat completion; a 2xx response head, or what the client is answered instead.
    pub(crate) async fn chat(&self, body: Vec<u8>) -> Result<reqwest::Response, Failure> {
        let started = Instant::now();
        let sent = tokio::time::timeout(self.timeout, self.endpoint.post_chat_completions(body)).await;
        self.answered(sent, started).await
    }

    /// `GET /models` as it came, or what the client is answered instead.
    pub(crate) async fn models(&self) -> Result<Response, Failure> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let sent = tokio::time::timeout_at(deadline, self.endpoint.get_models()).await;
        let response = self.answered(sent, started).await?;
        let head = Head::of(&response);
        let body = self.read_body(response, deadline).await?;
        Ok(head.respond(body))
    }

    /// A response head as the caller may use it: a 2xx, else the failure (counted).
    async fn answered(
        &self,
        sent: Result<Result<reqwest::Response, reqwest::Error>, tokio::time::error::Elapsed>,
        started: Instant,
    ) -> Result<reqwest::Response, Failure> {
        let response = match sent {
            Err(_) => return Err(self.timed_out().into()),
            Ok(Err(e)) => return Err(self.unreachable(&e).into()),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        self.metrics.upstream_response(status.as_u16(), started.elapsed());
        if status.is_success() {
            return Ok(response);
        }
        Err(self.refused(response).await)
    }

    /// The whole body of a 2xx response, within `deadline`.
    pub(crate) async fn read_body(
        &self,
        response: reqwest::Response,
        deadline: tokio::time::Instant,
    ) -> Result<Bytes, ApiError> {
        match tokio::time::timeout_at(deadline, response.bytes()).await {
            Err(_) => Err(self.timed_out()),
            Ok(Err(e)) => Err(self.unreachable(&e)),
            Ok(Ok(b)) => Ok(b),
        }
    }

    /// What a non-2xx response means to the client (see the module's table).
    async fn refused(&self, mut response: reqwest::Response) -> Failure {
        let status = response.status().as_u16();
        let kind = status_kind(status);
        self.metrics.upstream_error(kind);
        tracing::warn!(status, "the upstream refused a call");
        if !CLIENTS.contains(&status) {
            return Failure::Api(match status {
                401 | 403 => ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    ErrorCode::UpstreamAuth,
                    format!(
                        "the upstream model refused chatmem's own credentials (HTTP {status}): the server's \
                         upstream key is missing or not accepted; the request itself was not at fault"
                    ),
                ),
                408 => self.timed_out(),
                _ => ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    ErrorCode::UpstreamError,
                    format!("the upstream model failed (HTTP {status})"),
                ),
            });
        }
        let passed = Head::of(&response).passed;
        // The body is read only so far: an error body is short, a hostile one need not be.
        let mut body = Vec::new();
        let deadline = tokio::time::Instant::now() + self.timeout;
        while body.len() < MAX_ERROR_BODY {
            match tokio::time::timeout_at(deadline, response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&body);
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        let body = match serde_json::from_str::<Value>(&text) {
            Ok(mut v) if v.get("error").is_some_and(Value::is_object) => {
                self.mask_value(&mut v);
                Ok(v)
            }
            // Not OpenAI's error shape: chatmem's, with the text (masked, one short line).
            _ => {
                let short: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let short: String = short.chars().take(300).collect();
                let short = chatmem::printable::printable(&self.endpoint.mask(&short)).into_owned();
                Err(ApiError::new(
                    code,
                    ErrorCode::UpstreamRefused,
                    format!("the upstream model refused the request (HTTP {status}): {short}"),
                ))
            }
        };
        Failure::Passed(Refusal {
            body,
            status: code,
            passed,
        })
    }

    /// Masks the key in every string of `v`.
    fn mask_value(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(masked) = self.endpoint.mask(s) {
                    *s = masked;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.mask_value(i)),
            Value::Object(obj) => obj.values_mut().for_each(|i| self.mask_value(i)),
            _ => {}
        }
    }

    /// 504: no answer within the timeout (counted).
    pub(crate) fn timed_out(&self) -> ApiError {
        self.metrics.upstream_error(ModelErrorKind::Timeout);
        tracing::warn!(
            timeout_ms = self.timeout.as_millis() as u64,
            "the upstream did not answer in time"
        );
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::UpstreamTimeout,
            format!("the upstream model did not answer within {:?}", self.timeout),
        )
    }

    /// 502: the upstream could not be reached, or the connection broke (counted; the cause
    /// is logged, never answered: it may name internal hosts).
    pub(crate) fn unreachable(&self, e: &reqwest::Error) -> ApiError {
        if e.is_timeout() {
            return self.timed_out();
        }
        self.metrics.upstream_error(ModelErrorKind::Unavailable);
        let cause = self.endpoint.mask(&error_chain(e)).into_owned();
        tracing::warn!(cause, "the upstream could not be reached");
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamUnavailable,
            "the upstream model could not be reached, or the connection to it broke",
        )
    }

    /// 502: a 2xx answer chatmem cannot read (counted); `what` says what was wrong, never the
    /// content.
    pub(crate) fn unreadable(&self, what: &str) -> ApiError {
        self.metrics.upstream_error(ModelErrorKind::Protocol);
        let what = self.endpoint.mask(what).into_owned();
        tracing::warn!(what, "the upstream's answer could not be read");
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamError,
            format!("the upstream model's answer could not be read: {what}"),
        )
    }

    /// Counts the tokens an answer's `usage` reports, if it has one.
    pub(crate) fn count_usage(&self, usage: Option<&Value>) {
        let Some(usage) = usage.filter(|u| u.is_object()) else {
            return;
        };
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let cached = usage
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .or_else(|| usage.get("prompt_cache_hit_tokens"));
        self.metrics.upstream_tokens(UpstreamTokens {
            prompt: n(usage.get("prompt_tokens")),
            completion: n(usage.get("completion_tokens")),
            cached_prompt: n(cached),
        });
    }
}

/// An error and its causes on one line, for the log.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
