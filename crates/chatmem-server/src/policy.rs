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
/// new budget drops the server's `evict_to`). Read as the spec is, except that a count may be
/// any JSON number with a whole value (`20.0` is 20), as JSON Schema's `integer` says.
#[derive(Debug, Default)]
pub(crate) struct PolicyOverride(PolicySpec);

/// A [`PolicyOverride`] given as query parameters, whose counts are text (`?max_messages=20`).
#[derive(Debug, Default)]
pub(crate) struct PolicyQuery(pub(crate) PolicyOverride);

/// An object only: a struct's derived reader would also take an array of its fields in order
/// (`[null, 5]`).
impl<'de> Deserialize<'de> for PolicyOverride {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PolicyVisitor::<false>)
    }
}

impl<'de> Deserialize<'de> for PolicyQuery {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PolicyVisitor::<true>).map(PolicyQuery)
    }
}

/// Reads a policy's map; `TEXT`: its counts are text (a query's).
struct PolicyVisitor<const TEXT: bool>;

impl<'de, const TEXT: bool> serde::de::Visitor<'de> for PolicyVisitor<TEXT> {
    type Value = PolicyOverride;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a policy object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<PolicyOverride, A::Error> {
        let w = WirePolicy::<TEXT>::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(PolicyOverride(PolicySpec {
            max_messages: w.max_messages.map(|c| c.0),
            max_tokens: w.max_tokens.map(|c| c.0),
            evict_to: w.evict_to.map(|c| c.0),
            tokenizer: w.tokenizer,
            boundary: w.boundary,
            clear_tool_results: None,
        }))
    }
}

/// [`PolicySpec`]'s fields, by the same names, with counts read by [`Count`]. (Every field is
/// optional; serde's derive does not take a const parameter with `#[serde(default)]`.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePolicy<const TEXT: bool> {
    #[serde(default)]
    max_messages: Option<Count<TEXT>>,
    #[serde(default)]
    max_tokens: Option<Count<TEXT>>,
    #[serde(default)]
    evict_to: Option<Count<TEXT>>,
    #[serde(default)]
    tokenizer: Option<chatmem::Tokenizer>,
    #[serde(default)]
    boundary: Option<chatmem::TurnBoundary>,
}

/// A count: a non-negative whole number, in JSON (`20` or `20.0`, as JSON Schema's `integer`
/// says) or, when `TEXT`, as a query's decimal text (`20`).
struct Count<const TEXT: bool>(usize);

impl<'de, const TEXT: bool> Deserialize<'de> for Count<TEXT> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<const TEXT: bool>;
        impl<const TEXT: bool> serde::de::Visitor<'_> for Visit<TEXT> {
            type Value = Count<TEXT>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a non-negative whole number")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Count<TEXT>, E> {
                usize::try_from(v)
                    .map(Count)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Count<TEXT>, E> {
                usize::try_from(v)
                    .map(Count)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Count<TEXT>, E> {
                // Whole and below 2^64 (the first f64 past u64), so the cast is exact.
                if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                    self.visit_u64(v as u64)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Count<TEXT>, E> {
                match v.parse::<usize>() {
                    Ok(n) if TEXT => Ok(Count(n)),
                    _ => Err(E::invalid_type(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Visit::<TEXT>)
    }
}

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
