//! [`Metrics`]: one server's Prometheus registry (prometheus-client), held by the app rather
//! than a global recorder, so several servers in one process count apart; and `GET /metrics`,
//! in the format the scraper's `Accept` header asks for ([`Format::negotiate`]).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use headers_accept::Accept;
use mediatype::ReadParams;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The two text formats `GET /metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Prometheus's text format 0.0.4 (`text/plain; version=0.0.4`): what every scraper reads,
    /// and the answer when the `Accept` header prefers neither.
    Prometheus,
    /// OpenMetrics 1.0.0 (`application/openmetrics-text`), ending with `# EOF`.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: the acceptable range of highest quality (RFC
    /// 9110: then the most specific, then the first) that names one of the two, by type and
    /// subtype and, when it has one, a `version` this server writes (OpenMetrics `1.0.0` or
    /// `0.0.1`, the same text; Prometheus `0.0.4`); other parameters (`charset`, `escaping`)
    /// do not matter, as in Prometheus's own clients. `*/*`, `text/*`, no header or one that
    /// cannot be read: the Prometheus text, as client_golang answers.
    ///
    /// Prometheus sends `application/openmetrics-text;version=1.0.0;q=0.5,…,
    /// text/plain;version=0.0.4;q=0.3,*/*;q=0.2` and gets OpenMetrics; a 0.0.4 scraper
    /// (`text/plain;version=0.0.4`) gets the text.
    pub(crate) fn negotiate(headers: &HeaderMap) -> Self {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| Accept::try_from(v).ok()) else {
            return Format::Prometheus;
        };
        // Ranges come in precedence order (quality, then specificity, then as written); a
        // range of quality 0 refuses what it names.
        let mut refused = Vec::new();
        for range in accept.media_types() {
            let quality_zero = range
                .get_param(mediatype::names::Q)
                .is_some_and(|q| q.as_str().parse::<f32>().is_ok_and(|q| q <= 0.0));
            let named = Self::named_by(range);
            if quality_zero {
                refused.extend(named);
                continue;
            }
            if let Some(format) = named.into_iter().find(|f| !refused.contains(f)) {
                return format;
            }
        }
        Format::Prometheus
    }

    /// The formats one media range names, the Prometheus text first.
    fn named_by(range: &mediatype::MediaTypeBuf) -> Vec<Self> {
        let ty = range.ty().as_str().to_ascii_lowercase();
        let subty = range.subty().as_str().to_ascii_lowercase();
        let version = range.get_param(mediatype::Name::new_unchecked("version"));
        let version = version.as_ref().map(|v| v.as_str());
        match (ty.as_str(), subty.as_str(), version) {
            ("*", "*", _) => vec![Format::Prometheus, Format::OpenMetrics],
            ("text", "*", _) | ("text", "plain", None | Some("0.0.4")) => vec![Format::Prometheus],
            ("application", "*", _) | ("application", "openmetrics-text", None | Some("1.0.0" | "0.0.1")) => {
                vec![Format::OpenMetrics]
            }
            _ => Vec::new(),
        }
    }
}

/// A server's metrics: requests by route template and status, their latency, commits,
/// version conflicts, store errors and upstream errors. Every label value is one of a fixed
/// set (route templates, never raw paths), so a client cannot grow the series.
///
/// [`ServerConfig::default`](crate::ServerConfig) makes a new registry; clones share it (so
/// `chatmem serve --metrics-listen` serves the same numbers on a second listener).
///
/// ```
/// let metrics = chatmem_server::Metrics::new();
/// let openmetrics = metrics.render();
/// assert!(openmetrics.contains("# TYPE chatmem_commits counter"));
/// assert!(openmetrics.ends_with("# EOF\n"));
/// let text = metrics.render_prometheus();
/// assert!(text.contains("# TYPE chatmem_commits_total counter"));
/// assert!(!text.contains("# EOF"));
/// ```
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    commits: Counter,
    conflicts: Counter,
    store_errors: Family<StoreLabels, Counter>,
    upstream_errors: Family<UpstreamLabels, Counter>,
    upstream: UpstreamMetrics,
    summaries: Family<SummaryLabels, Counter>,
    embeddings: Family<EmbeddingLabels, Counter>,
    vectors_stored: Counter,
    writes_refused: Family<RefusedLabels, Counter>,
    cleared: ClearedMetrics,
    recalled: RecallMetrics,
    facts: FactMetrics,
}

/// What the facts model's extractions did: the extractor's own counters
/// ([`chatmem::facts::ExtractionStats`]), brought up to date at each scrape.
struct FactMetrics {
    calls: Counter,
    failures: Counter,
    store_failures: Counter,
    discarded: Family<CodeLabels, Counter>,
    changes: Family<TokenLabels, Counter>,
    running: Gauge,
    /// The extractor the counters follow, and what they last showed of it.
    source: std::sync::Mutex<(Option<chatmem::facts::FactExtractor>, chatmem::facts::ExtractionStats)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: &'static str,
}

/// What recall put in the prompts the door sent upstream.
struct RecallMetrics {
    searches: Counter,
    injected: Counter,
    tokens: Counter,
}

/// What clearing took out of the prompts the door sent upstream.
struct ClearedMetrics {
    results: Counter,
    tokens_saved: Counter,
}

/// The upstream's answers: latency to the response head, statuses, and the tokens it reports.
struct UpstreamMetrics {
    latency: Histogram,
    responses: Family<StatusLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    kind: &'static str,
}

/// The tokens an upstream answer reports in its `usage` (OpenAI's names; DeepSeek's
/// `prompt_cache_hit_tokens` is its cached prompt tokens).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UpstreamTokens {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
    pub(crate) cached_prompt: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    op: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    route: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SummaryLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EmbeddingLabels {
    /// `stored` (messages embedded after their commit) or `query` (a turn's question).
    call: &'static str,
    outcome: &'static str,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A new, empty registry with every chatmem metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("chatmem");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status",
            requests.clone(),
        );
        // 0.5 ms to about 16 s: store round trips at the low end, model calls at the top.
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "http_request_duration_seconds",
            "Time to answer a request, until the response head (a stream's body continues after)",
            latency.clone(),
        );
        let commits = Counter::default();
        registry.register("commits", "Commits the store applied", commits.clone());
        let conflicts = Counter::default();
        registry.register(
            "version_conflicts",
            "Commits that lost a version check to a concurrent writer (each retry counts)",
            conflicts.clone(),
        );
        let store_errors = Family::<StoreLabels, Counter>::default();
        registry.register(
            "store_errors",
            "Failed store operations (conflicts excluded), by operation and kind",
            store_errors.clone(),
        );
        let upstream_errors = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "Failed calls of the upstream model, by kind",
            upstream_errors.clone(),
        );
        let upstream = UpstreamMetrics {
            // 1 ms to about 33 s: a loopback model at the low end, a long answer at the top.
            latency: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            responses: Family::default(),
            tokens: Family::default(),
        };
        registry.register(
            "upstream_request_duration_seconds",
            "Time from sending a chat completion upstream to its response head",
            upstream.latency.clone(),
        );
        registry.register(
            "upstream_responses",
            "Responses of the upstream model, by HTTP status",
            upstream.responses.clone(),
        );
        registry.register(
            "upstream_tokens",
            "Tokens the upstream reported in its answers' usage, by kind: prompt, completion, \
             cached_prompt (prompt tokens served from the provider's cache)",
            upstream.tokens.clone(),
        );
        let summaries = Family::<SummaryLabels, Counter>::default();
        registry.register(
            "summaries",
            "Summaries a turn asked for, by outcome: made, late (the turn committed without it; \
             it lands in a later commit), timeout or error (its messages stay pending)",
            summaries.clone(),
        );
        let embeddings = Family::<EmbeddingLabels, Counter>::default();
        registry.register(
            "embedding_calls",
            "Calls to the embedding model, by call (stored: the messages a commit wrote, embedded \
             after it; query: a turn's question) and outcome (ok; timeout, error or garbage: the \
             stored messages are tried again, the question is recalled by words; store_error)",
            embeddings.clone(),
        );
        let vectors_stored = Counter::default();
        registry.register(
            "embedding_vectors_stored",
            "Vectors written to the store for recall",
            vectors_stored.clone(),
        );
        let writes_refused = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "writes_refused",
            "Requests that write messages (POST messages, chat completions) answered with an \
             error, by route and error code: turns a client may have lost without telling its caller",
            writes_refused.clone(),
        );
        let cleared = ClearedMetrics {
            results: Counter::default(),
            tokens_saved: Counter::default(),
        };
        registry.register(
            "tool_results_cleared",
            "Tool results sent upstream as a placeholder instead of their content (clear_tool_results), \
             counted per prompt: a result cleared from three prompts counts three times",
            cleared.results.clone(),
        );
        registry.register(
            "tool_tokens_saved",
            "Tokens clearing took out of the prompts sent upstream: each prompt's window uncleared, \
             less the window as sent",
            cleared.tokens_saved.clone(),
        );
        let recalled = RecallMetrics {
            searches: Counter::default(),
            injected: Counter::default(),
            tokens: Counter::default(),
        };
        registry.register(
            "recalls",
            "Turns through the door whose recall searched the store (the server recalls and the new \
             user message has words to search for)",
            recalled.searches.clone(),
        );
        registry.register(
            "recall_hits_injected",
            "Messages recalled into the prompts sent upstream, counted per prompt",
            recalled.injected.clone(),
        );
        registry.register(
            "recall_tokens_added",
            "Tokens recall added to the prompts sent upstream: each prompt's recalled message",
            recalled.tokens.clone(),
        );
        let facts = FactMetrics {
            calls: Counter::default(),
            failures: Counter::default(),
            store_failures: Counter::default(),
            discarded: Family::default(),
            changes: Family::default(),
            running: Gauge::default(),
            source: std::sync::Mutex::default(),
        };
        registry.register(
            "fact_extractions",
            "Calls of the facts model reading a user's messages for facts",
            facts.calls.clone(),
        );
        registry.register(
            "fact_extraction_failures",
            "Calls of the facts model that failed or timed out (the facts stay as they were)",
            facts.failures.clone(),
        );
        registry.register(
            "fact_extraction_store_failures",
            "Extractions whose facts could not be loaded or committed",
            facts.store_failures.clone(),
        );
        registry.register(
            "fact_extractions_discarded",
            "Answers of the facts model discarded whole, nothing applied, by why (shape, too_large, \
             too_many_facts, text, key, duplicate_key, no_sources, too_many_sources, source_not_shown)",
            facts.discarded.clone(),
        );
        registry.register(
            "fact_changes",
            "Users' facts changed by extractions, by kind: added, superseded, confirmed, evicted",
            facts.changes.clone(),
        );
        registry.register(
            "fact_extractions_running",
            "Extractions started and not finished yet (0: every one so far has landed or given up)",
            facts.running.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                requests,
                latency,
                commits,
                conflicts,
                store_errors,
                upstream_errors,
                upstream,
                summaries,
                embeddings,
                vectors_stored,
                writes_refused,
                cleared,
                recalled,
                facts,
            }),
        }
    }

    /// The metrics as OpenMetrics text, ending with `# EOF`.
    pub fn render(&self) -> String {
        self.render_as(Format::OpenMetrics)
    }

    /// The metrics as Prometheus's text format 0.0.4 (a counter's `# TYPE` names its
    /// `_total` series; no `# EOF`).
    pub fn render_prometheus(&self) -> String {
        self.render_as(Format::Prometheus)
    }

    /// Counts what `extractor`'s extractions do (its stats, brought up to date at each scrape).
    pub(crate) fn follow_extractions(&self, extractor: chatmem::facts::FactExtractor) {
        let mut source = self
            .inner
            .facts
            .source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        source.0 = Some(extractor);
    }

    /// Brings the extraction counters up to date with the extractor's stats: each counter goes
    /// up by what its stat grew since the last scrape.
    fn catch_up_extractions(&self) {
        let facts = &self.inner.facts;
        let mut source = facts.source.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(extractor) = &source.0 else {
            return;
        };
        let now = extractor.stats();
        let last = &source.1;
        facts.calls.inc_by(now.calls.saturating_sub(last.calls));
        facts.failures.inc_by(now.failures.saturating_sub(last.failures));
        facts
            .store_failures
            .inc_by(now.store_failures.saturating_sub(last.store_failures));
        for (code, n) in &now.discarded {
            let before = last.discarded.get(code).copied().unwrap_or(0);
            facts
                .discarded
                .get_or_create(&CodeLabels { code })
                .inc_by(n.saturating_sub(before));
        }
        for (kind, n, before) in [
            ("added", now.added, last.added),
            ("superseded", now.superseded, last.superseded),
            ("confirmed", now.confirmed, last.confirmed),
            ("evicted", now.evicted, last.evicted),
        ] {
            facts
                .changes
                .get_or_create(&TokenLabels { kind })
                .inc_by(n.saturating_sub(before));
        }
        facts.running.set(i64::try_from(now.running).unwrap_or(i64::MAX));
        source.1 = now;
    }

    fn render_as(&self, format: Format) -> String {
        self.catch_up_extractions();
        let mut out = String::new();
        let encoded = match format {
            Format::Prometheus => prometheus_text::encode(&mut out, &self.inner.registry),
            Format::OpenMetrics => text::encode(&mut out, &self.inner.registry),
        };
        // Writing to a String cannot fail; an encoder error would be a bug in the labels.
        if encoded.is_err() {
            tracing::error!("encoding the metrics failed");
        }
        out
    }

    /// One answered request.
    pub(crate) fn request(&self, route: &'static str, method: &'static str, status: StatusCode, took: Duration) {
        let status = status.as_u16();
        self.inner
            .requests
            .get_or_create(&RequestLabels { route, method, status })
            .inc();
        self.inner
            .latency
            .get_or_create(&RouteLabels { route })
            .observe(took.as_secs_f64());
    }

    /// A request that writes messages answered with an error `code`.
    pub(crate) fn write_refused(&self, route: &'static str, code: &'static str) {
        self.inner
            .writes_refused
            .get_or_create(&RefusedLabels { route, code })
            .inc();
    }

    pub(crate) fn commit(&self) {
        self.inner.commits.inc();
    }

    pub(crate) fn conflict(&self) {
        self.inner.conflicts.inc();
    }

    pub(crate) fn store_error(&self, op: &'static str, kind: &'static str) {
        self.inner.store_errors.get_or_create(&StoreLabels { op, kind }).inc();
    }

    /// Counts what became of a summary (a late or failed one is the summary's error, never
    /// the store's).
    pub(crate) fn summary(&self, outcome: chatmem::SummaryOutcome) {
        use chatmem::{ModelErrorKind, SummaryOutcome as O};
        let outcome = match outcome {
            O::Made => "made",
            O::Late => "late",
            O::Failed(ModelErrorKind::Timeout) => "timeout",
            _ => "error",
        };
        self.inner.summaries.get_or_create(&SummaryLabels { outcome }).inc();
    }

    /// Counts an embedding call's outcome (a failure is the embedding model's, never a turn's).
    pub(crate) fn embedding(&self, event: chatmem::EmbeddingEvent) {
        use chatmem::{EmbeddingEvent as E, ModelErrorKind as K};
        let failure = |kind: K| match kind {
            K::Timeout => "timeout",
            K::Protocol => "garbage",
            _ => "error",
        };
        let (call, outcome) = match event {
            E::Stored { kept } => {
                self.inner.vectors_stored.inc_by(kept as u64);
                ("stored", "ok")
            }
            E::Failed(kind) => ("stored", failure(kind)),
            E::StoreFailed => ("stored", "store_error"),
            E::Query => ("query", "ok"),
            E::QueryMissed(kind) => ("query", failure(kind)),
            _ => ("stored", "error"),
        };
        self.inner
            .embeddings
            .get_or_create(&EmbeddingLabels { call, outcome })
            .inc();
    }

    /// One response head from the upstream, `took` after the call was sent.
    pub(crate) fn upstream_response(&self, status: u16, took: Duration) {
        let upstream = &self.inner.upstream;
        upstream.latency.observe(took.as_secs_f64());
        upstream.responses.get_or_create(&StatusLabels { status }).inc();
    }

    /// What clearing took out of one prompt sent upstream.
    pub(crate) fn cleared(&self, cleared: chatmem::Cleared) {
        let c = &self.inner.cleared;
        c.results.inc_by(cleared.results as u64);
        c.tokens_saved.inc_by(cleared.tokens_saved);
    }

    /// What recall put in one prompt sent upstream.
    pub(crate) fn recalled(&self, recalled: &crate::recall::TurnRecall) {
        let r = &self.inner.recalled;
        if recalled.searched {
            r.searches.inc();
        }
        r.injected.inc_by(recalled.seqs.len() as u64);
        r.tokens.inc_by(recalled.tokens as u64);
    }

    /// The tokens one upstream answer reported.
    pub(crate) fn upstream_tokens(&self, tokens: UpstreamTokens) {
        let counts = [
            ("prompt", tokens.prompt),
            ("completion", tokens.completion),
            ("cached_prompt", tokens.cached_prompt),
        ];
        for (kind, n) in counts {
            self.inner
                .upstream
                .tokens
                .get_or_create(&TokenLabels { kind })
                .inc_by(n);
        }
    }

    pub(crate) fn upstream_error(&self, kind: chatmem::ModelErrorKind) {
        use chatmem::ModelErrorKind as K;
        let kind = match kind {
            K::Auth => "auth",
            K::RateLimited => "rate_limited",
            K::InvalidRequest => "invalid_request",
            K::Server => "server",
            K::Timeout => "timeout",
            K::Unavailable => "unavailable",
            K::Protocol => "protocol",
            _ => "other",
        };
        self.inner.upstream_errors.get_or_create(&UpstreamLabels { kind }).inc();
    }
}

/// The label of a store error's kind.
pub(crate) fn store_kind(kind: chatmem::store::StoreErrorKind) -> &'static str {
    use chatmem::store::StoreErrorKind as K;
    match kind {
        K::Conflict => "conflict",
        K::Unavailable => "unavailable",
        K::Corrupt => "corrupt",
        K::SchemaTooNew => "schema_too_new",
        K::InvalidInput => "invalid_input",
        _ => "other",
    }
}

/// `GET /metrics` as text, in the format the request's `Accept` header asks for; `Vary:
/// Accept`, since the answer depends on it.
pub(crate) fn respond(metrics: &Metrics, headers: &HeaderMap) -> Response {
    let format = Format::negotiate(headers);
    let mut response = metrics.render_as(format).into_response();
    let answer = response.headers_mut();
    answer.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    answer.insert(header::VARY, HeaderValue::from_static("accept"));
    response
}

/// A router serving only `GET /metrics`, with no token: for a second listener that a
/// Prometheus scraper reaches (`chatmem serve --metrics-listen`), while the main listener
/// keeps `/metrics` behind the bearer token.
///
/// ```
/// let metrics = chatmem_server::Metrics::new();
/// let scrape: axum::Router = chatmem_server::metrics_app(metrics.clone());
/// # let _ = scrape;
/// ```
pub fn metrics_app(metrics: Metrics) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(m): State<Metrics>, headers: HeaderMap| async move { respond(&m, &headers) }),
        )
        .with_state(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(accept: Option<&str>) -> Format {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).expect("a header value"));
        }
        Format::negotiate(&headers)
    }

    #[test]
    fn the_accept_header_chooses_the_format() {
        use Format::{OpenMetrics as Om, Prometheus as Text};
        for (accept, format) in [
            (None, Text),
            (Some("*/*"), Text),
            (Some("text/plain"), Text),
            (Some("text/plain; version=0.0.4"), Text),
            (Some("application/openmetrics-text"), Om),
            (Some("application/openmetrics-text; version=1.0.0; charset=utf-8"), Om),
            // Prometheus 2.x, then 3.x (its `escaping` parameter changes nothing here).
            (
                Some(
                    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                ),
                Om,
            ),
            (
                Some(
                    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                ),
                Om,
            ),
            // A 0.0.4 scraper that would take OpenMetrics too, but less.
            (
                Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"),
                Text,
            ),
            // Versions this server does not write are not what the range asks for.
            (
                Some("application/openmetrics-text;version=2.0.0,text/plain;q=0.1"),
                Text,
            ),
            (Some("text/plain;version=1.0.0,application/openmetrics-text;q=0.1"), Om),
            // Refused by quality 0.
            (Some("text/plain;q=0, */*"), Om),
            (Some("application/openmetrics-text;q=0, */*"), Text),
            (Some("application/json"), Text),
            (Some("not a media type"), Text),
        ] {
            assert_eq!(asked(accept), format, "{accept:?}");
        }
    }
}
