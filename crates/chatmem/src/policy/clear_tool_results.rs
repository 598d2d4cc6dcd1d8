//! [`ClearToolResults`]: old tool results cleared from the prompt (never from memory), and
//! [`ClearSpec`], the same as configuration gives it. The rule that applies it is in
//! [`window`](crate::window) (`window/clear.rs`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::policy::Budget;

/// What clearing keeps whole by default: the three most recent tool uses.
pub const DEFAULT_CLEAR_KEEP: usize = 3;
/// The most recent tool uses kept whole can be at most this many.
pub const MAX_CLEAR_KEEP: usize = 1000;
/// The trigger under a message-count window when none is given, in tokens (under a token
/// window the trigger defaults to the budget: results are cleared rather than turns evicted).
pub const DEFAULT_CLEAR_TRIGGER_TOKENS: usize = 100_000;
/// At most this many tool names are never cleared.
pub const MAX_EXCLUDED_TOOLS: usize = 128;
/// A tool name that is never cleared has at most this many bytes.
pub const MAX_TOOL_NAME_BYTES: usize = 256;

/// Old tool results cleared from what the model is sent, never from what memory stores.
///
/// A cleared result keeps its role, `tool_call_id` and place, so every call still has its
/// result; its content becomes a short fixed [placeholder](crate::window::cleared_placeholder)
/// naming the tool, the call and the result's size in tokens. Under a token window a cleared
/// result costs its placeholder, so the window holds more turns in the same budget.
///
/// - `keep`: the most recent tool uses (a call and its result) are never cleared (default 3,
///   1 to 1,000).
/// - `trigger_tokens`: nothing is cleared while the window, uncleared, fits this many tokens
///   (default: a token window's budget; 100,000 under a message-count window).
/// - `clear_at_least_tokens`: results are cleared in blocks that save at least this many
///   tokens each, oldest first, so the prompt's beginning changes only when a block is
///   cleared (a provider's prompt cache keeps hitting in between); 0 (default): one result at
///   a time.
/// - `exclude_tools`: tools whose results are never cleared.
/// - `clear_inputs`: the cleared calls' arguments are sent as `{}` too.
///
/// ```
/// use chatmem::{ClearToolResults, WindowPolicy};
/// let clear = ClearToolResults::new(3)?.trigger_tokens(20_000).clear_at_least_tokens(5_000).exclude_tool("get_policy");
/// let policy = WindowPolicy::tokens(20_000).with_clearing(clear)?;
/// assert_eq!(policy.clearing().map(|c| c.keep()), Some(3));
/// assert!(ClearToolResults::new(0).is_err());
/// // A trigger below the block could never clear a block.
/// let e = WindowPolicy::tokens(20_000).with_clearing(ClearToolResults::new(3)?.trigger_tokens(100).clear_at_least_tokens(500));
/// assert!(e.unwrap_err().to_string().contains("trigger_tokens"));
/// # Ok::<(), chatmem::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearToolResults {
    keep: usize,
    trigger_tokens: Option<usize>,
    clear_at_least_tokens: usize,
    /// Sorted, without repeats: two specs naming the same tools are equal.
    exclude_tools: Arc<[String]>,
    clear_inputs: bool,
}

impl Default for ClearToolResults {
    fn default() -> Self {
        Self {
            keep: DEFAULT_CLEAR_KEEP,
            trigger_tokens: None,
            clear_at_least_tokens: 0,
            exclude_tools: Arc::from([]),
            clear_inputs: false,
        }
    }
}

impl ClearToolResults {
    /// Clearing that keeps the `keep` most recent tool uses whole, every other setting its
    /// default.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `keep` is 0 or above [`MAX_CLEAR_KEEP`].
    pub fn new(keep: usize) -> Result<Self> {
        if keep == 0 || keep > MAX_CLEAR_KEEP {
            return Err(Error::InvalidConfig(format!(
                "clear_tool_results.keep must be 1 to {MAX_CLEAR_KEEP}; it is {keep}"
            )));
        }
        Ok(Self {
            keep,
            ..Self::default()
        })
    }

    /// The same, clearing only once the uncleared window would exceed `tokens`. Checked
    /// against the budget and the block when laid on a policy
    /// ([`WindowPolicy::with_clearing`](crate::WindowPolicy::with_clearing)).
    #[must_use]
    pub fn trigger_tokens(mut self, tokens: usize) -> Self {
        self.trigger_tokens = Some(tokens);
        self
    }

    /// The same, clearing in blocks that save at least `tokens` each.
    #[must_use]
    pub fn clear_at_least_tokens(mut self, tokens: usize) -> Self {
        self.clear_at_least_tokens = tokens;
        self
    }

    /// The same, never clearing the results of the tool named `name` (checked when laid on a
    /// policy: not empty, at most [`MAX_TOOL_NAME_BYTES`]).
    #[must_use]
    pub fn exclude_tool(mut self, name: impl Into<String>) -> Self {
        let mut names: Vec<String> = self.exclude_tools.to_vec();
        names.push(name.into());
        self.exclude_tools = sorted(names);
        self
    }

    /// The same, sending the cleared calls' arguments as `{}` too.
    #[must_use]
    pub fn clear_inputs(mut self, clear: bool) -> Self {
        self.clear_inputs = clear;
        self
    }

    /// How many of the most recent tool uses are kept whole.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// The trigger as given (`None`: the default, see [`trigger_for`](Self::trigger_for)).
    pub fn trigger(&self) -> Option<usize> {
        self.trigger_tokens
    }

    /// The trigger in effect under `budget`: as given, else a token budget's maximum, else
    /// [`DEFAULT_CLEAR_TRIGGER_TOKENS`].
    pub fn trigger_for(&self, budget: Budget) -> usize {
        match (self.trigger_tokens, budget) {
            (Some(t), _) => t,
            (None, Budget::Tokens(max)) => max,
            (None, Budget::Messages(_)) => DEFAULT_CLEAR_TRIGGER_TOKENS,
        }
    }

    /// The least a block of cleared results saves, in tokens (0: one result at a time).
    pub fn block_tokens(&self) -> usize {
        self.clear_at_least_tokens
    }

    /// The tools whose results are never cleared, sorted.
    pub fn excluded_tools(&self) -> &[String] {
        &self.exclude_tools
    }

    /// Whether the results of the tool named `name` are never cleared.
    pub fn excludes(&self, name: &str) -> bool {
        self.exclude_tools.binary_search_by(|t| t.as_str().cmp(name)).is_ok()
    }

    /// Whether the cleared calls' arguments are sent as `{}`.
    pub fn clears_inputs(&self) -> bool {
        self.clear_inputs
    }

    /// The same with the default trigger: what a new budget leaves of a configured clearing.
    pub(crate) fn without_trigger(mut self) -> Self {
        self.trigger_tokens = None;
        self
    }

    /// The checks that need the budget: the trigger not below the block, not above a token
    /// budget (the window would evict before it cleared), the tool names' sizes.
    pub(crate) fn check(&self, budget: Budget) -> Result<()> {
        let invalid = |m: String| Err(Error::InvalidConfig(m));
        let trigger = self.trigger_for(budget);
        if trigger < self.clear_at_least_tokens {
            return invalid(format!(
                "clear_tool_results.trigger_tokens ({trigger}) must not be below clear_at_least_tokens ({}): no block could be cleared",
                self.clear_at_least_tokens
            ));
        }
        if let (Some(t), Budget::Tokens(max)) = (self.trigger_tokens, budget)
            && t > max
        {
            return invalid(format!(
                "clear_tool_results.trigger_tokens ({t}) must not be above max_tokens ({max}): the window would evict before it cleared"
            ));
        }
        if self.exclude_tools.len() > MAX_EXCLUDED_TOOLS {
            return invalid(format!(
                "clear_tool_results.exclude_tools names at most {MAX_EXCLUDED_TOOLS} tools; it names {}",
                self.exclude_tools.len()
            ));
        }
        for name in self.exclude_tools.iter() {
            if name.is_empty() || name.len() > MAX_TOOL_NAME_BYTES {
                return invalid(format!(
                    "clear_tool_results.exclude_tools: a tool name must be 1 to {MAX_TOOL_NAME_BYTES} bytes; one is {}",
                    name.len()
                ));
            }
        }
        Ok(())
    }
}

fn sorted(mut names: Vec<String>) -> Arc<[String]> {
    names.sort_unstable();
    names.dedup();
    Arc::from(names)
}

/// [`ClearToolResults`] as configuration gives it (a server request's
/// `"policy": {"clear_tool_results": {...}}`, the command line's `--clear-*` flags): every field
/// optional, laid over a configured clearing or the defaults. Unknown fields are refused.
///
/// ```
/// let spec: chatmem::ClearSpec = serde_json::from_str(r#"{"keep": 2, "exclude_tools": ["get_policy"]}"#)?;
/// let clear = spec.over(None)?;
/// assert_eq!((clear.keep(), clear.excludes("get_policy")), (2, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClearSpec {
    /// The most recent tool uses kept whole (1 to 1,000; default 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep: Option<usize>,
    /// Clear only once the uncleared window would exceed this many tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_tokens: Option<usize>,
    /// Clear in blocks that save at least this many tokens each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clear_at_least_tokens: Option<usize>,
    /// Tools whose results are never cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Vec<String>>,
    /// Send the cleared calls' arguments as `{}` too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clear_inputs: Option<bool>,
}

impl ClearSpec {
    /// The clearing the spec describes over `base` (a configured one) or the defaults: each
    /// field absent is the base's; `exclude_tools` given replaces the base's list.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: `keep` 0 or above 1,000.
    pub fn over(&self, base: Option<&ClearToolResults>) -> Result<ClearToolResults> {
        let base = base.cloned().unwrap_or_default();
        let mut clear = ClearToolResults::new(self.keep.unwrap_or(base.keep))?;
        clear.trigger_tokens = self.trigger_tokens.or(base.trigger_tokens);
        clear.clear_at_least_tokens = self.clear_at_least_tokens.unwrap_or(base.clear_at_least_tokens);
        clear.exclude_tools = match &self.exclude_tools {
            Some(names) => sorted(names.clone()),
            None => base.exclude_tools,
        };
        clear.clear_inputs = self.clear_inputs.unwrap_or(base.clear_inputs);
        Ok(clear)
    }
}
