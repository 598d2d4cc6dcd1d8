//! [`PolicyOverride`]: a window policy a request asks for instead of the server's, in the body
//! of `POST …/messages` (`"policy": {...}`) or the query of `GET …/messages`. The values are
//! checked by the core ([`WindowPolicy::try_messages`], [`WindowPolicy::try_tokens`],
//! [`WindowPolicy::evict_to`], [`Tokenizer`]'s parser); this only maps their errors to 400s.

use std::sync::Arc;

use chatmem::{ChatMemory, Store, Tokenizer, WindowPolicy};
use serde::Deserialize;

use crate::error::ApiError;

/// The window a request asks for. Each field absent is the server's: `{"evict_to": 5}`
/// keeps the server's budget and adds block eviction; a new budget drops the server's
/// `evict_to` (its unit may differ). The turn boundary is always the server's.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
#[schema(as = Policy)]
pub(crate) struct PolicyOverride {
    /// At most this many messages in the window, the system message included (at least 1).
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    max_messages: Option<usize>,
    /// At most this many tokens in the window (at least 1); not with `max_messages`.
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    max_tokens: Option<usize>,
    /// The token counter: `cl100k` (default), `o200k` or `heuristic`.
    tokenizer: Option<String>,
    /// Block eviction: once the window outgrows the budget, evict until it fits this many
    /// (in the budget's unit; below the budget).
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    evict_to: Option<usize>,
}

impl PolicyOverride {
    /// The memory to use: `base` itself when nothing is asked for, otherwise `base` with the
    /// policy asked for. `what` names where the fields came from in errors (`policy` for the
    /// body's object, `query` for query parameters).
    pub(crate) fn apply(
        &self,
        base: &Arc<ChatMemory<Arc<dyn Store>>>,
        what: &str,
    ) -> Result<Arc<ChatMemory<Arc<dyn Store>>>, ApiError> {
        let invalid = |e: chatmem::Error| ApiError::invalid(format!("invalid {what}: {e}"));
        let Self {
            max_messages,
            max_tokens,
            tokenizer,
            evict_to,
        } = self;
        if max_messages.is_none() && max_tokens.is_none() && tokenizer.is_none() && evict_to.is_none() {
            return Ok(Arc::clone(base));
        }
        let server = base.policy();
        let budget_given = max_messages.is_some() || max_tokens.is_some();
        let policy = match (max_messages, max_tokens) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(format!(
                    "invalid {what}: give max_messages or max_tokens, not both"
                )));
            }
            (Some(n), None) => WindowPolicy::try_messages(*n).map_err(invalid)?,
            (None, Some(n)) => WindowPolicy::try_tokens(*n).map_err(invalid)?,
            (None, None) => WindowPolicy::new(server.budget()).map_err(invalid)?,
        }
        .with_boundary(server.boundary());
        let policy = match evict_to {
            Some(n) => policy.evict_to(*n).map_err(invalid)?,
            None if budget_given => policy,
            None => *server,
        };
        let counter = match tokenizer {
            Some(t) => t.parse::<Tokenizer>().map_err(invalid)?.counter(),
            None => Arc::clone(base.counter()),
        };
        Ok(Arc::new((**base).clone().with_policy(policy, counter)))
    }
}
