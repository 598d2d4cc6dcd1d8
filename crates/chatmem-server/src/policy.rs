//! [`PolicyOverride`]: a window policy a request asks for instead of the server's, in the body
//! of `POST …/messages` (`"policy": {...}`) or the query of `GET …/messages`. It is the core's
//! [`PolicySpec`]: the names, the checks and how it is laid over the server's policy are the
//! core's ([`PolicySpec::over`]); this maps its errors to 400s and documents it in OpenAPI.

use std::sync::Arc;

use chatmem::{Budget, ChatMemory, ClearSpec, PolicySpec, Store};
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

/// Reads a policy's map; `TEXT`: a query's (its counts text, and clearing's fields flat:
/// `clear_tool_results.keep=3`, `clear_tool_results.exclude_tools` repeated for each tool).
struct PolicyVisitor<const TEXT: bool>;

/// [`PolicySpec`]'s fields, by the same names.
const FIELDS: &[&str] = &[
    "max_messages",
    "max_tokens",
    "evict_to",
    "tokenizer",
    "boundary",
    "clear_tool_results",
];

/// The same in a query, where clearing's fields are flat.
const QUERY_FIELDS: &[&str] = &[
    "max_messages",
    "max_tokens",
    "evict_to",
    "tokenizer",
    "boundary",
    "clear_tool_results.keep",
    "clear_tool_results.trigger_tokens",
    "clear_tool_results.clear_at_least_tokens",
    "clear_tool_results.exclude_tools",
    "clear_tool_results.clear_inputs",
];

/// [`ClearSpec`]'s fields, by the same names.
const CLEAR_FIELDS: &[&str] = &[
    "keep",
    "trigger_tokens",
    "clear_at_least_tokens",
    "exclude_tools",
    "clear_inputs",
];

/// What a query names clearing's fields by: `clear_tool_results.` and the field.
const CLEAR_PREFIX: &str = "clear_tool_results.";

/// The fields a map has given, so that one given twice is refused, as serde's derive does
/// (null included: a field given as null is given).
#[derive(Default)]
struct Seen(Vec<&'static str>);

impl Seen {
    /// Sets `slot` to `value` (`None`: the field was null), the first time `name` is given.
    fn set<T, E: serde::de::Error>(
        &mut self,
        slot: &mut Option<T>,
        value: Option<T>,
        name: &'static str,
    ) -> Result<(), E> {
        if self.0.contains(&name) {
            return Err(E::duplicate_field(name));
        }
        self.0.push(name);
        *slot = value;
        Ok(())
    }
}

impl<'de, const TEXT: bool> serde::de::Visitor<'de> for PolicyVisitor<TEXT> {
    type Value = PolicyOverride;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a policy object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PolicyOverride, A::Error> {
        use serde::de::Error as _;
        let (mut spec, mut seen) = (PolicySpec::default(), Seen::default());
        // A query's clearing, gathered from its flat fields.
        let (mut clear, mut clear_seen) = (None, Seen::default());
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "max_messages" => seen.set(&mut spec.max_messages, count::<A, TEXT>(&mut map)?, "max_messages")?,
                "max_tokens" => seen.set(&mut spec.max_tokens, count::<A, TEXT>(&mut map)?, "max_tokens")?,
                "evict_to" => seen.set(&mut spec.evict_to, count::<A, TEXT>(&mut map)?, "evict_to")?,
                "tokenizer" => seen.set(&mut spec.tokenizer, map.next_value()?, "tokenizer")?,
                "boundary" => seen.set(&mut spec.boundary, map.next_value()?, "boundary")?,
                "clear_tool_results" if !TEXT => {
                    let c = map.next_value::<Option<WireClear>>()?.map(|w| w.0);
                    seen.set(&mut spec.clear_tool_results, c, "clear_tool_results")?;
                }
                field if TEXT && field.starts_with(CLEAR_PREFIX) => {
                    let c = clear.get_or_insert_with(ClearSpec::default);
                    clear_field::<A, TEXT>(c, &mut clear_seen, &field[CLEAR_PREFIX.len()..], &mut map)?;
                }
                "clear_tool_results" => {
                    return Err(A::Error::custom(
                        "a query gives `clear_tool_results`'s fields one by one: `clear_tool_results.keep=3`",
                    ));
                }
                other if TEXT => return Err(A::Error::unknown_field(other, QUERY_FIELDS)),
                other => return Err(A::Error::unknown_field(other, FIELDS)),
            }
        }
        if clear.is_some() {
            spec.clear_tool_results = clear;
        }
        Ok(PolicyOverride(spec))
    }
}

/// Reads the value of clearing's field `field` into `spec`. In a query (`TEXT`) each
/// `exclude_tools` value is one tool name, and the field may repeat.
fn clear_field<'de, A: serde::de::MapAccess<'de>, const TEXT: bool>(
    spec: &mut ClearSpec,
    seen: &mut Seen,
    field: &str,
    map: &mut A,
) -> Result<(), A::Error> {
    use serde::de::Error as _;
    match field {
        "keep" => seen.set(&mut spec.keep, count::<A, TEXT>(map)?, "keep"),
        "trigger_tokens" => seen.set(&mut spec.trigger_tokens, count::<A, TEXT>(map)?, "trigger_tokens"),
        "clear_at_least_tokens" => seen.set(
            &mut spec.clear_at_least_tokens,
            count::<A, TEXT>(map)?,
            "clear_at_least_tokens",
        ),
        "exclude_tools" if TEXT => {
            let name: String = map.next_value()?;
            spec.exclude_tools.get_or_insert_with(Vec::new).push(name);
            Ok(())
        }
        "exclude_tools" => seen.set(&mut spec.exclude_tools, map.next_value()?, "exclude_tools"),
        "clear_inputs" => seen.set(&mut spec.clear_inputs, map.next_value()?, "clear_inputs"),
        other if TEXT => Err(A::Error::custom(format_args!(
            "unknown field `{CLEAR_PREFIX}{other}`, expected one of `{CLEAR_PREFIX}{}`",
            CLEAR_FIELDS.join(&format!("`, `{CLEAR_PREFIX}"))
        ))),
        other => Err(A::Error::unknown_field(other, CLEAR_FIELDS)),
    }
}

/// A count's value (null: `None`).
fn count<'de, A: serde::de::MapAccess<'de>, const TEXT: bool>(map: &mut A) -> Result<Option<usize>, A::Error> {
    Ok(map.next_value::<Option<Count<TEXT>>>()?.map(|c| c.0))
}

/// A body's `clear_tool_results`: an object of [`ClearSpec`]'s fields, counts read by [`Count`].
struct WireClear(ClearSpec);

impl<'de> Deserialize<'de> for WireClear {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = WireClear;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of clear_tool_results's fields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<WireClear, A::Error> {
                let (mut spec, mut seen) = (ClearSpec::default(), Seen::default());
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    clear_field::<A, false>(&mut spec, &mut seen, &key, &mut map)?;
                }
                Ok(WireClear(spec))
            }
        }
        d.deserialize_map(Visit)
    }
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
    /// Old tool results cleared from the prompt, never from memory. In a query, its fields
    /// are flat parameters ([`ClearQuerySchema`]).
    #[param(ignore)]
    clear_tool_results: Option<ClearSchema>,
}

/// [`ClearSpec`] as OpenAPI shows it: the same fields, which a test holds to the spec's serde
/// names.
#[derive(utoipa::ToSchema)]
#[schema(as = ClearToolResults)]
#[allow(dead_code)] // read by utoipa's derive only
pub(crate) struct ClearSchema {
    /// The most recent tool uses (a call and its result) kept whole (1 to 1,000; default 3).
    #[schema(minimum = 1, maximum = 1000)]
    keep: Option<usize>,
    /// Clear only once the window, uncleared, would exceed this many tokens (default: a
    /// token window's budget, else 100,000).
    trigger_tokens: Option<usize>,
    /// Clear in blocks that save at least this many tokens each (default 0: one result at a
    /// time).
    clear_at_least_tokens: Option<usize>,
    /// Tools whose results are never cleared.
    exclude_tools: Option<Vec<String>>,
    /// Send the cleared calls' arguments as `{}` too (default false).
    clear_inputs: Option<bool>,
}

/// [`ClearSchema`]'s fields as query parameters of `GET …/messages`: flat, named
/// `clear_tool_results.<field>` (a query has no nesting), a tool name per
/// `clear_tool_results.exclude_tools`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by utoipa's derive only
pub(crate) struct ClearQuerySchema {
    /// Clear old tool results from the window shown, keeping this many of the most recent
    /// tool uses whole (1 to 1,000; default 3 when another `clear_tool_results.` parameter is
    /// given).
    #[param(rename = "clear_tool_results.keep", minimum = 1, maximum = 1000)]
    keep: Option<usize>,
    /// Clear only once the window, uncleared, would exceed this many tokens.
    #[param(rename = "clear_tool_results.trigger_tokens")]
    trigger_tokens: Option<usize>,
    /// Clear in blocks that save at least this many tokens each.
    #[param(rename = "clear_tool_results.clear_at_least_tokens")]
    clear_at_least_tokens: Option<usize>,
    /// A tool whose results are never cleared (repeat for more).
    #[param(rename = "clear_tool_results.exclude_tools")]
    exclude_tools: Option<Vec<String>>,
    /// Also show the cleared calls' arguments as `{}`.
    #[param(rename = "clear_tool_results.clear_inputs")]
    clear_inputs: Option<bool>,
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
