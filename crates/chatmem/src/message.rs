//! The message model. Its JSON form (the OpenAI Chat Completions message shape) is in
//! [`json`]: `role`, `content`, `name`, `tool_calls: [{id, type: "function", function:
//! {name, arguments}}]`, `tool_call_id`, plus chatmem's `reasoning_content` (as DeepSeek
//! returns it), `is_error` (tool results) and `metadata`. Absent optional fields are omitted
//! when written, so reading then writing a message gives the same JSON value.
//! Unknown fields are rejected rather than silently dropped: stored data must round-trip.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Free-form data attached to a message: string keys, JSON values. Never sent to a model.
pub type Metadata = Map<String, Value>;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model; at most one per conversation (shared with `developer`).
    System,
    /// Instructions for the model under OpenAI's newer name: it takes the system message's
    /// place (one per conversation, never evicted, first) and keeps its role.
    Developer,
    /// The person (or program) talking to the model.
    User,
    /// The model's answer, possibly with tool calls.
    Assistant,
    /// The result of one tool call.
    Tool,
}

impl Role {
    /// The role's name in JSON (`"user"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call requested by the assistant.
///
/// ```
/// let call = chatmem::ToolCall::new("call_1", "order_status", r#"{"order":"LC202610060018"}"#);
/// assert_eq!(call.name, "order_status");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The id a tool result answers with its `tool_call_id`.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments, as the JSON text the model wrote (not parsed: models write invalid JSON).
    pub arguments: String,
}

impl ToolCall {
    /// A call of function `name` with `arguments` (JSON text).
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// An image referenced by URL (or data URL) in a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with `url` and, optionally, `detail`")]
pub struct ImageUrl {
    /// The URL.
    pub url: String,
    /// The provider's detail hint (`low`, `high`, `auto`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One part of a message's content.
///
/// A user sends text, images and other parts (audio, files, ...), kept as they came so they
/// round-trip and counting no tokens; system, developer and tool messages take text parts;
/// an assistant's, text and refusal parts: what OpenAI's chat completions accept per role.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    /// `{"type": "text", "text": ...}`
    Text(String),
    /// `{"type": "image_url", "image_url": {"url": ..., "detail": ...}}`
    ImageUrl(ImageUrl),
    /// `{"type": "refusal", "refusal": ...}`: an assistant's refusal to answer.
    Refusal(String),
    /// Any other `{"type": ..., ...}` object, kept verbatim.
    Other(Map<String, Value>),
}

/// A message's content: text, or a list of parts, kept as the client sent it.
///
/// ```
/// use chatmem::{Content, ContentPart};
///
/// let parts = Content::Parts(vec![ContentPart::Text("a".into()), ContentPart::Text("b".into())]);
/// assert_eq!(parts.text(), "a\nb");
/// assert_eq!(Content::from("hi").text(), "hi");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// A list of parts (text, images, refusals, ...).
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text: the text itself, or the text parts joined with newlines (refusals, images
    /// and other parts are left out).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        match self {
            Content::Text(t) => Cow::Borrowed(t),
            Content::Parts(parts) => {
                let mut texts = parts.iter().filter_map(|p| match p {
                    ContentPart::Text(t) => Some(t.as_str()),
                    _ => None,
                });
                match (texts.next(), texts.next()) {
                    (None, _) => Cow::Borrowed(""),
                    (Some(only), None) => Cow::Borrowed(only),
                    (Some(first), Some(second)) => {
                        let mut joined = format!("{first}\n{second}");
                        for t in texts {
                            joined.push('\n');
                            joined.push_str(t);
                        }
                        Cow::Owned(joined)
                    }
                }
            }
        }
    }

    /// The parts, or `None` for plain text.
    pub fn parts(&self) -> Option<&[ContentPart]> {
        match self {
            Content::Text(_) => None,
            Content::Parts(parts) => Some(parts),
        }
    }

    /// The length of every string the content carries (see [`Message::payload_len`]).
    fn payload_len(&self) -> usize {
        match self {
            Content::Text(t) => t.len(),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text(t) | ContentPart::Refusal(t) => t.len(),
                    ContentPart::ImageUrl(i) => i.url.len() + i.detail.as_ref().map_or(0, String::len),
                    ContentPart::Other(obj) => json_len(obj),
                })
                .sum(),
        }
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::Text(text.to_owned())
    }
}

/// A conversation message.
///
/// Build one with [`Message::system`], [`Message::user`], [`Message::assistant`],
/// [`Message::assistant_tool_calls`] or [`Message::tool_result`]; read and write JSON with
/// serde or [`parse_messages`].
///
/// ```
/// use chatmem::{Message, Role};
///
/// let m = Message::user("我的订单是 LC202610060018，还没发货。");
/// assert_eq!(m.role(), Role::User);
/// let json = serde_json::to_value(&m)?;
/// assert_eq!(json["role"], "user");
/// assert_eq!(serde_json::from_value::<Message>(json)?, m);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The role and what that role carries.
    pub body: Body,
    /// The participant's name (`name`), when given.
    pub name: Option<String>,
    /// chatmem metadata (`metadata`), when given. Kept, never sent to a model.
    pub metadata: Option<Metadata>,
}

/// The role-specific part of a [`Message`].
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A system message.
    System {
        /// The instructions: text, or text parts.
        content: Content,
    },
    /// A developer message: instructions, as a system message is (see [`Message::is_system`]).
    Developer {
        /// The instructions: text, or text parts.
        content: Content,
    },
    /// A user message.
    User {
        /// Text or parts.
        content: Content,
    },
    /// An assistant message: text, tool calls, or both.
    Assistant {
        /// The answer, if any: text, or text and refusal parts.
        content: Option<Content>,
        /// Reasoning text (DeepSeek's `reasoning_content`): kept in memory, never sent back.
        reasoning_content: Option<String>,
        /// Tool calls, possibly empty.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The result: text, or text parts.
        content: Content,
        /// Whether the tool failed (chatmem's `is_error`).
        is_error: bool,
    },
}

impl Message {
    fn from_body(body: Body) -> Self {
        Self {
            body,
            name: None,
            metadata: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::from_body(Body::System {
            content: Content::Text(content.into()),
        })
    }

    /// A developer message: OpenAI's newer name for the instructions a system message gives.
    /// It holds the conversation's system slot (see [`Message::is_system`]).
    ///
    /// ```
    /// let m = chatmem::Message::developer("Answer in one sentence.");
    /// assert!(m.is_system());
    /// assert_eq!(m.role(), chatmem::Role::Developer);
    /// ```
    pub fn developer(content: impl Into<String>) -> Self {
        Self::from_body(Body::Developer {
            content: Content::Text(content.into()),
        })
    }

    /// A user message with text content.
    pub fn user(content: impl Into<String>) -> Self {
        Self::from_body(Body::User {
            content: Content::Text(content.into()),
        })
    }

    /// A user message made of parts.
    pub fn user_parts(parts: Vec<ContentPart>) -> Self {
        Self::from_body(Body::User {
            content: Content::Parts(parts),
        })
    }

    /// An assistant message with text content.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::from_body(Body::Assistant {
            content: Some(Content::Text(content.into())),
            reasoning_content: None,
            tool_calls: Vec::new(),
        })
    }

    /// An assistant message asking for tool calls.
    pub fn assistant_tool_calls(calls: Vec<ToolCall>) -> Self {
        Self::from_body(Body::Assistant {
            content: None,
            reasoning_content: None,
            tool_calls: calls,
        })
    }

    /// A successful tool result answering call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::from_body(Body::Tool {
            tool_call_id: tool_call_id.into(),
            content: Content::Text(content.into()),
            is_error: false,
        })
    }

    /// A failed tool result answering call `tool_call_id`: `content` says what went wrong,
    /// and the model is told so.
    ///
    /// ```
    /// use chatmem::{Body, Message};
    /// let m = Message::tool_error("call_1", "the order service timed out");
    /// assert!(matches!(m.body, Body::Tool { is_error: true, .. }));
    /// ```
    pub fn tool_error(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::from_body(Body::Tool {
            tool_call_id: tool_call_id.into(),
            content: Content::Text(content.into()),
            is_error: true,
        })
    }

    /// Roughly how many bytes the message takes when stored: the length of every string it
    /// carries (content, parts, tool calls, reasoning, name, metadata as JSON). For limits,
    /// not for billing.
    ///
    /// ```
    /// assert_eq!(chatmem::Message::user("hello").payload_len(), 5);
    /// ```
    pub fn payload_len(&self) -> usize {
        let body = match &self.body {
            Body::System { content } | Body::Developer { content } | Body::User { content } => content.payload_len(),
            Body::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => {
                content.as_ref().map_or(0, Content::payload_len)
                    + reasoning_content.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Body::Tool {
                tool_call_id, content, ..
            } => tool_call_id.len() + content.payload_len(),
        };
        body + self.name.as_ref().map_or(0, String::len) + self.metadata.as_ref().map_or(0, json_len)
    }

    /// Sets `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets `metadata`.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// The message's role.
    pub fn role(&self) -> Role {
        match self.body {
            Body::System { .. } => Role::System,
            Body::Developer { .. } => Role::Developer,
            Body::User { .. } => Role::User,
            Body::Assistant { .. } => Role::Assistant,
            Body::Tool { .. } => Role::Tool,
        }
    }

    /// The text content (see [`Content::text`]); `None` for an assistant message without
    /// content.
    pub fn text(&self) -> Option<std::borrow::Cow<'_, str>> {
        match &self.body {
            Body::System { content }
            | Body::Developer { content }
            | Body::User { content }
            | Body::Tool { content, .. } => Some(content.text()),
            Body::Assistant { content, .. } => content.as_ref().map(Content::text),
        }
    }

    /// The content, text or parts; `None` for an assistant message without content.
    pub fn content(&self) -> Option<&Content> {
        match &self.body {
            Body::System { content }
            | Body::Developer { content }
            | Body::User { content }
            | Body::Tool { content, .. } => Some(content),
            Body::Assistant { content, .. } => content.as_ref(),
        }
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match &self.body {
            Body::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }

    /// The call a tool result answers (`None` for other roles).
    pub fn tool_call_id(&self) -> Option<&str> {
        match &self.body {
            Body::Tool { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        }
    }

    /// Whether this message holds the conversation's system slot: a `system` message, or a
    /// `developer` one (OpenAI's newer name for it). Either follows the system message's
    /// rules: one per conversation, never evicted, first in the window; a new one replaces
    /// the one in effect, keeping its own role.
    pub fn is_system(&self) -> bool {
        matches!(self.body, Body::System { .. } | Body::Developer { .. })
    }
}

mod json;

pub use json::parse_messages;

/// The length of `obj` written as JSON, without building the string.
fn json_len(obj: &Map<String, Value>) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a map of JSON values into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, obj);
    count.0
}
