//! [`ServerConfig`] and [`Limits`]: what a server is allowed to accept.

use std::time::Duration;

use chatmem::BatchLimits;

use crate::auth::{Auth, DEFAULT_MAX_ID_BYTES};
use crate::metrics::Metrics;

/// Bounds on what one request may carry; over them a request is answered 413, 414, 431 or 400,
/// never processed.
///
/// ```
/// let limits = chatmem_server::Limits::default();
/// assert_eq!(limits.max_body_bytes, 1 << 20);
/// assert_eq!((limits.batch.messages, limits.batch.message_bytes), (1_000, 256 << 10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a request body (default 1 MiB); a `Content-Length` over it is refused before
    /// the body is read.
    pub max_body_bytes: usize,
    /// Bytes of a request's header fields, counted as on the wire (`name: value` and CRLF;
    /// default 16 KiB); over it the request is answered 431 `header_too_large`.
    pub max_header_bytes: usize,
    /// Bytes of a request's URI, path and query (default 8 KiB); over it the request is
    /// answered 414 `uri_too_long`.
    pub max_uri_bytes: usize,
    /// The messages of one `POST …/messages` or chat completion, checked by
    /// [`BatchLimits::check`] (default 1,000 messages, 256 KiB of text per message, and the
    /// core's bound on a commit's text, [`chatmem::DEFAULT_MAX_BATCH_BYTES`]).
    pub batch: BatchLimits,
    /// Bytes of a conversation id as the client gives it (default
    /// [`DEFAULT_MAX_ID_BYTES`](crate::DEFAULT_MAX_ID_BYTES), which says why it is below
    /// [`chatmem::MAX_ID_BYTES`]).
    pub max_id_bytes: usize,
    /// How long one store operation may take before the request fails with 503 (default 10 s).
    pub store_timeout: Duration,
    /// How long one call of the upstream model may take (default 120 s).
    pub upstream_timeout: Duration,
    /// What a request's own window policy may ask for (see [`PolicyCaps`]).
    pub policy: PolicyCaps,
}

/// Bounds on the window policy a request may ask for instead of the server's, so that a
/// client cannot lift eviction (and grow what its tenant stores) past what the operator
/// allows. The server's own policy is not bound by them.
///
/// ```
/// let caps = chatmem_server::PolicyCaps::default();
/// assert_eq!((caps.max_messages, caps.max_tokens, caps.allowed), (1_000, 200_000, true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyCaps {
    /// Whether requests may give a policy at all (default true); when not, one that does is
    /// refused with 400.
    pub allowed: bool,
    /// The largest `max_messages` a request may ask for (default 1,000).
    pub max_messages: usize,
    /// The largest `max_tokens` a request may ask for (default 200,000).
    pub max_tokens: usize,
}

impl Default for PolicyCaps {
    fn default() -> Self {
        Self {
            allowed: true,
            max_messages: 1_000,
            max_tokens: 200_000,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_header_bytes: 16 << 10,
            max_uri_bytes: 8 << 10,
            batch: BatchLimits {
                messages: 1_000,
                message_bytes: 256 << 10,
                ..BatchLimits::default()
            },
            max_id_bytes: DEFAULT_MAX_ID_BYTES,
            store_timeout: Duration::from_secs(10),
            upstream_timeout: Duration::from_secs(120),
            policy: PolicyCaps::default(),
        }
    }
}

/// The OpenAI-compatible model `POST /v1/chat/completions` forwards to.
#[derive(Clone, Default)]
pub struct Upstream {
    /// Its base URL (`https://api.deepseek.com/v1`, `http://127.0.0.1:11434/v1`, ...).
    pub base_url: String,
    /// Its API key, if it needs one (`chatmem serve` reads `CHATMEM_UPSTREAM_API_KEY`).
    pub api_key: Option<String>,
}

impl Upstream {
    /// Checks that the upstream's settings can work (a base URL with an http or https
    /// scheme and no query, a key that can be sent as a header), for a caller that wants to
    /// stop at start rather than answer every chat completion 503.
    ///
    /// ```
    /// use chatmem_server::Upstream;
    /// let bad = Upstream { base_url: "localhost:18102".into(), api_key: None };
    /// assert!(bad.check().unwrap_err().to_string().contains("not http or https"));
    /// let good = Upstream { base_url: "http://localhost:18102/v1".into(), api_key: None };
    /// assert!(good.check().is_ok());
    /// ```
    ///
    /// # Errors
    /// [`chatmem_openai::ConfigError`] saying what is wrong (never the key).
    pub fn check(&self) -> Result<(), chatmem_openai::ConfigError> {
        chatmem_openai::passthrough::Endpoint::new(&self.base_url, self.api_key.as_deref(), Duration::from_secs(1))
            .map(drop)
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("base_url", &chatmem::store::redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// How the server runs: its limits, the bearer tokens it accepts, and its upstream model.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// Request limits.
    pub limits: Limits,
    /// Bearer tokens and their tenants; `None` accepts every request as one tenant (then the
    /// server must listen on loopback only, which `chatmem serve` enforces).
    pub auth: Option<Auth>,
    /// The model chat completions and `GET /v1/models` go to; `None` answers them 503.
    pub upstream: Option<Upstream>,
    /// Where the server counts requests, commits and errors (`GET /metrics`); the default is
    /// a new registry, so each server counts its own.
    pub metrics: Metrics,
    /// `Host` names a server without auth answers to besides the loopback ones (`localhost`,
    /// `127.0.0.1`, `[::1]`): a name alone allows any port, `name:port` that port only.
    /// Other hosts are refused with 403 `forbidden_host`, so a page that rebinds its own DNS
    /// name to the loopback address reads nothing. Unused with [`auth`](Self::auth).
    ///
    /// ```
    /// let config = chatmem_server::ServerConfig {
    ///     allowed_hosts: vec!["chatmem.internal".into()],
    ///     ..Default::default()
    /// };
    /// # let _ = config;
    /// ```
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example`, `http://localhost:3000`) whose pages may call the
    /// server: they get CORS answers. A request with any other cross-site `Origin` is refused
    /// with 403 `forbidden_origin` (empty, the default: no page may).
    pub allowed_origins: Vec<String>,
}
