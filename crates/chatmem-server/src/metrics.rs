//! [`Metrics`]: one server's Prometheus registry (prometheus-client), held by the app rather
//! than a global recorder, so several servers in one process count apart.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text (OpenMetrics, which Prometheus scrapes).
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A server's metrics: requests by route template and status, their latency, commits,
/// version conflicts, store errors and upstream errors. Every label value is one of a fixed
/// set (route templates, never raw paths), so a client cannot grow the series.
///
/// [`ServerConfig::default`](crate::ServerConfig) makes a new registry; clones share it (so
/// `chatmem serve --metrics-listen` serves the same numbers on a second listener).
///
/// ```
/// let metrics = chatmem_server::Metrics::new();
/// let text = metrics.render();
/// assert!(text.contains("# TYPE chatmem_commits counter"));
/// assert!(text.ends_with("# EOF\n"));
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
struct SummaryLabels {
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
            }),
        }
    }

    /// The metrics as OpenMetrics text, ending with `# EOF`.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail; an encoder error would be a bug in the labels.
        if encode(&mut text, &self.inner.registry).is_err() {
            tracing::error!("encoding the metrics failed");
        }
        text
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

    /// One response head from the upstream, `took` after the call was sent.
    pub(crate) fn upstream_response(&self, status: u16, took: Duration) {
        let upstream = &self.inner.upstream;
        upstream.latency.observe(took.as_secs_f64());
        upstream.responses.get_or_create(&StatusLabels { status }).inc();
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

/// `GET /metrics` as text.
pub(crate) fn respond(metrics: &Metrics) -> Response {
    let mut response = metrics.render().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
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
            axum::routing::get(|State(m): State<Metrics>| async move { respond(&m) }),
        )
        .with_state(metrics)
}
