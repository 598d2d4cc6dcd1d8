//! A chat-completions request as the proxy takes it: the client's JSON object, kept whole
//! and in order, and the few fields the proxy reads from it (`messages`, `stream`, `n`).

use chatmem::{Message, check_request};
use chatmem_openai::passthrough::request_messages;
use serde_json::{Map, Value};

use crate::config::Limits;
use crate::error::ApiError;
use crate::extract::parse_body;

/// What `chatmem serve` says of a request it cannot take.
const WHAT: &str = "invalid chat completion request";

/// The request: its JSON object (whose `messages` the proxy replaces, at the same place), the
/// turn's messages as chatmem reads them, and whether the answer streams.
pub(super) struct ChatRequest {
    pub(super) body: Map<String, Value>,
    pub(super) messages: Vec<Message>,
    pub(super) stream: bool,
}

impl ChatRequest {
    /// Reads a request body. Everything but `messages` is the upstream's to judge, except
    /// what memory cannot take: `n` other than 1 (memory stores one answer per turn) and a
    /// `stream` that is not a boolean. Errors name the field, as OpenAI's `param` too.
    pub(super) fn parse(bytes: &[u8], limits: &Limits) -> Result<Self, ApiError> {
        let mut body: Map<String, Value> = parse_body(bytes, "chat completion request")?;
        match body.get("n") {
            None | Some(Value::Null) => {}
            // 1 or 1.0: JSON Schema's integer 1 either way.
            Some(n) if n.as_f64() == Some(1.0) => {}
            Some(n) => {
                return Err(ApiError::invalid(format!(
                    "{WHAT}: field `n` is {n}: memory stores one answer per turn, so `n` must be 1 or left out"
                ))
                .with_param("n"));
            }
        }
        let stream = match body.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiError::invalid(format!("{WHAT}: field `stream` must be a boolean")).with_param("stream"));
            }
        };
        // Taken out in place (a null holds its position until the prompt replaces it).
        let messages = match body.get_mut("messages") {
            Some(v) => std::mem::take(v),
            None => {
                return Err(ApiError::invalid(format!("{WHAT}: missing field `messages`")).with_param("messages"));
            }
        };
        let messages =
            request_messages(messages).map_err(|e| ApiError::invalid(format!("{WHAT}: {e}")).with_param(&e.path))?;
        if let Err(e) = check_request(&messages) {
            return Err(match e {
                chatmem::Error::InvalidMessages { path, reason } => {
                    let param = if path == "input" {
                        "messages".into()
                    } else {
                        format!("messages{path}")
                    };
                    ApiError::invalid(format!("{WHAT}: field `{param}`: {reason}")).with_param(param)
                }
                other => ApiError::invalid(format!("{WHAT}: {other}")).with_param("messages"),
            });
        }
        limits.batch.check(&messages)?;
        Ok(Self { body, messages, stream })
    }
}
