//! [`StoredMessage`]: a message as a store keeps it, with its sequence number and its cached
//! token count.

use std::sync::Arc;

use crate::counter::{CounterName, TokenCounter};
use crate::error::{StoreError, StoreErrorKind};
use crate::id::ConversationId;
use crate::message::Message;

/// A message as stored: its sequence number and its token count, computed once when added.
///
/// Every store keeps the message as the JSON of [`message_json`](StoredMessage::message_json)
/// and reads it back with [`from_json`](StoredMessage::from_json): one encoding, one
/// corrupt-data error.
///
/// ```
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::{StoredMessage, StoreErrorKind};
/// let id = ConversationId::new("c1")?;
/// let m = StoredMessage::new(7, 3, Message::user("hi"));
/// let json = m.message_json()?;
/// assert_eq!(StoredMessage::from_json(&id, 7, 3, json.as_bytes())?, m);
/// let bad = StoredMessage::from_json(&id, 8, 1, br#"{"role":"wizard"}"#).unwrap_err();
/// assert_eq!(bad.kind(), StoreErrorKind::Corrupt);
/// assert!(bad.to_string().contains("seq 8"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the conversation's log; strictly increasing, never reused.
    pub seq: u64,
    /// Token count by the counter of the memory that added it.
    pub tokens: u32,
    /// The [name](crate::TokenCounter::name) of the counter that made `tokens`; `None` for
    /// data written before chatmem recorded it (taken as is). A memory whose counter has
    /// another name recounts the message when it loads it.
    pub counted_by: Option<CounterName>,
    /// The message, shared: a snapshot, a window and a plan hold the same message without
    /// copying it (clone it out with `Message::clone(&stored.message)` to own one).
    pub message: Arc<Message>,
}

impl StoredMessage {
    /// A stored message whose counter is not recorded.
    pub fn new(seq: u64, tokens: u32, message: impl Into<Arc<Message>>) -> Self {
        Self {
            seq,
            tokens,
            counted_by: None,
            message: message.into(),
        }
    }

    /// The message, owned: taken out when nothing else shares it, copied otherwise.
    ///
    /// ```
    /// let stored = chatmem::store::StoredMessage::new(1, 2, chatmem::Message::user("hi"));
    /// assert_eq!(stored.into_message(), chatmem::Message::user("hi"));
    /// ```
    pub fn into_message(self) -> Message {
        Arc::unwrap_or_clone(self.message)
    }

    /// The same message, its count made by the counter named `counter`.
    pub fn counted_by(mut self, counter: impl Into<CounterName>) -> Self {
        self.counted_by = Some(counter.into());
        self
    }

    /// Whether the cached [`tokens`](StoredMessage::tokens) hold for the counter named
    /// `counter`: made by it, or by a counter not recorded (data written before chatmem
    /// recorded it, taken as it is). A count by a counter of another name, or
    /// [uncounted](crate::store::UNCOUNTED), does not: the window and the inspector recount it.
    ///
    /// ```
    /// use chatmem::{Heuristic, Message, TokenCounter};
    /// use chatmem::store::{StoredMessage, UNCOUNTED};
    /// let old = StoredMessage::new(1, 7, Message::user("hi"));
    /// assert!(old.count_holds_for("heuristic"));
    /// assert_eq!(old.tokens_by(&Heuristic), 7);
    /// let uncounted = old.clone().counted_by(UNCOUNTED);
    /// assert!(!uncounted.count_holds_for("heuristic"));
    /// assert_eq!(uncounted.tokens_by(&Heuristic), Heuristic.count_message(&Message::user("hi")) as u32);
    /// ```
    pub fn count_holds_for(&self, counter: &str) -> bool {
        // Built-in counters' names are one `&'static str`: the same pointer is the same name,
        // which spares comparing the text for every message of a long window.
        self.counted_by
            .as_deref()
            .is_none_or(|by| std::ptr::eq(by, counter) || by == counter)
    }

    /// The message's token count by `counter`: the cached one when it
    /// [holds](StoredMessage::count_holds_for) for `counter`, else counted now.
    pub fn tokens_by(&self, counter: &dyn TokenCounter) -> u32 {
        if self.count_holds_for(counter.name()) {
            self.tokens
        } else {
            u32::try_from(counter.count_message(&self.message)).unwrap_or(u32::MAX)
        }
    }

    /// The message as the JSON every store keeps (the OpenAI Chat Completions shape plus
    /// chatmem's fields, as [`Message`]'s `Serialize` writes it).
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] if the message cannot be written as JSON.
    pub fn message_json(&self) -> Result<String, StoreError> {
        serde_json::to_string(&*self.message).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("message seq {} cannot be written as JSON", self.seq),
            )
            .with_source(e)
        })
    }

    /// Reads a message of conversation `id` stored at `seq` as `json`.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] naming the conversation and the seq when `json` is not a
    /// valid message.
    pub fn from_json(id: &ConversationId, seq: u64, tokens: u32, json: &[u8]) -> Result<Self, StoreError> {
        let message: Message = serde_json::from_slice(json)
            .map_err(|e| StoreError::corrupt(id, format!("message seq {seq} is not a valid message")).with_source(e))?;
        Ok(Self::new(seq, tokens, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::{Cl100k, Heuristic, UNCOUNTED};

    #[test]
    fn a_cached_count_holds_for_its_counter_and_for_an_unrecorded_one() {
        let message = Message::user("订单 LC202610060018 能退吗？");
        let exact = u32::try_from(Heuristic.count_message(&message)).unwrap();
        let stale = exact + 100;
        let unrecorded = StoredMessage::new(1, stale, message.clone());
        assert!(unrecorded.count_holds_for(Heuristic.name()));
        assert_eq!(unrecorded.tokens_by(&Heuristic), stale, "taken as it is");
        let own = unrecorded.clone().counted_by(Heuristic.name());
        assert!(own.count_holds_for(Heuristic.name()));
        assert_eq!(own.tokens_by(&Heuristic), stale);
        // The same name in another allocation is the same counter.
        assert!(own.count_holds_for(&String::from("heuristic")));
        for other in [Cl100k.name(), UNCOUNTED, "words"] {
            let by_other = unrecorded.clone().counted_by(other);
            assert!(!by_other.count_holds_for(Heuristic.name()), "{other}");
            assert_eq!(by_other.tokens_by(&Heuristic), exact, "{other}: recounted");
        }
    }
}
