//! [`PolicyOverride`]: a window policy a request asks for instead of the server's, in the body
//! of `POST …/messages` (`"policy": {...}`) or the query of `GET …/messages`. It is the core's
//! [`PolicySpec`]: the names, the checks and how it is laid over the server's policy are the
//! core's ([`PolicySpec::over`]); this maps its errors to 400s and documents it in OpenAPI.

use std::sync::Arc;

use chatmem::{Budget, ChatMemory, PolicySpec, Store};
use serde::Deserialize;

use crate::config::Limits;
use crate::error::ApiError;

/// The window a request asks for: a [`PolicySpec`] (each field absent is the server's; a
/// new budget drops the server's `evict_to`).
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub(crate) struct PolicyOverride(PolicySpec);

impl PolicyOverride {
    /// The memory to use: `base` itself when nothing is asked for, otherwise `base` with the
    /// policy asked for, within the server's [`PolicyCaps`](crate::PolicyCaps). `what` names where the fields
    /// came from in errors (`policy` for the body's object, `query` for query parameters).
    pub(crate) fn apply(
        &self,
        base: &Arc<ChatMemory<Arc<dyn Store>>>,
        limits: &Limits,
        what: &str,
    ) -> Result<Arc<ChatMemory<Arc<dyn Store>>>, ApiError> {
        if self.0.is_empty() {
            return Ok(Arc::clone(base));
        }
        let caps = limits.policy;
        if !caps.allowed {
            return Err(ApiError::invalid(format!(
                "invalid {what}: this server does not take a window policy from requests"
            )));
        }
        let (policy, counter) = self
            .0
            .over(base.policy(), base.counter())
            .map_err(|e| ApiError::invalid(format!("invalid {what}: {e}")))?;
        let (field, asked, cap) = match policy.budget() {
            Budget::Messages(n) => ("max_messages", n, caps.max_messages),
            Budget::Tokens(n) => ("max_tokens", n, caps.max_tokens),
        };
        if asked > cap {
            return Err(ApiError::invalid(format!(
                "invalid {what}: {field} {asked} is over this server's cap of {cap}"
            )));
        }
        Ok(Arc::new((**base).clone().with_policy(policy, counter)))
    }
}

/// [`PolicySpec`] as OpenAPI shows it (the core does not depend on utoipa): the same fields,
/// which a test holds to the spec's serde names.
#[derive(utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[schema(as = Policy)]
#[allow(dead_code)] // read by utoipa's derives only
pub(crate) struct PolicySchema {
    /// At most this many messages in the window, the system message included (at least 1).
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    max_messages: Option<usize>,
    /// At most this many tokens in the window (at least 1); not with `max_messages`.
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    max_tokens: Option<usize>,
    /// Block eviction: once the window outgrows the budget, evict until it fits this many
    /// (in the budget's unit; below the budget).
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    evict_to: Option<usize>,
    /// The token counter: `cl100k` (default; or `cl100k_base`), `o200k` (or `o200k_base`) or
    /// `heuristic`.
    tokenizer: Option<TokenizerSchema>,
    /// Where the window may start: `user` (default) or `pair-safe`.
    boundary: Option<BoundarySchema>,
}

/// A token counter's name, as a policy takes it.
#[derive(utoipa::ToSchema)]
#[schema(as = Tokenizer)]
#[allow(dead_code, non_camel_case_types)] // a schema only: the real type is chatmem::Tokenizer
enum TokenizerSchema {
    cl100k,
    cl100k_base,
    o200k,
    o200k_base,
    heuristic,
}

/// Where a window may start, as a policy takes it.
#[derive(utoipa::ToSchema)]
#[schema(as = Boundary)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // a schema only: the real type is chatmem::TurnBoundary
enum BoundarySchema {
    User,
    PairSafe,
}
