//! Window policies: how much of a conversation the model sees ([`WindowPolicy`]: a budget in
//! messages or tokens, a turn boundary, block eviction). Valid by construction; the rules
//! that apply a policy are in [`window`](crate::window). [`PolicySpec`] is a policy as
//! configuration gives it (the command line's flags, a server request's `"policy"`), checked
//! into a [`WindowPolicy`] in one place.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::counter::{TokenCounter, Tokenizer};
use crate::error::{Error, Result};

mod clear_tool_results;

pub use clear_tool_results::{
    ClearSpec, ClearToolResults, DEFAULT_CLEAR_KEEP, DEFAULT_CLEAR_TRIGGER_TOKENS, MAX_CLEAR_KEEP, MAX_EXCLUDED_TOOLS,
    MAX_TOOL_NAME_BYTES,
};

/// Serde for a type configuration names by a string: [`Display`](fmt::Display) writes it and
/// [`FromStr`] reads it, so serde, the command line and a server's query accept the same names.
macro_rules! serde_by_name {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
                name.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use serde_by_name;

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

/// Where the window may start. Named `user` and `pair-safe` (parsed, displayed and in serde).
///
/// ```
/// use chatmem::TurnBoundary;
/// assert_eq!("pair-safe".parse::<TurnBoundary>()?, TurnBoundary::PairSafe);
/// assert_eq!(TurnBoundary::User.to_string(), "user");
/// assert!("pair_safe".parse::<TurnBoundary>().unwrap_err().to_string().contains("user or pair-safe"));
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnBoundary {
    /// On a user message (default): the model never sees an answer without its question.
    /// The assistant messages that open a conversation (a greeting before the first question)
    /// may start the window too.
    #[default]
    User,
    /// On any message that is not a tool result.
    PairSafe,
}

impl TurnBoundary {
    /// Every boundary, in the order error messages list them.
    const ALL: [TurnBoundary; 2] = [TurnBoundary::User, TurnBoundary::PairSafe];

    /// The name: `user` or `pair-safe`.
    pub const fn name(self) -> &'static str {
        match self {
            TurnBoundary::User => "user",
            TurnBoundary::PairSafe => "pair-safe",
        }
    }
}

impl fmt::Display for TurnBoundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TurnBoundary {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|b| s == b.name())
            .ok_or_else(|| unknown_name("turn boundary", s, &Self::ALL.map(|b| b.name().to_owned())))
    }
}

serde_by_name!(TurnBoundary);

/// The error for a name that is none of `expected`: it quotes the name and lists the others.
pub(crate) fn unknown_name(what: &str, name: &str, expected: &[String]) -> Error {
    let list = match expected {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    };
    Error::InvalidConfig(format!("unknown {what} {name:?}; expected {list}"))
}

/// A window policy: a budget, a turn boundary, block eviction, and what is
/// [cleared](ClearToolResults) from the prompt.
///
/// ```
/// use chatmem::{Budget, TurnBoundary, WindowPolicy};
/// let p = WindowPolicy::tokens(4000).with_boundary(TurnBoundary::PairSafe);
/// assert_eq!(p.budget(), Budget::Tokens(4000));
/// assert!(WindowPolicy::try_messages(0).is_err()); // a runtime value: an error, not a panic
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowPolicy {
    budget: Budget,
    boundary: TurnBoundary,
    /// The low-water mark of block eviction, in the budget's unit.
    evict_to: Option<usize>,
    /// Old tool results cleared from the prompt.
    clear: Option<ClearToolResults>,
}

impl Default for WindowPolicy {
    fn default() -> Self {
        Self {
            budget: Budget::Messages(DEFAULT_MAX_MESSAGES),
            boundary: TurnBoundary::User,
            evict_to: None,
            clear: None,
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
            clear: None,
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
            clear: None,
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
                clear: None,
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

    /// The same policy clearing old tool results from the prompt ([`ClearToolResults`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: a trigger below the block or above a token
    /// budget, a tool name empty or too long, too many tool names.
    pub fn with_clearing(mut self, clear: ClearToolResults) -> Result<Self> {
        clear.check(self.budget)?;
        self.clear = Some(clear);
        Ok(self)
    }

    /// What is cleared from the prompt, if anything.
    pub fn clearing(&self) -> Option<&ClearToolResults> {
        self.clear.as_ref()
    }

    /// The window block eviction moves to: the budget lowered to the low-water mark, without
    /// block eviction, the rest the same (a trigger above it only clears less, which does not
    /// move the start). `None` without block eviction.
    pub(crate) fn at_low_water(&self) -> Option<Self> {
        let low = self.evict_to?;
        let budget = match self.budget {
            Budget::Messages(_) => Budget::Messages(low),
            Budget::Tokens(_) => Budget::Tokens(low),
        };
        Some(Self {
            budget,
            evict_to: None,
            ..self.clone()
        })
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

    /// Whether the window needs token counts (a token budget, or clearing, whose trigger and
    /// placeholders are in tokens); a plain message-count window does not, so memory never
    /// tokenizes for it.
    ///
    /// ```
    /// use chatmem::{ClearToolResults, WindowPolicy};
    /// assert!(WindowPolicy::tokens(4000).counts_tokens());
    /// assert!(!WindowPolicy::messages(20).counts_tokens());
    /// assert!(WindowPolicy::messages(20).with_clearing(ClearToolResults::default())?.counts_tokens());
    /// # Ok::<(), chatmem::Error>(())
    /// ```
    pub fn counts_tokens(&self) -> bool {
        matches!(self.budget, Budget::Tokens(_)) || self.clear.is_some()
    }
}

/// A window policy as configuration gives it: every field optional, checked into a
/// [`WindowPolicy`] and a token counter by [`build`](PolicySpec::build) (over the defaults) or
/// [`over`](PolicySpec::over) (over a configured policy). The command line's policy flags and a
/// server request's `"policy"` object (or query) are this, with the same names: `max_messages`
/// or `max_tokens`, `evict_to`, `tokenizer` ([`Tokenizer`]'s names), `boundary`
/// ([`TurnBoundary`]'s names), `clear_tool_results` ([`ClearSpec`]). Unknown fields are refused.
///
/// ```
/// use chatmem::{PolicySpec, TurnBoundary, WindowPolicy};
/// let spec: PolicySpec = serde_json::from_str(
///     r#"{"max_tokens": 2000, "evict_to": 1000, "tokenizer": "o200k_base", "boundary": "pair-safe"}"#,
/// )?;
/// let (policy, counter) = spec.build()?;
/// assert_eq!(policy, WindowPolicy::tokens(2000).with_boundary(TurnBoundary::PairSafe).evict_to(1000)?);
/// assert_eq!(counter.name(), "o200k_base");
/// // Both budgets, or evict_to not below the budget: an error naming the field.
/// let both = PolicySpec { max_messages: Some(6), ..spec };
/// assert!(both.build().unwrap_err().to_string().contains("not both"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySpec {
    /// At most this many messages, the system message included (at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_messages: Option<usize>,
    /// At most this many tokens, the system message and list overhead included (at least 1);
    /// not with `max_messages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
    /// Block eviction's low-water mark, in the budget's unit, below the budget
    /// ([`WindowPolicy::evict_to`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evict_to: Option<usize>,
    /// The token counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Tokenizer>,
    /// Where the window may start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundary: Option<TurnBoundary>,
    /// Old tool results cleared from the prompt ([`ClearToolResults`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clear_tool_results: Option<ClearSpec>,
}

impl PolicySpec {
    /// Whether the spec gives nothing (so [`over`](PolicySpec::over) keeps the base as it is).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The policy and counter the spec describes, each field absent the default's: 20
    /// messages, [`TurnBoundary::User`], no block eviction, [`Tokenizer::Cl100k`].
    ///
    /// ```
    /// let (policy, counter) = chatmem::PolicySpec { evict_to: Some(5), ..Default::default() }.build()?;
    /// assert_eq!(policy, chatmem::WindowPolicy::messages(20).evict_to(5)?);
    /// assert_eq!(counter.name(), "cl100k_base");
    /// # Ok::<(), chatmem::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`over`](PolicySpec::over).
    pub fn build(&self) -> Result<(WindowPolicy, Arc<dyn TokenCounter>)> {
        self.over(&WindowPolicy::default(), &Tokenizer::default().counter())
    }

    /// The spec laid over a configured policy and counter (a server's, for one request):
    /// each field absent is the base's; a new budget drops the base's `evict_to` (its unit
    /// may differ) and its clearing's `trigger_tokens` (which defaults to the budget), while
    /// `evict_to` alone keeps the base's budget. `clear_tool_results` is laid over the base's
    /// clearing field by field ([`ClearSpec::over`]).
    ///
    /// ```
    /// use chatmem::{PolicySpec, Tokenizer, WindowPolicy};
    /// let base = WindowPolicy::tokens(4000).evict_to(2000)?;
    /// let counter = Tokenizer::O200k.counter();
    /// let spec = |json| serde_json::from_str::<PolicySpec>(json);
    /// let (policy, _) = spec(r#"{"evict_to": 1000}"#)?.over(&base, &counter)?;
    /// assert_eq!(policy, WindowPolicy::tokens(4000).evict_to(1000)?);
    /// let (policy, same) = spec(r#"{"max_messages": 6}"#)?.over(&base, &counter)?;
    /// assert_eq!((policy, same.name()), (WindowPolicy::messages(6), "o200k_base"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: both `max_messages` and `max_tokens`, a
    /// budget of 0, an `evict_to` of 0 or not below the budget, clearing refused by
    /// [`ClearSpec::over`] or [`WindowPolicy::with_clearing`].
    pub fn over(
        &self,
        base: &WindowPolicy,
        counter: &Arc<dyn TokenCounter>,
    ) -> Result<(WindowPolicy, Arc<dyn TokenCounter>)> {
        let budget = match (self.max_messages, self.max_tokens) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidConfig("give max_messages or max_tokens, not both".into()));
            }
            (Some(n), None) => Some(Budget::Messages(n)),
            (None, Some(n)) => Some(Budget::Tokens(n)),
            (None, None) => None,
        };
        let policy =
            WindowPolicy::new(budget.unwrap_or(base.budget))?.with_boundary(self.boundary.unwrap_or(base.boundary));
        let evict_to = match budget {
            Some(_) => self.evict_to,
            None => self.evict_to.or(base.evict_to),
        };
        let policy = match evict_to {
            Some(n) => policy.evict_to(n)?,
            None => policy,
        };
        let base_clear = match (&base.clear, budget) {
            (Some(clear), Some(_)) => Some(clear.clone().without_trigger()),
            (clear, None) => clear.clone(),
            (None, _) => None,
        };
        let clear = match &self.clear_tool_results {
            Some(spec) => Some(spec.over(base_clear.as_ref())?),
            None => base_clear,
        };
        let policy = match clear {
            Some(clear) => policy.with_clearing(clear)?,
            None => policy,
        };
        let counter = self.tokenizer.map_or_else(|| Arc::clone(counter), Tokenizer::counter);
        Ok((policy, counter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_written_in_every_form() {
        for t in Tokenizer::ALL {
            assert_eq!(t.to_string().parse::<Tokenizer>().unwrap(), t);
            assert_eq!(t.counter().name().parse::<Tokenizer>().unwrap(), t);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<Tokenizer>(&json).unwrap(), t);
        }
        for b in TurnBoundary::ALL {
            assert_eq!(b.to_string().parse::<TurnBoundary>().unwrap(), b);
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(serde_json::from_str::<TurnBoundary>(&json).unwrap(), b);
        }
        let e = "gpt2".parse::<Tokenizer>().unwrap_err().to_string();
        assert!(
            e.ends_with("\"gpt2\"; expected cl100k (or cl100k_base), o200k (or o200k_base) or heuristic"),
            "{e}"
        );
        let e = serde_json::from_str::<PolicySpec>(r#"{"boundary": "all"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown turn boundary \"all\"; expected user or pair-safe"),
            "{e}"
        );
    }

    #[test]
    fn a_spec_is_refused_naming_its_field() {
        for (json, names) in [
            (r#"{"max_messages": 0}"#, "max_messages"),
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"max_messages": 5, "max_tokens": 100}"#, "not both"),
            (r#"{"max_messages": 5, "evict_to": 5}"#, "evict_to"),
            (r#"{"evict_to": 0}"#, "evict_to"),
            (r#"{"evict_to": 20}"#, "evict_to"),
            (r#"{"clear_tool_results": {"keep": 0}}"#, "clear_tool_results.keep"),
            (r#"{"clear_tool_results": {"keep": 1001}}"#, "clear_tool_results.keep"),
            (
                r#"{"max_tokens": 1000, "clear_tool_results": {"trigger_tokens": 100, "clear_at_least_tokens": 200}}"#,
                "clear_tool_results.trigger_tokens",
            ),
            (
                r#"{"max_tokens": 1000, "clear_tool_results": {"trigger_tokens": 2000}}"#,
                "clear_tool_results.trigger_tokens",
            ),
            (
                r#"{"max_tokens": 100, "clear_tool_results": {"clear_at_least_tokens": 200}}"#,
                "clear_tool_results.trigger_tokens",
            ),
            (
                r#"{"clear_tool_results": {"exclude_tools": [""]}}"#,
                "clear_tool_results.exclude_tools",
            ),
        ] {
            let spec: PolicySpec = serde_json::from_str(json).unwrap();
            let e = spec.build().unwrap_err();
            assert!(
                matches!(&e, Error::InvalidConfig(m) if m.contains(names)),
                "{json}: {e}"
            );
        }
        let e = serde_json::from_str::<PolicySpec>(r#"{"max_message": 3}"#).unwrap_err();
        assert!(e.to_string().contains("max_message"), "{e}");
        for json in [
            r#"{"clear_tool_results": {"kep": 3}}"#,
            r#"{"clear_tool_results": {"keep": -1}}"#,
            r#"{"clear_tool_results": {"keep": 1.5}}"#,
            r#"{"clear_tool_results": {"exclude_tools": [3]}}"#,
            r#"{"clear_tool_results": {"clear_inputs": "yes"}}"#,
        ] {
            assert!(serde_json::from_str::<PolicySpec>(json).is_err(), "{json}");
        }
    }

    #[test]
    fn over_a_base_each_absent_field_is_the_bases() {
        let base = WindowPolicy::tokens(4000)
            .with_boundary(TurnBoundary::PairSafe)
            .evict_to(2000)
            .unwrap();
        let counter = Tokenizer::O200k.counter();
        let over = |spec: PolicySpec| spec.over(&base, &counter).unwrap();
        let (same, kept) = over(PolicySpec::default());
        assert_eq!((same, kept.name()), (base.clone(), "o200k_base"));
        let user = PolicySpec {
            boundary: Some(TurnBoundary::User),
            ..PolicySpec::default()
        };
        assert_eq!(over(user).0, base.clone().with_boundary(TurnBoundary::User));
        let six = PolicySpec {
            max_messages: Some(6),
            tokenizer: Some(Tokenizer::Heuristic),
            ..PolicySpec::default()
        };
        let (policy, counter) = over(six);
        assert_eq!(policy, WindowPolicy::messages(6).with_boundary(TurnBoundary::PairSafe));
        assert_eq!(counter.name(), "heuristic");
    }

    #[test]
    fn clearing_is_laid_over_the_bases_field_by_field() {
        let clear = ClearToolResults::new(2)
            .unwrap()
            .trigger_tokens(3000)
            .clear_at_least_tokens(500)
            .exclude_tool("b")
            .exclude_tool("a")
            .exclude_tool("a");
        assert_eq!(clear.excluded_tools(), ["a", "b"]);
        let base = WindowPolicy::tokens(4000).with_clearing(clear.clone()).unwrap();
        let counter = Tokenizer::Cl100k.counter();
        let over = |json: &str| {
            serde_json::from_str::<PolicySpec>(json)
                .unwrap()
                .over(&base, &counter)
                .map(|(p, _)| p)
        };
        assert_eq!(over("{}").unwrap(), base);
        let inputs = over(r#"{"clear_tool_results": {"clear_inputs": true}}"#).unwrap();
        assert_eq!(inputs.clearing(), Some(&clear.clone().clear_inputs(true)));
        // A new budget keeps the clearing, its trigger back to the default (the new budget).
        let smaller = over(r#"{"max_tokens": 1000}"#).unwrap();
        let kept = smaller.clearing().unwrap();
        assert_eq!(
            (kept.trigger(), kept.trigger_for(smaller.budget()), kept.keep()),
            (None, 1000, 2)
        );
        let listed = over(r#"{"clear_tool_results": {"exclude_tools": ["c"]}}"#).unwrap();
        assert_eq!(listed.clearing().unwrap().excluded_tools(), ["c"]);
        // Under a message window the default trigger is 100,000 tokens.
        let messages = over(r#"{"max_messages": 20, "clear_tool_results": {}}"#).unwrap();
        assert_eq!(
            messages.clearing().unwrap().trigger_for(messages.budget()),
            DEFAULT_CLEAR_TRIGGER_TOKENS
        );
        assert!(messages.counts_tokens());
    }
}
