//! The request and response of one turn.

use std::borrow::Cow;

use chatmem::{ChatDelta, Message, SamplingOptions, ToolDefinition, Usage, UserId};

/// One turn: the messages new in this turn, and how to call the model.
///
/// `messages` are what the caller adds now, usually one user message, optionally preceded by
/// a system message (which replaces the stored one if its text differs). Earlier messages
/// come from memory; do not repeat them (any that equal the end of memory are dropped).
///
/// ```
/// use chatmem_advisor::TurnRequest;
/// let req = TurnRequest::user("那单能退吗？").with_system("你是邻里仓售后。");
/// assert_eq!(req.messages.len(), 2);
/// assert!(req.messages[0].is_system());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnRequest {
    /// This turn's new messages, optionally starting with a system message.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Sampling options.
    pub options: SamplingOptions,
    /// The user the turn is for: the turn is begun with
    /// [`ChatMemory::begin_as`](chatmem::ChatMemory::begin_as), so that with
    /// [facts](chatmem::ChatMemoryBuilder::facts) configured the user's facts are sent (and
    /// read from the turn afterwards). `None`: a turn of no one in particular.
    pub user: Option<UserId>,
}

impl TurnRequest {
    /// A turn with these new messages.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// A turn of one user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(vec![Message::user(text)])
    }

    /// Puts a system message first (replacing one already first).
    pub fn with_system(mut self, text: impl Into<String>) -> Self {
        if self.messages.first().is_some_and(Message::is_system) {
            self.messages.remove(0);
        }
        self.messages.insert(0, Message::system(text));
        self
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the sampling options.
    pub fn with_options(mut self, options: SamplingOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the user the turn is for (see [`TurnRequest::user`](TurnRequest#structfield.user)).
    pub fn with_user(mut self, user: UserId) -> Self {
        self.user = Some(user);
        self
    }
}

/// A completed, committed turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResponse {
    /// The model's final answer.
    pub message: Message,
    /// Every message of the turn, in order, as committed: the new messages (those not
    /// already in memory), then each tool-call assistant message and its results, then the
    /// answer. The system message is not included.
    pub messages: Vec<Message>,
    /// Token usage summed over the turn's model calls, when reported.
    pub usage: Option<Usage>,
    /// Why the last model call stopped.
    pub finish_reason: Option<String>,
    /// How many model calls the turn took (1 without tools).
    pub rounds: usize,
}

impl TurnResponse {
    /// The answer text (empty when the answer has none).
    pub fn text(&self) -> Cow<'_, str> {
        self.message.text().unwrap_or_default()
    }
}

/// What a [`TurnStream`](crate::TurnStream) yields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TurnEvent {
    /// A piece of the model's answer, as it arrives (every round, tool calls included).
    Delta(ChatDelta),
    /// A tool result, once the executor ran a call the model asked for.
    ToolResult(Message),
    /// The turn is committed: always the last item of a successful stream.
    Done(TurnResponse),
}

pub(crate) fn add_usage(total: Option<Usage>, more: Option<Usage>) -> Option<Usage> {
    match (total, more) {
        (Some(a), Some(b)) => Some(Usage {
            prompt_tokens: a.prompt_tokens.saturating_add(b.prompt_tokens),
            completion_tokens: a.completion_tokens.saturating_add(b.completion_tokens),
            total_tokens: a.total_tokens.saturating_add(b.total_tokens),
        }),
        (a, b) => a.or(b),
    }
}
