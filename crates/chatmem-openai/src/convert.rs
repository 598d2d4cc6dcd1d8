//! Conversions between chatmem [`Message`]s and async-openai's chat types, for applications
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
//! | tool result | `Tool` (text, `tool_call_id`) | the same; parts are an error |
//! | — | `Developer`, `Function` | an error (chatmem has no such role) |
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

use std::fmt;

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestMessage,
    ChatCompletionRequestMessageContentPartImage, ChatCompletionRequestMessageContentPartText,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionRequestUserMessageContentPart, ChatCompletionResponseMessage, FunctionCall, ImageDetail,
    Role as OaiRole,
};
use chatmem::{ContentPart, ImageUrl, Message, ToolCall, UserContent};
use serde_json::Value;

use crate::wire::{self, Sent};

/// Why a message could not be converted: which message (for lists) and what in it.
///
/// ```
/// use chatmem_openai::async_openai::types::chat::{
///     ChatCompletionRequestDeveloperMessage, ChatCompletionRequestMessage,
/// };
/// use chatmem_openai::convert::{ConversionErrorKind, from_request_message};
///
/// let developer = ChatCompletionRequestMessage::Developer(ChatCompletionRequestDeveloperMessage {
///     content: "be brief".into(),
///     name: None,
/// });
/// let e = from_request_message(developer).unwrap_err();
/// assert_eq!(e.kind(), &ConversionErrorKind::UnsupportedRole { role: "developer" });
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
    /// A role chatmem does not have (`developer`, `function`).
    #[error(
        "role `{role}` has no chatmem equivalent (chatmem has system, user, assistant and tool): \
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
    /// Content given as a list of parts for a role whose chatmem content is one text.
    #[error("the {role} message's content is a list of parts: chatmem keeps {role} content as one text")]
    ContentParts {
        /// The message's role.
        role: &'static str,
    },
    /// A user content part that async-openai's user message cannot carry unchanged.
    #[error("content part {index} of type {kind:?} cannot be carried unchanged by an async-openai user message")]
    UnsupportedPart {
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

/// The request message that sends `message`, as [`OpenAiModel`](crate::OpenAiModel) would
/// send it (without `reasoning_content`, `metadata`, `is_error`, or a tool result's `name`).
///
/// # Errors
/// A user content part async-openai cannot carry unchanged (an unknown `type`, an image
/// `detail` it has no value for).
///
/// ```
/// use chatmem::{Message, ToolCall};
/// use chatmem_openai::async_openai::types::chat::ChatCompletionRequestMessage;
/// use chatmem_openai::convert::to_request_message;
///
/// let call = Message::assistant_tool_calls(vec![ToolCall::new("call_1", "order_status", "{}")]);
/// let ChatCompletionRequestMessage::Assistant(a) = to_request_message(&call)? else { unreachable!() };
/// assert_eq!(a.tool_calls.map(|c| c.len()), Some(1));
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn to_request_message(message: &Message) -> Result<ChatCompletionRequestMessage, ConversionError> {
    Ok(match wire::sent(message) {
        Sent::System { content, name } => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(content.to_owned()),
            name: name.map(str::to_owned),
        }),
        Sent::User { content, name } => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: match content {
                UserContent::Text(t) => ChatCompletionRequestUserMessageContent::Text(t.clone()),
                UserContent::Parts(parts) => ChatCompletionRequestUserMessageContent::Array(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(i, p)| part_to_request(i, p))
                        .collect::<Result<_, _>>()?,
                ),
            },
            name: name.map(str::to_owned),
        }),
        Sent::Assistant {
            content,
            tool_calls,
            name,
        } => {
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: content.map(|c| ChatCompletionRequestAssistantMessageContent::Text(c.to_owned())),
                tool_calls: (!tool_calls.is_empty()).then(|| {
                    tool_calls
                        .iter()
                        .map(|c| {
                            ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                                id: c.id.clone(),
                                function: FunctionCall {
                                    name: c.name.clone(),
                                    arguments: c.arguments.clone(),
                                },
                            })
                        })
                        .collect()
                }),
                name: name.map(str::to_owned),
                // The rest (refusal, audio, the deprecated function_call) chatmem never holds.
                ..Default::default()
            })
        }
        Sent::Tool { tool_call_id, content } => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(content.to_owned()),
            tool_call_id: tool_call_id.to_owned(),
        }),
    })
}

/// [`to_request_message`] for each message of a window, in order; an error names the
/// message's position ([`ConversionError::index`]). Takes `&Vec<Message>` (what
/// `ChatMemory::get` returns) as well as `Vec<&Message>` (what a turn's `prompt` returns).
///
/// # Errors
/// The first message that cannot be converted.
///
/// ```
/// use chatmem::Message;
/// use chatmem_openai::convert::to_request_messages;
///
/// let window = vec![Message::system("你是邻里仓售后。"), Message::user("那单能退吗？")];
/// assert_eq!(to_request_messages(&window)?.len(), 2);
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn to_request_messages<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
) -> Result<Vec<ChatCompletionRequestMessage>, ConversionError> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            to_request_message(m).map_err(|e| ConversionError {
                index: Some(i),
                kind: e.kind,
            })
        })
        .collect()
}

/// The chatmem message a request message holds, for storing messages an application built
/// with async-openai. The inverse of [`to_request_message`] for every message that sends all
/// it holds (no reasoning, metadata, `is_error` or tool `name`, and no `""` text next to tool
/// calls, which reads back as no text).
///
/// # Errors
/// A developer or function message, content parts for a system, assistant or tool message,
/// assistant `audio` or `function_call`, a custom tool call, an empty tool call id or name,
/// an empty `tool_call_id`, text and a refusal together, or a part with a
/// `prompt_cache_breakpoint`: each [`ConversionErrorKind`] names what it is.
///
/// ```
/// use chatmem::Message;
/// use chatmem_openai::convert::{from_request_message, to_request_message};
///
/// let m = Message::tool_result("call_1", r#"{"status":"not shipped"}"#);
/// assert_eq!(from_request_message(to_request_message(&m)?)?, m);
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn from_request_message(message: ChatCompletionRequestMessage) -> Result<Message, ConversionError> {
    use ChatCompletionRequestMessage as M;
    let with_name = |m: Message, name: Option<String>| Message { name, ..m };
    Ok(match message {
        M::Developer(_) => return Err(ConversionErrorKind::UnsupportedRole { role: "developer" }.into()),
        M::Function(_) => return Err(ConversionErrorKind::UnsupportedRole { role: "function" }.into()),
        M::System(s) => match s.content {
            ChatCompletionRequestSystemMessageContent::Text(t) => with_name(Message::system(t), s.name),
            ChatCompletionRequestSystemMessageContent::Array(_) => {
                return Err(ConversionErrorKind::ContentParts { role: "system" }.into());
            }
        },
        M::User(u) => {
            let m = match u.content {
                ChatCompletionRequestUserMessageContent::Text(t) => Message::user(t),
                ChatCompletionRequestUserMessageContent::Array(parts) => Message::user_parts(
                    parts
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| part_from_request(i, p))
                        .collect::<Result<_, _>>()?,
                ),
            };
            with_name(m, u.name)
        }
        M::Assistant(a) => {
            // Every field by name, so a field a new async-openai adds fails to compile here
            // instead of being dropped.
            #[allow(deprecated)]
            let ChatCompletionRequestAssistantMessage {
                content,
                refusal,
                name,
                audio,
                tool_calls,
                function_call,
            } = a;
            unsupported_if(audio.is_some(), "assistant", "audio")?;
            unsupported_if(function_call.is_some(), "assistant", "function_call")?;
            let content = match content {
                None => None,
                Some(ChatCompletionRequestAssistantMessageContent::Text(t)) => Some(t),
                Some(ChatCompletionRequestAssistantMessageContent::Array(_)) => {
                    return Err(ConversionErrorKind::ContentParts { role: "assistant" }.into());
                }
            };
            let m = wire::answer(content, refusal, tool_calls_from(tool_calls)?, None)?;
            with_name(m, name)
        }
        M::Tool(t) => {
            if t.tool_call_id.is_empty() {
                return Err(ConversionErrorKind::EmptyToolCallId.into());
            }
            match t.content {
                ChatCompletionRequestToolMessageContent::Text(c) => Message::tool_result(t.tool_call_id, c),
                ChatCompletionRequestToolMessageContent::Array(_) => {
                    return Err(ConversionErrorKind::ContentParts { role: "tool" }.into());
                }
            }
        }
    })
}

/// The assistant message an answer makes, to store with the turn: text, tool calls (ids and
/// arguments as the model wrote them), and a refusal as the text (chatmem has no refusal
/// field; see the [module docs](self)).
///
/// # Errors
/// A role other than assistant, both text and a refusal, non-empty `annotations`, `audio`,
/// `function_call`, a custom tool call, or an empty tool call id or name.
///
/// ```
/// use chatmem_openai::async_openai::types::chat::ChatCompletionResponseMessage;
/// use chatmem_openai::convert::from_response_message;
///
/// let answer = ChatCompletionResponseMessage {
///     refusal: Some("I can't help with that.".into()),
///     role: chatmem_openai::async_openai::types::chat::Role::Assistant,
///     ..Default::default()
/// };
/// let m = from_response_message(answer)?;
/// assert_eq!(m.text().as_deref(), Some("I can't help with that."));
/// # Ok::<(), chatmem_openai::convert::ConversionError>(())
/// ```
pub fn from_response_message(message: ChatCompletionResponseMessage) -> Result<Message, ConversionError> {
    // Every field by name, so a field a new async-openai adds fails to compile here.
    #[allow(deprecated)]
    let ChatCompletionResponseMessage {
        content,
        refusal,
        tool_calls,
        annotations,
        role,
        function_call,
        audio,
    } = message;
    if role != OaiRole::Assistant {
        return Err(ConversionErrorKind::NotAssistant { role: role_name(role) }.into());
    }
    // OpenAI sends `"annotations": []` with every answer; only citations would be lost.
    unsupported_if(annotations.is_some_and(|a| !a.is_empty()), "assistant", "annotations")?;
    unsupported_if(audio.is_some(), "assistant", "audio")?;
    unsupported_if(function_call.is_some(), "assistant", "function_call")?;
    Ok(wire::answer(content, refusal, tool_calls_from(tool_calls)?, None)?)
}

fn unsupported_if(present: bool, role: &'static str, field: &'static str) -> Result<(), ConversionErrorKind> {
    if present {
        return Err(ConversionErrorKind::UnsupportedField { role, field });
    }
    Ok(())
}

fn role_name(role: OaiRole) -> &'static str {
    match role {
        OaiRole::Developer => "developer",
        OaiRole::System => "system",
        OaiRole::User => "user",
        OaiRole::Assistant => "assistant",
        OaiRole::Tool => "tool",
        OaiRole::Function => "function",
    }
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

fn detail_to_request(index: usize, detail: &str) -> Result<ImageDetail, ConversionErrorKind> {
    match detail {
        "auto" => Ok(ImageDetail::Auto),
        "low" => Ok(ImageDetail::Low),
        "high" => Ok(ImageDetail::High),
        "original" => Ok(ImageDetail::Original),
        _ => Err(ConversionErrorKind::UnsupportedImageDetail {
            index,
            detail: detail.to_owned(),
        }),
    }
}

fn detail_from_request(detail: ImageDetail) -> String {
    match detail {
        ImageDetail::Auto => "auto",
        ImageDetail::Low => "low",
        ImageDetail::High => "high",
        ImageDetail::Original => "original",
    }
    .to_owned()
}

/// A part as sent: text and images field by field; any other part through its JSON, which
/// must read back unchanged (serde ignores fields async-openai does not know, which would
/// drop them).
fn part_to_request(
    index: usize,
    part: &ContentPart,
) -> Result<ChatCompletionRequestUserMessageContentPart, ConversionErrorKind> {
    Ok(match part {
        ContentPart::Text(t) => {
            ChatCompletionRequestUserMessageContentPart::Text(ChatCompletionRequestMessageContentPartText {
                text: t.clone(),
                prompt_cache_breakpoint: None,
            })
        }
        ContentPart::ImageUrl(i) => {
            ChatCompletionRequestUserMessageContentPart::ImageUrl(ChatCompletionRequestMessageContentPartImage {
                image_url: async_openai::types::chat::ImageUrl {
                    url: i.url.clone(),
                    detail: i.detail.as_deref().map(|d| detail_to_request(index, d)).transpose()?,
                },
                prompt_cache_breakpoint: None,
            })
        }
        ContentPart::Other(obj) => {
            let unsupported = || ConversionErrorKind::UnsupportedPart {
                index,
                kind: obj.get("type").and_then(Value::as_str).unwrap_or_default().to_owned(),
            };
            let original = Value::Object(obj.clone());
            let typed: ChatCompletionRequestUserMessageContentPart =
                serde_json::from_value(original.clone()).map_err(|_| unsupported())?;
            if serde_json::to_value(&typed).ok().as_ref() != Some(&original) {
                return Err(unsupported());
            }
            typed
        }
    })
}

fn part_from_request(
    index: usize,
    part: ChatCompletionRequestUserMessageContentPart,
) -> Result<ContentPart, ConversionErrorKind> {
    use ChatCompletionRequestUserMessageContentPart as P;
    let no_breakpoint = |present: bool| unsupported_if(present, "user", "prompt_cache_breakpoint");
    Ok(match part {
        P::Text(t) => {
            no_breakpoint(t.prompt_cache_breakpoint.is_some())?;
            ContentPart::Text(t.text)
        }
        P::ImageUrl(i) => {
            no_breakpoint(i.prompt_cache_breakpoint.is_some())?;
            ContentPart::ImageUrl(ImageUrl {
                url: i.image_url.url,
                detail: i.image_url.detail.map(detail_from_request),
            })
        }
        // Audio and files: chatmem keeps parts it does not model as their JSON.
        other @ (P::InputAudio(_) | P::File(_)) => match serde_json::to_value(&other) {
            Ok(Value::Object(obj)) => ContentPart::Other(obj),
            _ => {
                return Err(ConversionErrorKind::UnsupportedPart {
                    index,
                    kind: if matches!(other, P::File(_)) {
                        "file"
                    } else {
                        "input_audio"
                    }
                    .to_owned(),
                });
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_openai::types::chat::{
        ChatCompletionMessageCustomToolCall, ChatCompletionRequestDeveloperMessage,
        ChatCompletionRequestFunctionMessage, ChatCompletionRequestSystemMessageContentPart,
        ChatCompletionResponseMessageAnnotation, ChatCompletionResponseMessageAudio, CustomTool, UrlCitation,
    };
    use chatmem::{Body, ChatRequest, Metadata};
    use proptest::prelude::*;
    use serde_json::json;

    fn request_json(m: &Message) -> Value {
        serde_json::to_value(to_request_message(m).unwrap()).unwrap()
    }

    /// `m` to a request message and back, checking the request's JSON on the way.
    fn both_ways(m: &Message, expected: Value) {
        assert_eq!(request_json(m), expected);
        assert_eq!(&from_request_message(to_request_message(m).unwrap()).unwrap(), m);
    }

    fn kind(r: Result<Message, ConversionError>) -> ConversionErrorKind {
        r.unwrap_err().kind().clone()
    }

    fn response(v: Value) -> ChatCompletionResponseMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn system_both_ways() {
        both_ways(
            &Message::system("你是邻里仓售后。").with_name("ops"),
            json!({"role": "system", "content": "你是邻里仓售后。", "name": "ops"}),
        );
    }

    #[test]
    fn user_text_both_ways() {
        both_ways(
            &Message::user("我的订单是 LC202610060018，还没发货。").with_name("alice"),
            json!({"role": "user", "content": "我的订单是 LC202610060018，还没发货。", "name": "alice"}),
        );
    }

    #[test]
    fn user_images_both_ways() {
        let m = Message::user_parts(vec![
            ContentPart::Text("what is in this photo?".into()),
            ContentPart::ImageUrl(ImageUrl {
                url: "https://example.com/parcel.jpg".into(),
                detail: Some("high".into()),
            }),
            ContentPart::ImageUrl(ImageUrl {
                url: "data:image/png;base64,iVBORw0KGgo=".into(),
                detail: None,
            }),
        ]);
        both_ways(
            &m,
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is in this photo?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/parcel.jpg", "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]}),
        );
        for detail in ["auto", "low", "high", "original"] {
            let m = Message::user_parts(vec![ContentPart::ImageUrl(ImageUrl {
                url: "u".into(),
                detail: Some(detail.into()),
            })]);
            assert_eq!(&from_request_message(to_request_message(&m).unwrap()).unwrap(), &m);
        }
    }

    #[test]
    fn audio_and_file_parts_travel_as_their_json() {
        let audio = json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}});
        let file = json!({"type": "file", "file": {"file_id": "file-1"}});
        let Value::Object(a) = audio.clone() else {
            unreachable!()
        };
        let Value::Object(f) = file.clone() else { unreachable!() };
        both_ways(
            &Message::user_parts(vec![ContentPart::Other(a), ContentPart::Other(f)]),
            json!({"role": "user", "content": [audio, file]}),
        );
    }

    #[test]
    fn assistant_text_and_tool_calls_both_ways() {
        both_ways(
            &Message::assistant("订单 LC202610060018 未发货，可以退。"),
            json!({"role": "assistant", "content": "订单 LC202610060018 未发货，可以退。"}),
        );
        let calls = vec![
            ToolCall::new("call_1", "order_status", r#"{"order":"LC202610060018"}"#),
            ToolCall::new("call_2", "refund_policy", "{}"),
        ];
        both_ways(
            &Message::assistant_tool_calls(calls.clone()),
            json!({"role": "assistant", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": "{\"order\":\"LC202610060018\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "refund_policy", "arguments": "{}"}}
            ]}),
        );
        let mut both = Message::assistant("let me check").with_name("bot");
        if let Body::Assistant { tool_calls, .. } = &mut both.body {
            *tool_calls = calls;
        }
        assert_eq!(
            &from_request_message(to_request_message(&both).unwrap()).unwrap(),
            &both
        );
    }

    #[test]
    fn tool_results_both_ways() {
        both_ways(
            &Message::tool_result("call_1", r#"{"status":"not shipped"}"#),
            json!({"role": "tool", "content": "{\"status\":\"not shipped\"}", "tool_call_id": "call_1"}),
        );
    }

    #[test]
    fn requests_never_carry_reasoning_metadata_is_error_or_a_tool_name() {
        let mut meta = Metadata::new();
        meta.insert("channel".into(), json!("app"));
        let mut answer = Message::assistant("已查询").with_metadata(meta.clone());
        if let Body::Assistant { reasoning_content, .. } = &mut answer.body {
            *reasoning_content = Some("secret thoughts".into());
        }
        let messages = vec![
            Message::system("rules").with_metadata(meta.clone()),
            Message::user("hi").with_metadata(meta),
            answer,
            Message::tool_error("c1", "boom").with_name("lookup"),
        ];
        let v = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
        let text = v.to_string();
        for absent in [
            "reasoning_content",
            "secret thoughts",
            "metadata",
            "channel",
            "is_error",
            "lookup",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert_eq!(v[3], json!({"role": "tool", "content": "boom", "tool_call_id": "c1"}));
    }

    #[test]
    fn an_assistant_message_without_text_or_calls_is_sent_as_empty_text() {
        let mut m = Message::assistant_tool_calls(Vec::new());
        m.name = None;
        assert_eq!(request_json(&m), json!({"role": "assistant", "content": ""}));
    }

    #[test]
    fn the_converted_window_is_what_openai_model_sends() {
        let mut reasoning = Message::assistant("a");
        if let Body::Assistant { reasoning_content, .. } = &mut reasoning.body {
            *reasoning_content = Some("r".into());
        }
        let messages = vec![
            Message::system("s").with_name("n"),
            Message::user_parts(vec![
                ContentPart::Text("t".into()),
                ContentPart::ImageUrl(ImageUrl {
                    url: "u".into(),
                    detail: Some("low".into()),
                }),
            ]),
            reasoning,
            Message::assistant_tool_calls(vec![ToolCall::new("c", "f", "{}")]),
            Message::tool_error("c", "x").with_name("f"),
            Message::assistant_tool_calls(Vec::new()),
        ];
        let ours = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
        // A turn's prompt is borrowed messages: the same conversion.
        let prompt: Vec<&Message> = messages.iter().collect();
        assert_eq!(
            serde_json::to_value(to_request_messages(prompt).unwrap()).unwrap(),
            ours
        );
        let req = ChatRequest::new(&messages);
        let wire = serde_json::to_value(wire::request("m", &req, false)).unwrap();
        assert_eq!(ours, wire["messages"]);
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

    #[test]
    fn parts_async_openai_cannot_carry_unchanged_are_errors() {
        let obj = |v: Value| match v {
            Value::Object(o) => ContentPart::Other(o),
            _ => unreachable!(),
        };
        for (part, kind) in [
            (json!({"type": "video_url", "video_url": {"url": "u"}}), "video_url"),
            (json!({"no_type": 1}), ""),
            // A field async-openai does not know would be dropped by serde.
            (
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}, "extra": 1}),
                "input_audio",
            ),
            (
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "flac"}}),
                "input_audio",
            ),
        ] {
            let e =
                to_request_message(&Message::user_parts(vec![ContentPart::Text("t".into()), obj(part)])).unwrap_err();
            assert_eq!(
                e.kind(),
                &ConversionErrorKind::UnsupportedPart {
                    index: 1,
                    kind: kind.into()
                }
            );
        }
    }

    #[test]
    fn roles_and_shapes_chatmem_lacks_are_errors() {
        let dev = ChatCompletionRequestMessage::Developer(ChatCompletionRequestDeveloperMessage {
            content: "x".into(),
            name: None,
        });
        assert_eq!(
            kind(from_request_message(dev)),
            ConversionErrorKind::UnsupportedRole { role: "developer" }
        );
        let f = ChatCompletionRequestMessage::Function(ChatCompletionRequestFunctionMessage {
            content: Some("x".into()),
            name: "f".into(),
        });
        assert_eq!(
            kind(from_request_message(f)),
            ConversionErrorKind::UnsupportedRole { role: "function" }
        );

        let text_part = ChatCompletionRequestMessageContentPartText {
            text: "x".into(),
            prompt_cache_breakpoint: None,
        };
        let sys = ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Array(vec![
                ChatCompletionRequestSystemMessageContentPart::Text(text_part.clone()),
            ]),
            name: None,
        });
        assert_eq!(
            kind(from_request_message(sys)),
            ConversionErrorKind::ContentParts { role: "system" }
        );
        for (v, role) in [
            (
                json!({"role": "assistant", "content": [{"type": "text", "text": "x"}]}),
                "assistant",
            ),
            (
                json!({"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "x"}]}),
                "tool",
            ),
        ] {
            let m: ChatCompletionRequestMessage = serde_json::from_value(v).unwrap();
            assert_eq!(
                kind(from_request_message(m)),
                ConversionErrorKind::ContentParts { role }
            );
        }

        let m: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "content": "x", "audio": {"id": "a"}})).unwrap();
        assert_eq!(
            kind(from_request_message(m)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "audio"
            }
        );
        let m: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}))
                .unwrap();
        assert_eq!(
            kind(from_request_message(m)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "function_call"
            }
        );
        let m: ChatCompletionRequestMessage = serde_json::from_value(json!({"role": "user", "content": [
            {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}
        ]}))
        .unwrap();
        assert_eq!(
            kind(from_request_message(m)),
            ConversionErrorKind::UnsupportedField {
                role: "user",
                field: "prompt_cache_breakpoint"
            }
        );
        let m: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "tool", "tool_call_id": "", "content": "x"})).unwrap();
        assert_eq!(kind(from_request_message(m)), ConversionErrorKind::EmptyToolCallId);
    }

    #[test]
    fn tool_calls_must_be_functions_with_ids_and_names() {
        let custom = response(json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"type": "custom", "id": "c2", "custom_tool": {"name": "g", "input": "x"}}
        ]}));
        assert_eq!(
            kind(from_response_message(custom)),
            ConversionErrorKind::UnsupportedToolCall {
                index: 1,
                kind: "custom"
            }
        );
        let custom = ChatCompletionMessageToolCalls::Custom(ChatCompletionMessageCustomToolCall {
            id: "c".into(),
            custom_tool: CustomTool {
                name: "g".into(),
                input: "x".into(),
            },
        });
        let a = ChatCompletionRequestAssistantMessage {
            tool_calls: Some(vec![custom]),
            ..Default::default()
        };
        assert_eq!(
            kind(from_request_message(ChatCompletionRequestMessage::Assistant(a))),
            ConversionErrorKind::UnsupportedToolCall {
                index: 0,
                kind: "custom"
            }
        );
        for (call, field) in [
            (
                json!({"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}),
                "id",
            ),
            (
                json!({"id": "c", "type": "function", "function": {"name": "", "arguments": "{}"}}),
                "function.name",
            ),
        ] {
            let r = response(json!({"role": "assistant", "tool_calls": [call]}));
            assert_eq!(
                kind(from_response_message(r)),
                ConversionErrorKind::EmptyToolCallField { index: 0, field }
            );
        }
    }

    #[test]
    fn a_response_becomes_an_assistant_message() {
        // An OpenAI answer as it comes, nulls and empty annotations included.
        let r = response(json!({
            "role": "assistant", "content": null, "refusal": null, "annotations": [],
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "order_status", "arguments": "{\"order\":\"LC202610060018\"}"}}]
        }));
        assert_eq!(
            from_response_message(r).unwrap(),
            Message::assistant_tool_calls(vec![ToolCall::new(
                "call_1",
                "order_status",
                "{\"order\":\"LC202610060018\"}"
            )])
        );
        let r = response(json!({"role": "assistant", "content": "可以退。", "annotations": []}));
        assert_eq!(from_response_message(r).unwrap(), Message::assistant("可以退。"));
        // DeepSeek's "" next to tool calls is no text.
        let r = response(json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]}));
        assert_eq!(from_response_message(r).unwrap().text(), None);
        let r = response(json!({"role": "user", "content": "x"}));
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::NotAssistant { role: "user" }
        );
    }

    #[test]
    fn refusals_become_the_text_and_never_overwrite_it() {
        let r = response(json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}));
        assert_eq!(
            from_response_message(r).unwrap(),
            Message::assistant("I can't help with that.")
        );
        let r = response(json!({"role": "assistant", "content": "", "refusal": "no"}));
        assert_eq!(from_response_message(r).unwrap(), Message::assistant("no"));
        let r = response(json!({"role": "assistant", "content": "sure", "refusal": "no"}));
        assert_eq!(kind(from_response_message(r)), ConversionErrorKind::ContentAndRefusal);

        let req: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "refusal": "no"})).unwrap();
        assert_eq!(from_request_message(req).unwrap(), Message::assistant("no"));
        let req: ChatCompletionRequestMessage =
            serde_json::from_value(json!({"role": "assistant", "content": "sure", "refusal": "no"})).unwrap();
        assert_eq!(kind(from_request_message(req)), ConversionErrorKind::ContentAndRefusal);
    }

    #[test]
    fn response_fields_chatmem_lacks_are_errors() {
        let mut r = response(json!({"role": "assistant", "content": "see the source"}));
        r.annotations = Some(vec![ChatCompletionResponseMessageAnnotation::UrlCitation {
            url_citation: UrlCitation {
                end_index: 1,
                start_index: 0,
                title: "t".into(),
                url: "https://example.com".into(),
            },
        }]);
        assert_eq!(
            kind(from_response_message(r.clone())),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "annotations"
            }
        );
        r.annotations = None;
        r.audio = Some(ChatCompletionResponseMessageAudio {
            id: "a".into(),
            expires_at: 0,
            data: String::new(),
            transcript: "hi".into(),
        });
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "audio"
            }
        );
        let r = response(json!({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}));
        assert_eq!(
            kind(from_response_message(r)),
            ConversionErrorKind::UnsupportedField {
                role: "assistant",
                field: "function_call"
            }
        );
    }

    // ---- properties ------------------------------------------------------------------------

    fn text() -> impl Strategy<Value = String> {
        "[a-z0-9 订单\\n\"{}]{0,12}"
    }

    fn nonempty() -> impl Strategy<Value = String> {
        "[a-z0-9_订]{1,8}"
    }

    fn part() -> impl Strategy<Value = ContentPart> {
        prop_oneof![
            text().prop_map(ContentPart::Text),
            (
                text(),
                proptest::option::of(prop_oneof![Just("auto"), Just("low"), Just("high"), Just("original")])
            )
                .prop_map(|(url, d)| ContentPart::ImageUrl(ImageUrl {
                    url,
                    detail: d.map(str::to_owned)
                })),
            text().prop_map(
                |data| match json!({"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}}) {
                    Value::Object(o) => ContentPart::Other(o),
                    _ => unreachable!(),
                }
            ),
        ]
    }

    fn call() -> impl Strategy<Value = ToolCall> {
        (nonempty(), nonempty(), text()).prop_map(|(id, name, args)| ToolCall::new(id, name, args))
    }

    /// Messages that send everything they hold: no reasoning, metadata, `is_error` or tool
    /// name, and no empty text next to tool calls.
    fn sendable() -> impl Strategy<Value = Message> {
        let name = proptest::option::of(nonempty());
        let body = prop_oneof![
            text().prop_map(Message::system),
            text().prop_map(Message::user),
            proptest::collection::vec(part(), 0..4).prop_map(Message::user_parts),
            (
                proptest::option::of(nonempty()),
                proptest::collection::vec(call(), 0..3)
            )
                .prop_map(|(content, calls)| {
                    let content = match (content, calls.is_empty()) {
                        (None, true) => Some(String::new()),
                        (c, _) => c,
                    };
                    Message {
                        body: Body::Assistant {
                            content,
                            reasoning_content: None,
                            tool_calls: calls,
                        },
                        name: None,
                        metadata: None,
                    }
                }),
            (nonempty(), text()).prop_map(|(id, c)| Message::tool_result(id, c)),
        ];
        (body, name).prop_map(|(m, name)| match m.body {
            Body::Tool { .. } => m,
            _ => Message { name, ..m },
        })
    }

    proptest! {
        #[test]
        fn sendable_messages_round_trip(m in sendable()) {
            prop_assert_eq!(from_request_message(to_request_message(&m).unwrap()).unwrap(), m);
        }

        #[test]
        fn a_request_message_reads_back_the_same(m in sendable()) {
            let req = to_request_message(&m).unwrap();
            let back = to_request_message(&from_request_message(req.clone()).unwrap()).unwrap();
            prop_assert_eq!(back, req);
        }

        #[test]
        fn every_message_converts_as_openai_model_sends_it(m in sendable(), reasoning in proptest::option::of(text())) {
            let mut m = m;
            if let Body::Assistant { reasoning_content, .. } = &mut m.body {
                *reasoning_content = reasoning;
            }
            let messages = [m];
            let ours = serde_json::to_value(to_request_messages(&messages).unwrap()).unwrap();
            let wire = serde_json::to_value(wire::request("m", &ChatRequest::new(&messages), false)).unwrap();
            prop_assert_eq!(&ours, &wire["messages"]);
        }
    }
}
