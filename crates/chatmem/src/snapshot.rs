//! [`Snapshot`]: what a store's load returns, a conversation's state and the messages from
//! its window start on.

use crate::shared_messages::SharedMessages;
use crate::stored_message::StoredMessage;
use crate::summary::Summary;

/// What [`Store::load`](crate::Store::load) returns: a conversation's state and the messages from its window
/// start on. An unknown (or expired) conversation loads as [`Snapshot::empty`], which is
/// also the [`Default`].
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Bumped by every commit; 0 means the conversation does not exist.
    pub version: u64,
    /// The system message, if any (its `seq` is the sequence at which it was set).
    pub system: Option<StoredMessage>,
    /// The first sequence inside the window.
    pub window_start: u64,
    /// The sequence the next appended message gets.
    pub next_seq: u64,
    /// Messages with `seq >= window_start`, oldest first (shared with the store when it
    /// keeps them in memory: loading copies none of them).
    pub messages: SharedMessages,
    /// The summary of what left the window, if the conversation has one.
    pub summary: Option<Summary>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self::empty()
    }
}

impl Snapshot {
    /// The snapshot of a conversation that does not exist: version 0, sequences from 1.
    ///
    /// ```
    /// use chatmem::store::Snapshot;
    /// assert_eq!(Snapshot::default(), Snapshot::empty());
    /// assert_eq!((Snapshot::empty().window_start, Snapshot::empty().next_seq), (1, 1));
    /// ```
    pub fn empty() -> Self {
        Self {
            version: 0,
            system: None,
            window_start: 1,
            next_seq: 1,
            messages: SharedMessages::new(),
            summary: None,
        }
    }

    /// Whether the conversation exists.
    pub fn exists(&self) -> bool {
        self.version > 0
    }
}
