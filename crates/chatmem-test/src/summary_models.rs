//! Summarizer models for tests: [`Scribe`] writes a summary that provably holds every
//! message it was given, [`Failing`] always fails. Both speak [`chatmem::ChatModel`] only; an
//! HTTP test uses a loopback server instead.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chatmem::{ChatModel, ChatRequest, ChatResponse, Message, ModelError, ModelErrorKind};

/// A summarizer that "summarizes" by keeping every line: the old summary's lines, then one
/// line per message it was given (`user: u1`), so a test can check which messages a
/// summary covers. Counts its calls.
///
/// ```
/// # use chatmem::ChatModel;
/// let scribe = chatmem_test::Scribe::default();
/// assert_eq!(scribe.calls(), 0);
/// ```
#[derive(Debug, Default)]
pub struct Scribe {
    calls: AtomicUsize,
}

impl Scribe {
    /// How many summaries it was asked for.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ChatModel for Scribe {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let input = request.last_text().into_owned();
        let summary = scribe_summary(&input)
            .ok_or_else(|| ModelError::new(ModelErrorKind::InvalidRequest, "not a summary request"))?;
        Ok(ChatResponse {
            message: Message::assistant(summary),
            usage: None,
            finish_reason: Some("stop".into()),
        })
    }
}

/// What [`Scribe`] answers to the input of a summary request (the user message
/// [`chatmem::Summarizer`] sends): the old summary's lines, then one line per message; `None`
/// when `input` is not a summary request. For loopback model servers in tests.
///
/// ```
/// let input = "Current summary:\n(none)\n\nMessages leaving the context:\nuser: hi\n";
/// assert_eq!(chatmem_test::scribe_summary(input).as_deref(), Some("user: hi"));
/// ```
pub fn scribe_summary(input: &str) -> Option<String> {
    let (old, new) = input.split_once("\n\nMessages leaving the context:\n")?;
    let old = old.trim_start_matches("Current summary:\n");
    let old = if old == "(none)" { "" } else { old };
    let lines: Vec<&str> = old.lines().chain(new.lines()).filter(|l| !l.is_empty()).collect();
    Some(lines.join("\n"))
}

/// A summarizer model that always fails (a provider outage).
#[derive(Debug, Default)]
pub struct Failing;

#[async_trait]
impl ChatModel for Failing {
    async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        Err(ModelError::new(ModelErrorKind::Server, "the summary model is down").with_status(503))
    }
}
