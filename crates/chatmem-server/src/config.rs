//! [`ServerConfig`] and [`Limits`]: what a server is allowed to accept.

use std::time::Duration;

use crate::auth::Auth;

/// Bounds on what one request may carry; over them a request is answered 413 or 400, never
/// processed.
///
/// ```
/// let limits = chatmem_server::Limits::default();
/// assert_eq!(limits.max_body_bytes, 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a request body (default 1 MiB).
    pub max_body_bytes: usize,
    /// Messages in one `POST …/messages` (default 1,000).
    pub max_messages: usize,
    /// Bytes of text in one message ([`chatmem::Message::payload_len`], default 256 KiB).
    pub max_message_bytes: usize,
    /// Bytes of a conversation id as the client gives it (default 200: the tenant's prefix
    /// must fit beside it in [`chatmem::MAX_ID_BYTES`]).
    pub max_id_bytes: usize,
    /// How long one store operation may take before the request fails with 503 (default 10 s).
    pub store_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_messages: 1_000,
            max_message_bytes: 256 << 10,
            max_id_bytes: 200,
            store_timeout: Duration::from_secs(10),
        }
    }
}

/// How the server runs: its limits and, when given, the bearer tokens it accepts.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// Request limits.
    pub limits: Limits,
    /// Bearer tokens and their tenants; `None` accepts every request as one tenant (then the
    /// server must listen on loopback only, which `chatmem serve` enforces).
    pub auth: Option<Auth>,
}
