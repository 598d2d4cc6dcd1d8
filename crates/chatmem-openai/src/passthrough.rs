//! The OpenAI protocol for a proxy that passes a client's chat-completions request through
//! with memory's messages in it (`chatmem serve`'s `POST /v1/chat/completions`): one
//! [`Endpoint`] (an HTTP connection pool, the base URL and the key) per upstream, and the few
//! conversions such a proxy needs, each the one this crate's [`OpenAiModel`](crate::OpenAiModel)
//! makes too:
//!
//! - [`request_messages`]: a request's `messages` as chatmem messages (what a client sends
//!   back of an answer it was given, such as `"refusal": null`, is read as the answer it was);
//! - [`messages_json`]: a turn's prompt as the request's `messages` (what is never sent, such
//!   as `reasoning_content`, is left out exactly as [`OpenAiModel`](crate::OpenAiModel) leaves it out);
//! - [`read_completion`] and [`read_chunk`]: the answer, plain or streamed, as chatmem reads
//!   it, to be stored.
//!
//! The rest of the request and of the answer is the proxy's to pass on untouched.
//!
//! ```
//! use chatmem::Message;
//! use chatmem_openai::passthrough::{messages_json, request_messages};
//!
//! let sent = serde_json::json!([
//!     {"role": "user", "content": "hi"},
//!     {"role": "assistant", "content": "hello", "refusal": null, "annotations": []},
//! ]);
//! let messages = request_messages(sent)?;
//! assert_eq!(messages[1], Message::assistant("hello"));
//! let prompt: Vec<&Message> = messages.iter().collect();
//! assert_eq!(messages_json(&prompt)[1], serde_json::json!({"role": "assistant", "content": "hello"}));
//! # Ok::<(), chatmem_openai::passthrough::InvalidMessages>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use chatmem::{ChatDelta, ChatResponse, Message, ModelError, ModelErrorKind};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value};

use crate::config::check_base_url;
use crate::error::ConfigError;
use crate::wire;

/// One upstream: its base URL, its key, and one HTTP client whose connections are kept alive
/// and reused by every call (build one per upstream, at start, and share it). It sends what
/// it is given; bounding a call in time is the caller's (the connect timeout excepted).
///
/// ```
/// use chatmem_openai::passthrough::Endpoint;
/// let e = Endpoint::new("http://127.0.0.1:11434/v1/", Some("sk-secret-123"), std::time::Duration::from_secs(5))?;
/// assert_eq!(e.base_url(), "http://127.0.0.1:11434/v1");
/// assert_eq!(e.mask("bad key sk-secret-123"), "bad key ***");
/// assert!(Endpoint::new("localhost:18102", None, std::time::Duration::from_secs(5)).is_err());
/// # Ok::<(), chatmem_openai::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    base_url: String,
    auth: Option<HeaderValue>,
    key: Option<String>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &chatmem::store::redact_url(&self.base_url))
            .field("api_key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `base_url` (http or https, no query), sending `api_key` as a bearer
    /// token when given; connecting may take up to `connect_timeout`.
    ///
    /// # Errors
    /// [`ConfigError::InvalidBaseUrl`] (the URL did not parse, or is not http(s)),
    /// [`ConfigError::InvalidApiKey`] (the key cannot be a header), [`ConfigError::Http`].
    pub fn new(base_url: &str, api_key: Option<&str>, connect_timeout: Duration) -> Result<Self, ConfigError> {
        let base_url = check_base_url(base_url)?;
        let key = api_key.filter(|k| !k.is_empty());
        let auth = key
            .map(|k| {
                let mut v = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| ConfigError::InvalidApiKey)?;
                v.set_sensitive(true);
                Ok::<_, ConfigError>(v)
            })
            .transpose()?;
        let http = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .build()
            .map_err(ConfigError::Http)?;
        Ok(Self {
            http,
            base_url,
            auth,
            key: key.map(str::to_owned),
        })
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `POST {base}/chat/completions` with `body` (JSON) as it is.
    ///
    /// # Errors
    /// The HTTP client's, when no response head came (connection refused, reset, ...).
    pub async fn post_chat_completions(&self, body: Vec<u8>) -> Result<reqwest::Response, reqwest::Error> {
        let request = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body);
        self.with_auth(request).send().await
    }

    /// `GET {base}/models`.
    ///
    /// # Errors
    /// As [`post_chat_completions`](Self::post_chat_completions).
    pub async fn get_models(&self) -> Result<reqwest::Response, reqwest::Error> {
        let request = self.http.get(format!("{}/models", self.base_url));
        self.with_auth(request).send().await
    }

    fn with_auth(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.auth {
            Some(auth) => request.header(AUTHORIZATION, auth.clone()),
            None => request,
        }
    }

    /// `text` with every occurrence of the endpoint's key replaced by `***`: for any upstream
    /// text a proxy passes on (an upstream may echo the key it was sent).
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.key {
            Some(key) if text.contains(key.as_str()) => Cow::Owned(text.replace(key.as_str(), "***")),
            _ => Cow::Borrowed(text),
        }
    }
}

/// The kind of an upstream's HTTP error status, as [`OpenAiModel`](crate::OpenAiModel)
/// reports it (401/403 `Auth`, 429 `RateLimited`, 400/404/409/413/422 `InvalidRequest`,
/// 408 `Timeout`, 5xx `Server`).
pub fn status_kind(status: u16) -> ModelErrorKind {
    crate::error::status_kind(status)
}

/// A request's `messages` that chatmem cannot read: where (`messages[1].role`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{path}`: {reason}")]
pub struct InvalidMessages {
    /// The field path, from `messages`.
    pub path: String,
    /// What was wrong.
    pub reason: String,
}

/// Reads a request's `messages` (the JSON array) as chatmem messages, strictly (an unknown
/// field is an error naming it), except for what OpenAI's clients send back of an answer
/// they were given, read as [`OpenAiModel`](crate::OpenAiModel) reads the answer itself: an
/// assistant's `refusal` is its text, and `annotations`, `parsed` (the Python SDK's parsed
/// structured output) and a null `audio` or `function_call` say nothing a model is sent.
///
/// # Errors
/// [`InvalidMessages`] naming the field.
pub fn request_messages(messages: Value) -> Result<Vec<Message>, InvalidMessages> {
    let Value::Array(items) = messages else {
        return Err(InvalidMessages {
            path: "messages".into(),
            reason: "must be an array of messages".into(),
        });
    };
    let items = items
        .into_iter()
        .enumerate()
        .map(|(i, m)| match m {
            Value::Object(obj) if obj.get("role").and_then(Value::as_str) == Some("assistant") => answer_sent_back(obj)
                .map(Value::Object)
                .map_err(|(field, reason)| InvalidMessages {
                    path: format!("messages[{i}].{field}"),
                    reason,
                }),
            other => Ok(other),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Read from the parsed value with the field path tracked (the core's one reader), so that
    // the error names the field without the messages being written and parsed again.
    let items = Value::Array(items);
    chatmem::deserialize_json::<_, Vec<Message>>(&items).map_err(|e| InvalidMessages {
        path: match e.path() {
            Some(p) => format!("messages{p}"),
            None => "messages".into(),
        },
        reason: e.reason().to_owned(),
    })
}

/// An assistant message as a client sends back an answer: the answer's fields chatmem reads
/// as it reads an answer. Errors are (field, reason).
fn answer_sent_back(mut obj: Map<String, Value>) -> Result<Map<String, Value>, (&'static str, String)> {
    for field in ["annotations", "parsed"] {
        obj.shift_remove(field);
    }
    for field in ["audio", "function_call"] {
        match obj.get(field) {
            Some(Value::Null) => {
                obj.shift_remove(field);
            }
            Some(_) => return Err((field, "has no chatmem equivalent".into())),
            None => {}
        }
    }
    match obj.shift_remove("refusal") {
        None | Some(Value::Null) => {}
        Some(Value::String(refusal)) => {
            // Text or parts: either would be lost under the refusal.
            let content = match obj.get("content") {
                None | Some(Value::Null) => false,
                Some(Value::String(text)) => !text.is_empty(),
                Some(Value::Array(parts)) => !parts.is_empty(),
                Some(_) => true,
            };
            if content && !refusal.is_empty() {
                return Err((
                    "refusal",
                    "an assistant message with both content and a refusal: chatmem keeps one text".into(),
                ));
            }
            if !refusal.is_empty() {
                obj.insert("content".into(), Value::String(refusal));
            }
        }
        Some(_) => return Err(("refusal", "must be a string".into())),
    }
    Ok(obj)
}

/// The request's `messages` for a prompt: each message as [`OpenAiModel`](crate::OpenAiModel)
/// sends it (never `reasoning_content`, `metadata` or `is_error`).
pub fn messages_json(prompt: &[&Message]) -> Value {
    // Serializing borrowed strings into a `Value` cannot fail.
    serde_json::to_value(wire::messages(prompt)).unwrap_or(Value::Array(Vec::new()))
}

/// Reads a completion (a non-streamed answer) as [`OpenAiModel`](crate::OpenAiModel) does:
/// its first choice's message (a refusal is its text), its usage and finish reason.
///
/// # Errors
/// A [`ModelError`] of kind `Protocol` when it does not have the chat-completions shape (the
/// error names the field, never the content), or `Server` for an `{"error": ...}` body.
pub fn read_completion(completion: Value) -> Result<ChatResponse, ModelError> {
    wire::response(completion)
}

/// Reads one streamed chunk (an SSE event's `data`) as [`OpenAiModel`](crate::OpenAiModel)
/// does; `None` when it carries nothing. Join the deltas with a
/// [`DeltaAccumulator`](chatmem::DeltaAccumulator).
///
/// # Errors
/// As [`read_completion`].
pub fn read_chunk(chunk: Value) -> Result<Option<ChatDelta>, ModelError> {
    wire::delta(chunk)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_sent_back_read_as_the_answer_they_were() {
        let m = request_messages(json!([{"role": "assistant", "content": null, "refusal": "I can't.",
            "annotations": [], "audio": null, "function_call": null, "parsed": null}]))
        .unwrap();
        assert_eq!(m, [Message::assistant("I can't.")]);
        let e = request_messages(json!([{"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "audio": {"id": "x"}}]))
        .unwrap_err();
        assert_eq!(e.path, "messages[1].audio");
        // Content parts beside a refusal are not dropped for it.
        let e = request_messages(json!([{"role": "assistant", "refusal": "no",
            "content": [{"type": "text", "text": "partly"}]}]))
        .unwrap_err();
        assert_eq!(e.path, "messages[0].refusal");
        let e = request_messages(json!([{"role": "user", "content": "q", "refusal": null}])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "field `messages[0].refusal`: unknown field `refusal`, expected one of `role`, `content`, `name`, `tool_calls`, `tool_call_id`, `reasoning_content`, `is_error`, `metadata`"
        );
        let e = request_messages(json!([{"role": "wizard", "content": "q"}])).unwrap_err();
        assert_eq!(e.path, "messages[0].role");
        assert!(request_messages(json!({"role": "user"})).is_err());
    }

    #[test]
    fn the_key_is_masked_wherever_it_appears() {
        let e = Endpoint::new("https://api.example/v1", Some("sk-1"), Duration::from_secs(1)).unwrap();
        assert_eq!(e.mask("a sk-1 b sk-1"), "a *** b ***");
        let none = Endpoint::new("https://api.example/v1", None, Duration::from_secs(1)).unwrap();
        assert_eq!(none.mask("sk-1"), "sk-1");
        assert!(format!("{e:?}").contains("<redacted>"));
        assert!(!format!("{e:?}").contains("sk-1"));
    }
}
