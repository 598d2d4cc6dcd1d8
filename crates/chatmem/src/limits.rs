//! [`BatchLimits`]: how much one batch of messages (a commit, a request) may carry, and the
//! one check of a batch against it ([`BatchLimits::check`], [`TooLarge`]). The core checks
//! every commit with it, a server every request, an import splits a history by it.

use crate::message::Message;

/// The most messages one commit carries by default: a store applies a commit in one
/// statement or script, and a huge one would hold locks (or block Redis) for seconds.
pub const DEFAULT_MAX_BATCH_MESSAGES: usize = 10_000;

/// The most bytes of text one commit carries by default (16 MiB).
pub const DEFAULT_MAX_BATCH_BYTES: usize = 16 << 20;

/// Bounds on one batch of messages: how many, how many bytes of text in all, and in one
/// message (text as [`Message::payload_len`] counts it).
///
/// The default is a commit's ([`DEFAULT_MAX_BATCH_MESSAGES`], [`DEFAULT_MAX_BATCH_BYTES`], no
/// bound per message beyond the batch's).
///
/// ```
/// use chatmem::{BatchLimits, Message, TooLarge};
/// let limits = BatchLimits { messages: 2, message_bytes: 5, ..BatchLimits::default() };
/// assert_eq!(limits.check(&[Message::user("hi")]), Ok(()));
/// let three = [Message::user("a"), Message::user("b"), Message::user("c")];
/// assert_eq!(limits.check(&three), Err(TooLarge::Messages { count: 3, max: 2 }));
/// let e = limits.check(&[Message::user("hi"), Message::user("too long")]).unwrap_err();
/// assert_eq!(e.to_string(), "messages[1] holds 8 bytes of text; the limit is 5");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Messages in one batch.
    pub messages: usize,
    /// Bytes of text in one batch, all its messages together.
    pub bytes: usize,
    /// Bytes of text in one message.
    pub message_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self {
            messages: DEFAULT_MAX_BATCH_MESSAGES,
            bytes: DEFAULT_MAX_BATCH_BYTES,
            message_bytes: DEFAULT_MAX_BATCH_BYTES,
        }
    }
}

/// What of a batch is over its [`BatchLimits`]; the message names it, the size and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TooLarge {
    /// More messages than [`BatchLimits::messages`].
    #[error("{count} messages in one batch; the limit is {max}")]
    Messages {
        /// Messages in the batch.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A message holds more text than [`BatchLimits::message_bytes`].
    #[error("messages[{index}] holds {bytes} bytes of text; the limit is {max}")]
    Message {
        /// Its index in the batch.
        index: usize,
        /// Bytes of text it holds.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The batch holds more text than [`BatchLimits::bytes`].
    #[error("{bytes} bytes of text in one batch; the limit is {max}")]
    Bytes {
        /// Bytes of text in the batch.
        bytes: usize,
        /// The limit.
        max: usize,
    },
}

impl BatchLimits {
    /// Checks `batch`: each message, how many, then the text of all.
    ///
    /// # Errors
    /// [`TooLarge`] naming the first limit the batch is over.
    pub fn check<'a>(&self, batch: impl IntoIterator<Item = &'a Message>) -> Result<(), TooLarge> {
        let (mut count, mut bytes) = (0usize, 0usize);
        for (index, message) in batch.into_iter().enumerate() {
            let len = message.payload_len();
            if len > self.message_bytes {
                return Err(TooLarge::Message {
                    index,
                    bytes: len,
                    max: self.message_bytes,
                });
            }
            (count, bytes) = (count + 1, bytes.saturating_add(len));
        }
        if count > self.messages {
            return Err(TooLarge::Messages {
                count,
                max: self.messages,
            });
        }
        if !self.admits(count, bytes) {
            return Err(TooLarge::Bytes { bytes, max: self.bytes });
        }
        Ok(())
    }

    /// Whether a batch of `count` messages holding `bytes` bytes of text in all is within the
    /// limits: what a caller splitting a long history into batches grows each batch by.
    ///
    /// ```
    /// let limits = chatmem::BatchLimits { messages: 2, bytes: 10, ..Default::default() };
    /// assert!(limits.admits(2, 10));
    /// assert!(!limits.admits(3, 10) && !limits.admits(1, 11));
    /// ```
    pub fn admits(&self, count: usize, bytes: usize) -> bool {
        count <= self.messages && bytes <= self.bytes
    }
}
