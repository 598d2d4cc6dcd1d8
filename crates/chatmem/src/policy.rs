//! Window policies: how much of a conversation the model sees ([`WindowPolicy`]: a budget in
//! messages or tokens, a turn boundary, block eviction). Valid by construction; the rules
//! that apply a policy are in [`window`](crate::window).

use crate::error::{Error, Result};

/// The default message budget.
pub const DEFAULT_MAX_MESSAGES: usize = 20;

/// How much of a conversation the window may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most this many messages, system message included.
    Messages(usize),
    /// At most this many tokens, system message and list overhead included.
    Tokens(usize),
}

/// Where the window may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnBoundary {
    /// On a user message (default): the model never sees an answer without its question.
    #[default]
    User,
    /// On any message that is not a tool result.
    PairSafe,
}

/// A window policy: a budget and a turn boundary.
///
/// ```
/// use chatmem::window::{Budget, TurnBoundary, WindowPolicy};
/// let p = WindowPolicy::tokens(4000).with_boundary(TurnBoundary::PairSafe);
/// assert_eq!(p.budget(), Budget::Tokens(4000));
/// assert!(WindowPolicy::try_messages(0).is_err()); // a runtime value: an error, not a panic
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPolicy {
    budget: Budget,
    boundary: TurnBoundary,
    /// The low-water mark of block eviction, in the budget's unit.
    evict_to: Option<usize>,
}

impl Default for WindowPolicy {
    fn default() -> Self {
        Self {
            budget: Budget::Messages(DEFAULT_MAX_MESSAGES),
            boundary: TurnBoundary::User,
            evict_to: None,
        }
    }
}

impl WindowPolicy {
    /// A window of at most `max_messages` messages, system message included, for a value
    /// written in the code: `const P: WindowPolicy = WindowPolicy::messages(6);`.
    ///
    /// # Panics
    /// When `max_messages` is 0 (at compile time in a `const`). For a value from input or
    /// configuration use [`try_messages`](WindowPolicy::try_messages), which returns an error.
    pub const fn messages(max_messages: usize) -> Self {
        assert!(max_messages > 0, "a window policy needs max_messages of at least 1");
        Self {
            budget: Budget::Messages(max_messages),
            boundary: TurnBoundary::User,
            evict_to: None,
        }
    }

    /// A window of at most `max_tokens` tokens, system message and list overhead included,
    /// for a value written in the code.
    ///
    /// # Panics
    /// When `max_tokens` is 0. For a value from input use
    /// [`try_tokens`](WindowPolicy::try_tokens).
    pub const fn tokens(max_tokens: usize) -> Self {
        assert!(max_tokens > 0, "a window policy needs max_tokens of at least 1");
        Self {
            budget: Budget::Tokens(max_tokens),
            boundary: TurnBoundary::User,
            evict_to: None,
        }
    }

    /// A window of at most `max_messages` messages (at least 1).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `max_messages` is 0.
    pub fn try_messages(max_messages: usize) -> Result<Self> {
        Self::new(Budget::Messages(max_messages))
    }

    /// A window of at most `max_tokens` tokens (at least 1).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn try_tokens(max_tokens: usize) -> Result<Self> {
        Self::new(Budget::Tokens(max_tokens))
    }

    /// A window with `budget` and the default boundary.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the budget is 0.
    pub fn new(budget: Budget) -> Result<Self> {
        match budget {
            Budget::Messages(0) => Err(Error::InvalidConfig("max_messages must be at least 1".into())),
            Budget::Tokens(0) => Err(Error::InvalidConfig("max_tokens must be at least 1".into())),
            _ => Ok(Self {
                budget,
                boundary: TurnBoundary::User,
                evict_to: None,
            }),
        }
    }

    /// The same policy with another turn boundary.
    pub const fn with_boundary(mut self, boundary: TurnBoundary) -> Self {
        self.boundary = boundary;
        self
    }

    /// The same policy with block eviction: once the conversation outgrows the budget, the
    /// window start moves forward until the window fits within `low_water` (in the budget's
    /// unit: messages or tokens), not just the budget; until the next overflow it does not
    /// move. Each prompt then begins with the previous prompt, message for message, so a
    /// provider's prompt-prefix cache serves it, and evictions come in blocks.
    ///
    /// ```
    /// use chatmem::WindowPolicy;
    /// let p = WindowPolicy::messages(10).evict_to(5)?;
    /// assert_eq!(p.low_water(), Some(5));
    /// assert!(WindowPolicy::messages(10).evict_to(10).is_err()); // must be below the budget
    /// # Ok::<(), chatmem::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `low_water` is 0 or not below the budget.
    pub fn evict_to(mut self, low_water: usize) -> Result<Self> {
        let (max, unit) = match self.budget {
            Budget::Messages(n) => (n, "max_messages"),
            Budget::Tokens(n) => (n, "max_tokens"),
        };
        if low_water == 0 || low_water >= max {
            return Err(Error::InvalidConfig(format!(
                "evict_to must be at least 1 and below {unit} ({max}); it is {low_water}"
            )));
        }
        self.evict_to = Some(low_water);
        Ok(self)
    }

    /// The low-water mark of block eviction, if any.
    pub fn low_water(&self) -> Option<usize> {
        self.evict_to
    }

    /// The budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The turn boundary.
    pub fn boundary(&self) -> TurnBoundary {
        self.boundary
    }

    /// Whether the window needs token counts (a token budget); a message-count window does
    /// not, so memory never tokenizes for it.
    ///
    /// ```
    /// use chatmem::WindowPolicy;
    /// assert!(WindowPolicy::tokens(4000).counts_tokens());
    /// assert!(!WindowPolicy::messages(20).counts_tokens());
    /// ```
    pub fn counts_tokens(&self) -> bool {
        matches!(self.budget, Budget::Tokens(_))
    }
}
