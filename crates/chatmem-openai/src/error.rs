//! Configuration errors, and the mapping of async-openai's errors to [`ModelError`]s.

use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError, StreamError, WrappedError};
use chatmem::{ModelError, ModelErrorKind};

/// Why [`OpenAiModelBuilder::build`](crate::OpenAiModelBuilder::build) refused its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The provider needs an API key and its environment variable is unset or empty.
    #[error("{var} is not set: the {provider} provider needs an API key")]
    MissingApiKey {
        /// The environment variable that was read.
        var: String,
        /// The provider's name.
        provider: String,
    },
    /// Neither a provider nor a base URL was given.
    #[error("no base URL: choose a provider or call base_url()")]
    MissingBaseUrl,
    /// The base URL did not parse or is not http(s).
    #[error("invalid base URL: {0}")]
    InvalidBaseUrl(String),
    /// No model name was given and the provider has no default.
    #[error("no model: call model()")]
    MissingModel,
    /// The timeout was zero.
    #[error("the timeout must be greater than zero")]
    InvalidTimeout,
    /// The API key cannot be sent in an HTTP header (control characters, ...).
    #[error("the API key contains characters that cannot be sent in an HTTP header")]
    InvalidApiKey,
    /// The HTTP client could not be set up (TLS backend, ...).
    #[error("could not build the HTTP client")]
    Http(#[source] reqwest::Error),
}

/// Cuts provider text to a loggable length (error bodies, not message text).
pub(crate) fn short(text: &str) -> String {
    const MAX: usize = 300;
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &flat[..at]),
        None => flat,
    }
}

/// The kind of an HTTP error status.
pub(crate) fn status_kind(status: u16) -> ModelErrorKind {
    match status {
        401 | 403 => ModelErrorKind::Auth,
        429 => ModelErrorKind::RateLimited,
        408 => ModelErrorKind::Timeout,
        400 | 404 | 409 | 413 | 422 => ModelErrorKind::InvalidRequest,
        500..=599 => ModelErrorKind::Server,
        _ => ModelErrorKind::Other,
    }
}

/// Turns a non-2xx response into `OpenAIError::ApiError` with its status, whatever the body.
///
/// async-openai would turn a 4xx body that is not `{"error": ...}` JSON into a bare
/// deserialization error (losing the status) and log the body at `error`; this runs in front
/// of it so every HTTP failure keeps its status and no body is logged.
pub(crate) async fn check_status(response: reqwest::Response) -> Result<reqwest::Response, OpenAIError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await.map_err(OpenAIError::Reqwest)?;
    let api_error = match serde_json::from_slice::<WrappedError>(&bytes) {
        Ok(w) => w.error,
        Err(_) => ApiError {
            message: short(&String::from_utf8_lossy(&bytes)),
            ..ApiError::default()
        },
    };
    Err(OpenAIError::ApiError(ApiErrorResponse {
        status_code: status,
        api_error,
    }))
}

fn from_reqwest(e: reqwest::Error) -> ModelError {
    let kind = if e.is_timeout() {
        ModelErrorKind::Timeout
    } else if e.is_connect() {
        ModelErrorKind::Unavailable
    } else if let Some(status) = e.status() {
        status_kind(status.as_u16())
    } else if e.is_decode() {
        ModelErrorKind::Protocol
    } else {
        // Request/body errors: the connection broke mid-way.
        ModelErrorKind::Unavailable
    };
    let context = match kind {
        ModelErrorKind::Timeout => "the provider did not answer in time",
        ModelErrorKind::Unavailable => "could not reach the provider",
        _ => "HTTP request failed",
    };
    let status = e.status().map(|s| s.as_u16());
    let err = ModelError::new(kind, context).with_source(e);
    match status {
        Some(s) => err.with_status(s),
        None => err,
    }
}

/// Maps an async-openai error. Never copies a response body into the context: only
/// provider error messages (from `{"error": {"message": ...}}`) are kept, shortened.
pub(crate) fn map(e: OpenAIError) -> ModelError {
    match e {
        OpenAIError::Reqwest(e) => from_reqwest(e),
        OpenAIError::ApiError(r) => {
            let status = r.status_code.as_u16();
            let a = &r.api_error;
            let mut context = format!("HTTP {status}");
            if let Some(t) = a.r#type.as_deref().or(a.code.as_deref()) {
                context.push_str(&format!(" ({t})"));
            }
            if !a.message.is_empty() {
                context.push_str(": ");
                context.push_str(&short(&a.message));
            }
            ModelError::new(status_kind(status), context).with_status(status)
        }
        OpenAIError::JSONDeserialize(e, _body) => {
            // The body may hold message text: keep only serde's error (a position).
            ModelError::new(ModelErrorKind::Protocol, "the provider's answer was not JSON").with_source(e)
        }
        OpenAIError::StreamError(s) => match *s {
            StreamError::EventStream(text) if text.starts_with("Transport error") => {
                let kind = if text.contains("timed out") {
                    ModelErrorKind::Timeout
                } else {
                    ModelErrorKind::Unavailable
                };
                ModelError::new(kind, "the connection broke while streaming")
            }
            // Parser errors quote the unparsed input, which may be message text: drop it.
            StreamError::EventStream(_) => ModelError::new(ModelErrorKind::Protocol, "the SSE stream was malformed"),
            StreamError::UnknownEvent(_) => {
                ModelError::new(ModelErrorKind::Protocol, "the SSE stream had an unexpected event")
            }
        },
        OpenAIError::InvalidArgument(a) => ModelError::new(ModelErrorKind::InvalidRequest, short(&a)),
        OpenAIError::Boxed(e) => match e.downcast::<OpenAIError>() {
            Ok(inner) => map(*inner),
            Err(e) => ModelError::new(ModelErrorKind::Other, "HTTP middleware failed").with_source(e),
        },
        other => ModelError::new(ModelErrorKind::Other, "model call failed").with_source(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(status_kind(401), ModelErrorKind::Auth);
        assert_eq!(status_kind(403), ModelErrorKind::Auth);
        assert_eq!(status_kind(429), ModelErrorKind::RateLimited);
        assert_eq!(status_kind(500), ModelErrorKind::Server);
        assert_eq!(status_kind(503), ModelErrorKind::Server);
        assert_eq!(status_kind(400), ModelErrorKind::InvalidRequest);
    }

    #[test]
    fn short_cuts_long_text() {
        let long = "x ".repeat(400);
        assert!(short(&long).len() < 320);
        assert_eq!(short(" a\n b "), "a b");
    }
}
