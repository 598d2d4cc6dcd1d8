//! [`Summarizer`]: what makes summaries, so that what left the window lives on as a short text
//! the model sees after the system message; its prompt, caps and chunks here, what a commit
//! summarizes, the wait and the late summaries in `summarizer/pending.rs`.
//!
//! A conversation keeps, beside its messages, a [`Summary`]: a text and the last sequence
//! it covers (`upto`). Messages with `upto < seq < window start` have left the window but are
//! not summarized yet ("pending"). When a [`ChatMemory`](crate::ChatMemory) with a
//! [`Summarizer`] commits a turn and messages are pending, it asks the summarizer's model for
//! a new summary of (old summary + the pending messages, in bounded chunks) and commits the
//! summary with the turn, in the store's one version-checked commit. Under
//! [`Retention::DropEvicted`](crate::Retention) a message is deleted only once a summary
//! covers it, so every message is always either stored or summarized.
//!
//! If the summary call fails or times out, the turn is committed without it and the pending
//! messages wait for a later turn: summarizing never breaks a turn. A turn waits for its
//! summary at most [`Summarizer::wait`] (2 s by default); a slower summary goes on (on the
//! summarizer's [spawner](Summarizer::spawn_with)) and rides in a later commit.
//!
//! The model sees one system message: the stored system text, then [`SUMMARY_HEADING`](crate::SUMMARY_HEADING) and
//! the summary ([`render_system`](crate::render_system)). It counts toward the window budget like the system
//! message.
//!
//! Cost: one extra model call on a commit that leaves messages pending (with a message
//! window of N and block eviction, one call per eviction, not per turn); its input is the
//! old summary plus the evicted messages, its output at most
//! [`Summarizer::max_tokens`](Summarizer::max_tokens) tokens.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::counter::TokenCounter;
use crate::message::Message;
use crate::model::{ChatModel, ChatRequest, ModelError, ModelErrorKind};
use crate::stored_message::StoredMessage;
use crate::summary::{Summary, shown};

mod pending;

pub use pending::SummaryOutcome;
pub(crate) use pending::pending_summary;
use pending::{DEFAULT_SUMMARY_WAIT, LateSummaries, Observe, Spawn};

/// The instructions the summarizer's model gets by default (see [`Summarizer::prompt`]).
pub const DEFAULT_SUMMARY_PROMPT: &str = "You keep the memory of a conversation between a user and an assistant. \
You get the current summary (possibly empty) and messages that are leaving the assistant's context. \
Write a new summary that merges both: keep every fact the assistant may need later (names, numbers, \
order and ticket ids, dates, amounts, decisions, open questions, the user's preferences), drop \
pleasantries, write in the conversation's language, as short plain sentences. Answer with the \
summary only.";

/// The default cap on a summary's length, in tokens.
pub const DEFAULT_SUMMARY_MAX_TOKENS: u32 = 300;

/// Makes summaries with a chat model: opt in with
/// [`ChatMemoryBuilder::summarizer`](crate::ChatMemoryBuilder::summarizer).
///
/// ```
/// # use chatmem::{ChatModel, ChatRequest, ChatResponse, Message, ModelError};
/// # #[derive(Debug)] struct Cheap;
/// # #[async_trait::async_trait] impl ChatModel for Cheap {
/// #     async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> { unimplemented!() }
/// # }
/// use std::time::Duration;
/// use chatmem::Summarizer;
/// let summarizer = Summarizer::new(Cheap).max_tokens(200).timeout(Duration::from_secs(20));
/// assert_eq!(summarizer.max_tokens_value(), 200);
/// ```
#[derive(Clone)]
pub struct Summarizer {
    model: Arc<dyn ChatModel>,
    prompt: String,
    max_tokens: u32,
    chunk_messages: usize,
    chunk_tokens: u64,
    timeout: Duration,
    wait: Duration,
    spawn: Option<Spawn>,
    observe: Option<Observe>,
    /// Shared by the clones of this summarizer: the late summaries of its memory.
    late: Arc<LateSummaries>,
}

impl fmt::Debug for Summarizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Summarizer")
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("chunk_messages", &self.chunk_messages)
            .field("chunk_tokens", &self.chunk_tokens)
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .field("spawns", &self.spawn.is_some())
            .finish_non_exhaustive()
    }
}

impl Summarizer {
    /// A summarizer calling `model` (often a cheaper one than the conversation's) with
    /// [`DEFAULT_SUMMARY_PROMPT`], at most [`DEFAULT_SUMMARY_MAX_TOKENS`] tokens per summary,
    /// chunks of at most 200 messages or 16,000 tokens, a 60-second timeout and a 2-second
    /// wait.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self::from_arc(Arc::new(model))
    }

    /// [`new`](Summarizer::new) for a model already shared.
    pub fn from_arc(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            prompt: DEFAULT_SUMMARY_PROMPT.to_owned(),
            max_tokens: DEFAULT_SUMMARY_MAX_TOKENS,
            chunk_messages: 200,
            chunk_tokens: 16_000,
            timeout: Duration::from_secs(60),
            wait: DEFAULT_SUMMARY_WAIT,
            spawn: None,
            observe: None,
            late: Arc::default(),
        }
    }

    /// Replaces the instructions the model gets (the system message of the summary call).
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// Caps a summary's length in tokens (asked of the model, and enforced by cutting).
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// The cap set by [`max_tokens`](Summarizer::max_tokens).
    pub fn max_tokens_value(&self) -> u32 {
        self.max_tokens
    }

    /// The most messages and tokens of pending messages one summary call takes; a larger
    /// backlog (an import, a long outage) is summarized over several turns.
    pub fn chunk(mut self, messages: usize, tokens: u64) -> Self {
        self.chunk_messages = messages;
        self.chunk_tokens = tokens;
        self
    }

    /// How long one summary call may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a turn's commit waits for its summary (default 2 s; zero: never waits). Past
    /// it the turn commits without the summary; the call goes on until its
    /// [`timeout`](Summarizer::timeout) and its summary rides in the conversation's next
    /// commit that finds it ready. A slow summary model thus delays a turn by at most this.
    ///
    /// ```
    /// # use chatmem::{ChatModel, ChatRequest, ChatResponse, ModelError};
    /// # #[derive(Debug)] struct Cheap;
    /// # #[async_trait::async_trait] impl ChatModel for Cheap {
    /// #     async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> { unimplemented!() }
    /// # }
    /// use std::time::Duration;
    /// let summarizer = chatmem::Summarizer::new(Cheap).wait(Duration::from_millis(500));
    /// assert_eq!(summarizer.wait_value(), Duration::from_millis(500));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The wait set by [`wait`](Summarizer::wait).
    pub fn wait_value(&self) -> Duration {
        self.wait
    }

    /// Runs a late summary to its end with `spawn` (on tokio: `|f| { tokio::spawn(f); }`).
    /// Without a spawner (the core needs no runtime) a late call makes progress only while a
    /// later turn of its conversation waits for it.
    pub fn spawn_with(
        mut self,
        spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
    ) -> Self {
        self.spawn = Some(Arc::new(spawn));
        self
    }

    /// Calls `observe` with each [`SummaryOutcome`] (made, late, failed): to count them.
    pub fn observe(mut self, observe: impl Fn(SummaryOutcome) + Send + Sync + 'static) -> Self {
        self.observe = Some(Arc::new(observe));
        self
    }

    pub(crate) fn report(&self, outcome: SummaryOutcome) {
        if let Some(observe) = &self.observe {
            observe(outcome);
        }
    }

    /// Hands a late call to the spawner, if there is one.
    pub(crate) fn run_late(&self, call: impl Future<Output = Option<Summary>> + Send + 'static) {
        if let Some(spawn) = &self.spawn {
            spawn(Box::pin(async move {
                call.await;
            }));
        }
    }

    pub(crate) fn late(&self) -> &LateSummaries {
        &self.late
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_tokens == 0 {
            return Err("summary max_tokens must be at least 1".into());
        }
        if self.chunk_messages == 0 || self.chunk_tokens == 0 {
            return Err("summary chunk must allow at least 1 message and 1 token".into());
        }
        if self.timeout.is_zero() {
            return Err("summary timeout must be longer than zero".into());
        }
        Ok(())
    }

    /// The most pending messages one call takes.
    pub(crate) fn chunk_limit(&self) -> usize {
        self.chunk_messages
    }

    /// The oldest pending messages one call takes: in order, up to the chunk bounds (at
    /// least one message), from `pending` (messages with `covered < seq < window_start`).
    pub(crate) fn chunk_of<'a>(&self, pending: &'a [StoredMessage]) -> &'a [StoredMessage] {
        let mut tokens = 0u64;
        let mut n = 0;
        for m in pending.iter().take(self.chunk_messages) {
            tokens += u64::from(m.tokens);
            if n > 0 && tokens > self.chunk_tokens {
                break;
            }
            n += 1;
        }
        &pending[..n]
    }

    /// The messages of the request for a new summary of `old` plus `messages`.
    pub(crate) fn request_messages(&self, old: Option<&Summary>, messages: &[StoredMessage]) -> [Message; 2] {
        let mut input = String::from("Current summary:\n");
        match shown(old) {
            Some(s) => input.push_str(&s.text),
            None => input.push_str("(none)"),
        }
        input.push_str("\n\nMessages leaving the context:\n");
        for m in messages {
            transcript_line(&mut input, &m.message);
        }
        [Message::system(self.prompt.clone()), Message::user(input)]
    }

    /// The request for a new summary, on the messages of
    /// [`request_messages`](Self::request_messages).
    fn request<'a>(&self, messages: &'a [Message; 2]) -> ChatRequest<'a> {
        let mut request = ChatRequest::new(messages);
        request.options.max_tokens = Some(self.max_tokens);
        request
    }

    /// Asks the model for the summary of `old` plus `messages` (bounded by the timeout) and
    /// returns it, covering up to `upto`, cut to `max_tokens` if the model wrote more.
    pub(crate) async fn summarize(
        &self,
        old: Option<&Summary>,
        messages: &[StoredMessage],
        upto: u64,
        counter: &dyn TokenCounter,
    ) -> Result<Summary, ModelError> {
        let messages = self.request_messages(old, messages);
        let call = self.model.complete(self.request(&messages));
        let response = with_timeout(call, self.timeout)
            .await
            .ok_or_else(|| ModelError::new(ModelErrorKind::Timeout, "the summary call timed out"))??;
        let text = response.message.text().unwrap_or_default().trim().to_owned();
        if text.is_empty() {
            return Err(ModelError::new(
                ModelErrorKind::Protocol,
                "the summary call answered no text",
            ));
        }
        Ok(Summary::new(
            cut_to_tokens(text, self.max_tokens, counter),
            upto,
            counter,
        ))
    }
}

/// One line of the transcript the summarizer reads: `role: text`, tool calls by name.
fn transcript_line(out: &mut String, m: &Message) {
    use std::fmt::Write as _;
    let role = m.role().as_str();
    if let Some(text) = m.text().filter(|t| !t.is_empty()) {
        let _ = writeln!(out, "{role}: {text}");
    }
    for call in m.tool_calls() {
        let _ = writeln!(out, "{role} calls {}({})", call.name, call.arguments);
    }
}

/// `text` cut at a character boundary so that it counts at most `max` tokens.
fn cut_to_tokens(text: String, max: u32, counter: &dyn TokenCounter) -> String {
    let max = max as usize;
    if counter.count_text(&text) <= max {
        return text;
    }
    // Binary search over character boundaries: counting is monotone enough in the prefix.
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let (mut lo, mut hi) = (0, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count_text(&text[..bounds[mid]]) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text[..bounds[lo]].to_owned()
}

/// `future`, or `None` once `timeout` has passed (a runtime-independent timer, like the
/// commit backoff's).
pub(crate) async fn with_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut delay = pin!(futures_timer::Delay::new(timeout));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        delay.as_mut().poll(cx).map(|()| None)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Heuristic;
    use crate::model::ChatResponse;

    #[derive(Debug)]
    struct Fixed;

    #[async_trait::async_trait]
    impl ChatModel for Fixed {
        async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
            Err(ModelError::new(ModelErrorKind::Other, "not called"))
        }
    }

    #[test]
    fn cut_keeps_short_text_and_cuts_long_text_within_the_cap() {
        let short = "order LC202610060018".to_owned();
        assert_eq!(cut_to_tokens(short.clone(), 100, &Heuristic), short);
        let long = "退款 refund ".repeat(500);
        let cut = cut_to_tokens(long.clone(), 50, &Heuristic);
        assert!(Heuristic.count_text(&cut) <= 50);
        assert!(long.starts_with(&cut) && cut.len() > 10);
    }

    #[test]
    fn a_chunk_takes_at_least_one_message_and_stops_at_the_bounds() {
        let model = Fixed;
        let s = Summarizer::new(model).chunk(3, 25);
        let msgs: Vec<StoredMessage> = (1..=5)
            .map(|i| StoredMessage::new(i, 10, Message::user(format!("u{i}"))))
            .collect();
        assert_eq!(s.chunk_of(&msgs).len(), 2); // 10 + 10 <= 25 < 30
        let big = [StoredMessage::new(1, 100, Message::user("big"))];
        assert_eq!(s.chunk_of(&big).len(), 1);
        assert!(s.chunk_of(&[]).is_empty());
        let s = Summarizer::new(Fixed).chunk(3, 1000);
        assert_eq!(s.chunk_of(&msgs).len(), 3);
    }

    #[test]
    fn the_request_carries_the_old_summary_and_the_transcript() {
        let s = Summarizer::new(Fixed).max_tokens(123);
        let old = Summary::new("Order LC1.", 2, &Heuristic);
        let msgs = [StoredMessage::new(3, 5, Message::user("has it shipped?"))];
        let messages = s.request_messages(Some(&old), &msgs);
        let req = s.request(&messages);
        assert_eq!(req.options.max_tokens, Some(123));
        let input = req.messages[1].text().unwrap().into_owned();
        assert!(
            input.contains("Order LC1.") && input.contains("user: has it shipped?"),
            "{input}"
        );
    }
}
