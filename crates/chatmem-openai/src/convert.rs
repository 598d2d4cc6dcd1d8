//! Conversions between chatmem [`Message`](chatmem::Message)s and async-openai's chat types, for applications
//! that call a model through async-openai themselves: a chatmem window becomes the request's
//! `messages`, and the answer becomes an assistant message to store.
//!
//! The types are those of the `async-openai` version this crate depends on, re-exported as
//! [`crate::async_openai`] so an application can name the same ones.
//!
//! | chatmem | async-openai request message | back |
//! |---|---|---|
//! | system (text, `name`) | `System` (text) | `System` text; parts are an error |
//! | user text / parts (`name`) | `User` text / array | the same |
//! | text part, image URL part (`detail`) | `Text`, `ImageUrl` (`ImageDetail`) | the same; a `prompt_cache_breakpoint` is an error |
//! | other part (audio, file) | `InputAudio`, `File` when it reads as one, unchanged; otherwise an error | kept as an other part, as its JSON |
//! | assistant text, tool calls (`name`) | `Assistant` text, `Function` tool calls | the same; `refusal` becomes the text |
//! | developer (text, `name`) | `Developer` (text) | `Developer` text; parts are an error |
//! | tool result | `Tool` (text, `tool_call_id`) | the same; parts are an error |
//! | — | `Function` | an error (chatmem has no such role) |
//!
//! Never sent, exactly as [`OpenAiModel`](crate::OpenAiModel) never sends them:
//! `reasoning_content`, `metadata`, a tool result's `is_error` and a tool result's `name`
//! (the tool role has none). An assistant message with neither text nor calls is sent with
//! text `""`. The same code decides this for both, so a converted window is the request
//! `OpenAiModel` would send.
//!
//! [`from_response_message`] reads an answer like `OpenAiModel` does: a refusal is the
//! answer's text (chatmem has no refusal field, and sent back as content the model sees that
//! it refused), an answer with both text and a refusal is an error, and empty text next to
//! tool calls is no text. async-openai's response type has no `reasoning_content`, so
//! DeepSeek's reasoning is not there to keep; `OpenAiModel` keeps it.
//!
//! Whatever has no chatmem equivalent (audio, annotations, custom tool calls, the deprecated
//! `function_call`) is a [`ConversionError`] naming it, never dropped: clear the field first
//! to leave it out. These are functions rather than `From`/`TryFrom` impls because both
//! sides are foreign types here, which the orphan rule forbids, and a wrapper type would only
//! add a step for every caller.
//!
//! ```no_run
//! use chatmem::Message;
//! use chatmem_openai::async_openai::{Client, types::chat::CreateChatCompletionRequestArgs};
//! use chatmem_openai::convert::{from_response_message, to_request_messages};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let window = vec![Message::system("你是邻里仓售后。"), Message::user("那单能退吗？")];
//! let request = CreateChatCompletionRequestArgs::default()
//!     .model("gpt-4o-mini")
//!     .messages(to_request_messages(&window)?)
//!     .build()?;
//! let response = Client::new().chat().create(request).await?; // reads OPENAI_API_KEY
//! let choice = response.choices.into_iter().next().ok_or("no choices")?;
//! let answer: Message = from_response_message(choice.message)?; // store it with the turn
//! # Ok(()) }
//! ```

mod parts;
mod request;
mod response;

use std::fmt;

use async_openai::types::chat::ChatCompletionMessageToolCalls;
use chatmem::ToolCall;

pub use request::{from_request_message, to_request_message, to_request_messages};
pub use response::from_response_message;

/// Why a message could not be converted: which message (for lists) and what in it.
///
/// ```
/// use chatmem_openai::async_openai::types::chat::{
///     ChatCompletionRequestFunctionMessage, ChatCompletionRequestMessage,
/// };
/// use chatmem_openai::convert::{ConversionErrorKind, from_request_message};
///
/// let function = ChatCompletionRequestMessage::Function(ChatCompletionRequestFunctionMessage {
///     content: Some("42".into()),
///     name: "lookup".into(),
/// });
/// let e = from_request_message(function).unwrap_err();
/// assert_eq!(e.kind(), &ConversionErrorKind::UnsupportedRole { role: "function" });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversionError {
    index: Option<usize>,
    kind: ConversionErrorKind,
}

impl ConversionError {
    /// What could not be converted.
    pub fn kind(&self) -> &ConversionErrorKind {
        &self.kind
    }

    /// The message's position, when a list was converted ([`to_request_messages`]).
    pub fn index(&self) -> Option<usize> {
        self.index
    }
}

impl From<ConversionErrorKind> for ConversionError {
    fn from(kind: ConversionErrorKind) -> Self {
        Self { index: None, kind }
    }
}

impl fmt::Display for ConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "message {i}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for ConversionError {}

/// What in a message has no equivalent on the other side.
///
/// ```
/// use chatmem_openai::convert::ConversionErrorKind;
/// let k = ConversionErrorKind::UnsupportedToolCall { index: 0, kind: "custom" };
/// assert_eq!(k.to_string(), "tool call 0 is a custom tool call: chatmem holds function calls only");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionErrorKind {
    /// A role chatmem does not have (`function`).
    #[error(
        "role `{role}` has no chatmem equivalent (chatmem has system, developer, user, assistant and tool): \
         convert it to one of those first"
    )]
    UnsupportedRole {
        /// The role's name.
        role: &'static str,
    },
    /// An answer whose role is not `assistant`.
    #[error("a response message has role `{role}`, not `assistant`")]
    NotAssistant {
        /// The role's name.
        role: &'static str,
    },
    /// A field chatmem cannot hold (`audio`, `annotations`, `function_call`,
    /// `prompt_cache_breakpoint`).
    #[error("field `{field}` of a {role} message has no chatmem equivalent: set it to None to leave it out")]
    UnsupportedField {
        /// The message's role.
        role: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A content part that async-openai's message of that role cannot carry unchanged (any
    /// part but text for system, developer and tool; text and refusal for assistant).
    #[error("content part {index} of type {kind:?} cannot be carried unchanged by an async-openai {role} message")]
    UnsupportedPart {
        /// The message's role.
        role: &'static str,
        /// The part's position in the content.
        index: usize,
        /// The part's `type` (empty when it has none).
        kind: String,
    },
    /// An image `detail` that async-openai has no value for.
    #[error("content part {index}: image detail {detail:?} is not one of auto, low, high, original")]
    UnsupportedImageDetail {
        /// The part's position in the content.
        index: usize,
        /// The detail as given.
        detail: String,
    },
    /// A tool call of a kind other than `function`.
    #[error("tool call {index} is a {kind} tool call: chatmem holds function calls only")]
    UnsupportedToolCall {
        /// The call's position.
        index: usize,
        /// Its kind (`custom`).
        kind: &'static str,
    },
    /// A tool call with an empty `id` or `function.name`.
    #[error("tool call {index} has an empty `{field}`")]
    EmptyToolCallField {
        /// The call's position.
        index: usize,
        /// `id` or `function.name`.
        field: &'static str,
    },
    /// A tool result with an empty `tool_call_id`.
    #[error("the tool message has an empty `tool_call_id`")]
    EmptyToolCallId,
    /// An assistant message with both text and a refusal: chatmem keeps one text.
    #[error("the assistant message has both content and a refusal: chatmem keeps one text")]
    ContentAndRefusal,
}

fn unsupported_if(present: bool, role: &'static str, field: &'static str) -> Result<(), ConversionErrorKind> {
    if present {
        return Err(ConversionErrorKind::UnsupportedField { role, field });
    }
    Ok(())
}

fn tool_calls_from(calls: Option<Vec<ChatCompletionMessageToolCalls>>) -> Result<Vec<ToolCall>, ConversionErrorKind> {
    calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, c)| match c {
            ChatCompletionMessageToolCalls::Function(c) => Ok(ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            }),
            ChatCompletionMessageToolCalls::Custom(_) => {
                Err(ConversionErrorKind::UnsupportedToolCall { index, kind: "custom" })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use async_openai::types::chat::ChatCompletionResponseMessage;
    use chatmem::{ContentPart, ImageUrl, Message};
    use serde_json::Value;

    use super::*;

    pub(super) fn request_json(m: &Message) -> Value {
        serde_json::to_value(to_request_message(m).unwrap()).unwrap()
    }

    /// `m` to a request message and back, checking the request's JSON on the way.
    pub(super) fn both_ways(m: &Message, expected: Value) {
        assert_eq!(request_json(m), expected);
        assert_eq!(&from_request_message(to_request_message(m).unwrap()).unwrap(), m);
    }

    pub(super) fn kind(r: Result<Message, ConversionError>) -> ConversionErrorKind {
        r.unwrap_err().kind().clone()
    }

    pub(super) fn response(v: Value) -> ChatCompletionResponseMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_list_error_names_the_message() {
        let bad = Message::user_parts(vec![ContentPart::ImageUrl(ImageUrl {
            url: "u".into(),
            detail: Some("ultra".into()),
        })]);
        let e = to_request_messages(&vec![Message::user("ok"), bad]).unwrap_err();
        assert_eq!(e.index(), Some(1));
        assert_eq!(
            e.kind(),
            &ConversionErrorKind::UnsupportedImageDetail {
                index: 0,
                detail: "ultra".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "message 1: content part 0: image detail \"ultra\" is not one of auto, low, high, original"
        );
    }
}
