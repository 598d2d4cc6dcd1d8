//! [`Summary`]: what left the window, as a short text and the last sequence it covers, the
//! JSON every store keeps it as, and the system message the model sees with it
//! ([`render_system`]). Making summaries is the [`Summarizer`](crate::Summarizer)'s.

use serde::{Deserialize, Serialize};

use crate::counter::TokenCounter;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::message::{Body, Content, ContentPart, Message};

/// The line between the system text and the summary in the system message the model sees.
pub const SUMMARY_HEADING: &str = "Summary of the earlier conversation:";

/// A conversation's summary as stored: its text and the last sequence it covers.
///
/// ```
/// use chatmem::{Cl100k, ConversationId, Summary};
/// let s = Summary::new("The order is LC202610060018.", 4, &Cl100k);
/// assert_eq!(s.upto, 4);
/// let id = ConversationId::new("c1")?;
/// assert_eq!(Summary::from_json(&id, s.to_json().as_bytes())?, s);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The summary text.
    pub text: String,
    /// The last sequence the summary covers: every message with `seq <= upto` is in it.
    pub upto: u64,
    /// Tokens the summary adds to the system message (heading included), by `counted_by`.
    pub tokens: u32,
    /// The [name](TokenCounter::name) of the counter that made `tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_by: Option<String>,
}

impl Summary {
    /// A summary covering every message up to `upto`, counted by `counter`.
    pub fn new(text: impl Into<String>, upto: u64, counter: &dyn TokenCounter) -> Self {
        let text = text.into();
        let tokens = Self::count(&text, counter);
        Self {
            text,
            upto,
            tokens,
            counted_by: Some(counter.name().to_owned()),
        }
    }

    /// What the summary adds to the system message: the heading and the text, counted as a
    /// message of their own (a few tokens more than merged, so never under budget).
    fn count(text: &str, counter: &dyn TokenCounter) -> u32 {
        let rendered = Message::system(format!("{SUMMARY_HEADING}\n{text}"));
        u32::try_from(counter.count_message(&rendered)).unwrap_or(u32::MAX)
    }

    /// Recounts `tokens` when they were made by a counter other than `counter`.
    pub(crate) fn recount_for(&mut self, counter: &dyn TokenCounter) {
        if self.counted_by.as_deref() != Some(counter.name()) {
            self.tokens = Self::count(&self.text, counter);
            self.counted_by = Some(counter.name().to_owned());
        }
    }

    /// The JSON every store keeps for the summary (one encoding for all stores).
    pub fn to_json(&self) -> String {
        // A struct of strings and integers always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the summary of conversation `id` stored as `json`.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`](crate::store::StoreErrorKind) naming the conversation when `json`
    /// is not a summary.
    pub fn from_json(id: &ConversationId, json: &[u8]) -> Result<Self, StoreError> {
        serde_json::from_slice(json)
            .map_err(|e| StoreError::corrupt(id, "its summary is not valid JSON of a summary").with_source(e))
    }
}

/// The system message the model sees: the stored system message with the summary after it
/// under [`SUMMARY_HEADING`], or the summary alone when there is no system message.
///
/// ```
/// use chatmem::{Cl100k, Message, Summary, render_system};
/// let s = Summary::new("Order LC202610060018 has not shipped.", 2, &Cl100k);
/// let m = render_system(Some(&Message::system("You are after-sale support.")), Some(&s)).unwrap();
/// assert_eq!(
///     m.text().unwrap(),
///     "You are after-sale support.\n\nSummary of the earlier conversation:\nOrder LC202610060018 has not shipped."
/// );
/// assert_eq!(render_system(None, None), None);
/// ```
pub fn render_system(system: Option<&Message>, summary: Option<&Summary>) -> Option<Message> {
    let Some(summary) = shown(summary) else {
        return system.cloned();
    };
    let Some(system) = system else {
        return Some(Message::system(format!("{SUMMARY_HEADING}\n{}", summary.text)));
    };
    let mut rendered = system.clone();
    if let Body::System { content } | Body::Developer { content } = &mut rendered.body {
        match content {
            Content::Text(text) => *text = format!("{text}\n\n{SUMMARY_HEADING}\n{}", summary.text),
            Content::Parts(parts) => parts.push(ContentPart::Text(format!("{SUMMARY_HEADING}\n{}", summary.text))),
        }
    }
    Some(rendered)
}

/// The summary as the model sees it: an empty one is none (it adds nothing, costs nothing).
pub(crate) fn shown(summary: Option<&Summary>) -> Option<&Summary> {
    summary.filter(|s| !s.text.is_empty())
}
