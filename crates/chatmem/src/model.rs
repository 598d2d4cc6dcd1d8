//! The [`ChatModel`] trait: what the memory advisor wraps and model clients implement.
//!
//! It lives in the core so that model clients (`chatmem-openai`) and the advisor never
//! depend on each other, as `tower-service` sits apart from the services.

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Body, Content, Message, ToolCall};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The function name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Sampling options; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingOptions {
    /// Temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Maximum tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Asks for an answer that is one JSON object (OpenAI's `response_format: {"type":
    /// "json_object"}`): what the facts model is asked for. A client whose provider cannot
    /// ask for it leaves it out; the answer is checked either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json_object: bool,
}

/// One model call's input. It borrows its messages: a prompt from memory is the loaded
/// window's messages and the turn's, handed to the model without a copy.
///
/// ```
/// use chatmem::{ChatRequest, Message};
/// let messages = [Message::system("You are after-sale support."), Message::user("hi")];
/// let req = ChatRequest::new(&messages);
/// assert_eq!(req.messages.len(), 2);
/// assert!(req.tools.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest<'a> {
    /// The prompt: system message first, then the conversation.
    pub messages: Vec<&'a Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Sampling options.
    pub options: SamplingOptions,
}

impl<'a> ChatRequest<'a> {
    /// A request with `messages` (a slice of messages, or a [`Turn::prompt`](crate::Turn::prompt))
    /// and no tools.
    pub fn new(messages: impl IntoIterator<Item = &'a Message>) -> Self {
        Self {
            messages: messages.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The text of the last message, empty without one: a summary request's input (the
    /// transcript to summarize), which a stand-in model reads.
    ///
    /// ```
    /// use chatmem::{ChatRequest, Message};
    /// let messages = [Message::system("Summarize."), Message::user("user: order LC1")];
    /// assert_eq!(ChatRequest::new(&messages).last_text(), "user: order LC1");
    /// assert_eq!(ChatRequest::new(&[]).last_text(), "");
    /// ```
    pub fn last_text(&self) -> std::borrow::Cow<'a, str> {
        self.messages.last().and_then(|m| m.text()).unwrap_or_default()
    }
}

/// Token usage reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Completion tokens.
    pub completion_tokens: u32,
    /// Total.
    pub total_tokens: u32,
}

/// One model call's output.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message (text, reasoning, tool calls).
    pub message: Message,
    /// Usage, when the provider reported it.
    pub usage: Option<Usage>,
    /// Why generation stopped (`stop`, `tool_calls`, `length`, ...).
    pub finish_reason: Option<String>,
}

/// A piece of a tool call in a stream; pieces with the same `index` build one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// Which call of the message this piece belongs to.
    pub index: u32,
    /// The call id (usually in the first piece).
    pub id: Option<String>,
    /// The function name (usually in the first piece).
    pub name: Option<String>,
    /// A fragment of the arguments text.
    pub arguments: Option<String>,
}

/// One streamed piece of an assistant message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatDelta {
    /// A fragment of answer text.
    pub content: Option<String>,
    /// A fragment of reasoning text.
    pub reasoning_content: Option<String>,
    /// Fragments of tool calls.
    pub tool_calls: Vec<ToolCallDelta>,
    /// Set on the last piece.
    pub finish_reason: Option<String>,
    /// Usage, usually on the last piece.
    pub usage: Option<Usage>,
}

/// Builds a [`ChatResponse`] from streamed [`ChatDelta`]s.
///
/// ```
/// use chatmem::{ChatDelta, DeltaAccumulator};
/// let mut acc = DeltaAccumulator::default();
/// acc.push(&ChatDelta { content: Some("Hel".into()), ..Default::default() });
/// acc.push(&ChatDelta { content: Some("lo".into()), finish_reason: Some("stop".into()), ..Default::default() });
/// let response = acc.finish()?;
/// assert_eq!(response.message.text().as_deref(), Some("Hello"));
/// # Ok::<(), chatmem::ModelError>(())
/// ```
#[derive(Debug, Default)]
pub struct DeltaAccumulator {
    content: Option<String>,
    reasoning: Option<String>,
    calls: Vec<ToolCallDelta>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl DeltaAccumulator {
    /// Adds one delta.
    pub fn push(&mut self, delta: &ChatDelta) {
        if let Some(c) = &delta.content {
            self.content.get_or_insert_with(String::new).push_str(c);
        }
        if let Some(r) = &delta.reasoning_content {
            self.reasoning.get_or_insert_with(String::new).push_str(r);
        }
        for piece in &delta.tool_calls {
            let slot = match self.calls.iter_mut().find(|c| c.index == piece.index) {
                Some(slot) => slot,
                None => {
                    self.calls.push(ToolCallDelta {
                        index: piece.index,
                        ..Default::default()
                    });
                    let last = self.calls.len() - 1;
                    &mut self.calls[last]
                }
            };
            if piece.id.is_some() {
                slot.id.clone_from(&piece.id);
            }
            if let Some(n) = &piece.name {
                slot.name.get_or_insert_with(String::new).push_str(n);
            }
            if let Some(a) = &piece.arguments {
                slot.arguments.get_or_insert_with(String::new).push_str(a);
            }
        }
        if delta.finish_reason.is_some() {
            self.finish_reason.clone_from(&delta.finish_reason);
        }
        if delta.usage.is_some() {
            self.usage = delta.usage;
        }
    }

    /// The assembled response.
    ///
    /// # Errors
    /// [`ModelErrorKind::Protocol`] when a tool call lacks an id or name, or the stream
    /// produced neither text nor tool calls.
    pub fn finish(mut self) -> Result<ChatResponse, ModelError> {
        self.calls.sort_by_key(|c| c.index);
        let tool_calls = self
            .calls
            .into_iter()
            .map(|c| match (c.id, c.name) {
                (Some(id), Some(name)) if !id.is_empty() && !name.is_empty() => Ok(ToolCall {
                    id,
                    name,
                    arguments: c.arguments.unwrap_or_default(),
                }),
                _ => Err(ModelError::new(
                    ModelErrorKind::Protocol,
                    format!("streamed tool call {} has no id or name", c.index),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let content = match (self.content, tool_calls.is_empty()) {
            (None, true) => Some(String::new()),
            (c, _) => c,
        };
        let message = Message {
            body: Body::Assistant {
                content: content.map(Content::Text),
                reasoning_content: self.reasoning,
                tool_calls,
            },
            name: None,
            metadata: None,
        };
        Ok(ChatResponse {
            message,
            usage: self.usage,
            finish_reason: self.finish_reason,
        })
    }
}

/// A stream of deltas.
pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<ChatDelta, ModelError>> + Send + 'static>>;

/// The class of a [`ModelError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider rejected the credentials (401/403) or none were given.
    Auth,
    /// Too many requests (429).
    RateLimited,
    /// The request was rejected as invalid (400, 404, 422).
    InvalidRequest,
    /// The provider failed (5xx).
    Server,
    /// No answer in time.
    Timeout,
    /// The provider could not be reached.
    Unavailable,
    /// The answer did not follow the protocol.
    Protocol,
    /// Anything else, tool executors' failures included.
    Other,
}

/// An error from a [`ChatModel`].
#[derive(Debug)]
pub struct ModelError {
    kind: ModelErrorKind,
    context: String,
    status: Option<u16>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ModelError {
    /// An error of `kind`; `context` must not hold message text (it may be logged).
    pub fn new(kind: ModelErrorKind, context: impl Into<String>) -> Self {
        Self {
            kind,
            context: context.into(),
            status: None,
            source: None,
        }
    }

    /// The same error with an HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// The same error with a cause.
    pub fn with_source(mut self, source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The class of error.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// The HTTP status, when there was one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether retrying later may help (rate limits, server errors, timeouts, outages).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Timeout
                | ModelErrorKind::Unavailable
        )
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "model call failed ({s}): {}", self.context),
            None => write!(f, "model call failed: {}", self.context),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A chat model: one required method, [`complete`](ChatModel::complete).
///
/// [`stream`](ChatModel::stream) defaults to one delta holding the whole answer; clients
/// that can stream override it. The trait is object safe (`Arc<dyn ChatModel>`).
///
/// ```
/// use async_trait::async_trait;
/// use chatmem::{ChatModel, ChatRequest, ChatResponse, Message, ModelError};
///
/// #[derive(Debug)]
/// struct Echo;
///
/// #[async_trait]
/// impl ChatModel for Echo {
///     async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
///         let last = request.messages.last().and_then(|m| m.text()).unwrap_or_default().into_owned();
///         Ok(ChatResponse { message: Message::assistant(last), usage: None, finish_reason: Some("stop".into()) })
///     }
/// }
/// ```
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug {
    /// Calls the model and waits for the whole answer.
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError>;

    /// Calls the model and streams the answer.
    async fn stream(&self, request: ChatRequest<'_>) -> Result<DeltaStream, ModelError> {
        let response = self.complete(request).await?;
        let (content, reasoning_content, tool_calls) = match response.message.body {
            Body::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => (content, reasoning_content, tool_calls),
            _ => {
                return Err(ModelError::new(
                    ModelErrorKind::Protocol,
                    "model answered with a non-assistant message",
                ));
            }
        };
        let delta = ChatDelta {
            // A stream carries text: parts travel as their text.
            content: content.map(|c| c.text().into_owned()),
            reasoning_content,
            tool_calls: tool_calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCallDelta {
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    id: Some(c.id),
                    name: Some(c.name),
                    arguments: Some(c.arguments),
                })
                .collect(),
            finish_reason: response.finish_reason,
            usage: response.usage,
        };
        Ok(Box::pin(Once(Some(Ok(delta)))))
    }
}

/// A stream of one item (saves a dependency on `futures-util` for the default `stream`).
struct Once(Option<Result<ChatDelta, ModelError>>);

impl Stream for Once {
    type Item = Result<ChatDelta, ModelError>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.take())
    }
}

macro_rules! forward_model {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<M: ChatModel + ?Sized> ChatModel for $ty {
            async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
                (**self).complete(request).await
            }
            async fn stream(&self, request: ChatRequest<'_>) -> Result<DeltaStream, ModelError> {
                (**self).stream(request).await
            }
        }
    )*};
}

forward_model!(std::sync::Arc<M>, Box<M>, &M);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulator_joins_tool_call_pieces_by_index() {
        let mut acc = DeltaAccumulator::default();
        acc.push(&ChatDelta {
            tool_calls: vec![ToolCallDelta {
                index: 1,
                id: Some("b".into()),
                name: Some("g".into()),
                arguments: None,
            }],
            ..Default::default()
        });
        acc.push(&ChatDelta {
            tool_calls: vec![
                ToolCallDelta {
                    index: 0,
                    id: Some("a".into()),
                    name: Some("f".into()),
                    arguments: Some("{\"x\"".into()),
                },
                ToolCallDelta {
                    index: 1,
                    arguments: Some("{}".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        acc.push(&ChatDelta {
            tool_calls: vec![ToolCallDelta {
                index: 0,
                arguments: Some(":1}".into()),
                ..Default::default()
            }],
            finish_reason: Some("tool_calls".into()),
            ..Default::default()
        });
        let r = acc.finish().unwrap();
        assert_eq!(
            r.message.tool_calls(),
            &[ToolCall::new("a", "f", "{\"x\":1}"), ToolCall::new("b", "g", "{}")]
        );
        assert_eq!(r.message.text(), None);
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn accumulator_rejects_nameless_calls() {
        let mut acc = DeltaAccumulator::default();
        acc.push(&ChatDelta {
            tool_calls: vec![ToolCallDelta {
                index: 0,
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(acc.finish().unwrap_err().kind(), ModelErrorKind::Protocol);
    }
}
