//! [`Facts`]: the settings of a memory that sends each user's facts with every turn of that
//! user ([`ChatMemoryBuilder::facts`](crate::ChatMemoryBuilder::facts)).

use crate::error::{Error, Result};

use super::bounds::FactLimits;

/// The most tokens a turn's facts message takes by default.
pub const DEFAULT_FACTS_MAX_TOKENS: usize = 1_000;

/// How many turns without an eviction pass, by default, before the facts model reads the
/// window's recent messages ([`Facts::extract_every`]).
pub const DEFAULT_EXTRACT_EVERY: u32 = 10;

/// Facts in a turn: a turn begun for a user
/// ([`ChatMemory::begin_as`](crate::ChatMemory::begin_as)) sends what is known of that user
/// in one message right after the system message, within a token budget.
///
/// - `max_tokens`: the facts message takes at most this many tokens (default
///   [`DEFAULT_FACTS_MAX_TOKENS`]); under a token window it also fits in what the window's
///   budget leaves after the system message and the summary, and the window leaves room for
///   it, so a prompt never passes the budget. A fixed number, so that the same facts are the
///   same bytes every turn.
/// - `limits`: how many facts (and tokens of them) a user keeps
///   ([`FactLimits::default`] unless set): what a change by hand through the memory
///   ([`ChatMemory::add_fact`](crate::ChatMemory::add_fact) and the others) is bounded by.
///
/// ```
/// use chatmem::facts::{FactLimits, Facts};
/// let facts = Facts::new().max_tokens(500)?.limits(FactLimits::default().with_max_facts(50)?);
/// assert_eq!((facts.token_budget(), facts.fact_limits().max_facts()), (500, 50));
/// assert_eq!(Facts::new().token_budget(), 1_000);
/// assert!(Facts::new().max_tokens(0).unwrap_err().to_string().contains("max_tokens"));
/// assert_eq!(Facts::new().extract_every(3)?.extract_every_value(), 3);
/// assert_eq!(Facts::new().extract_every_value(), 10);
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    max_tokens: usize,
    limits: FactLimits,
    extract_every: u32,
}

impl Default for Facts {
    fn default() -> Self {
        Self::new()
    }
}

impl Facts {
    /// Facts with every setting its default.
    pub fn new() -> Self {
        Self {
            max_tokens: DEFAULT_FACTS_MAX_TOKENS,
            limits: FactLimits::default(),
            extract_every: DEFAULT_EXTRACT_EVERY,
        }
    }

    /// The same settings with a facts message of at most `tokens` tokens.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `max_tokens` when `tokens` is 0 (no fact would ever be
    /// sent: leave facts off instead).
    pub fn max_tokens(self, tokens: usize) -> Result<Self> {
        if tokens == 0 {
            return Err(Error::InvalidConfig(
                "facts max_tokens must be at least 1, got 0".into(),
            ));
        }
        Ok(Self {
            max_tokens: tokens,
            ..self
        })
    }

    /// The same settings with a user's facts bounded by `limits`.
    pub fn limits(self, limits: FactLimits) -> Self {
        Self { limits, ..self }
    }

    /// The same settings with a conversation's recent messages read for facts every `turns`
    /// turns that evict nothing (1: every turn).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `extract_every` when `turns` is 0.
    pub fn extract_every(self, turns: u32) -> Result<Self> {
        if turns == 0 {
            return Err(Error::InvalidConfig(
                "facts extract_every must be at least 1 turn, got 0".into(),
            ));
        }
        Ok(Self {
            extract_every: turns,
            ..self
        })
    }

    /// The turns set by [`extract_every`](Facts::extract_every).
    pub fn extract_every_value(&self) -> u32 {
        self.extract_every
    }

    /// The most tokens the facts message takes.
    pub fn token_budget(&self) -> usize {
        self.max_tokens
    }

    /// The bounds of a user's facts.
    pub fn fact_limits(&self) -> &FactLimits {
        &self.limits
    }
}
