//! [`RedisStoreBuilder`]: the URL and options a [`RedisStore`] is made from, and connecting.

use std::sync::Arc;
use std::time::Duration;

use chatmem::store::{SecretUrl, StoreError};
use redis::Script;

use crate::conn::Conn;
use crate::error::invalid;
use crate::keys::Keys;
use crate::scripts;
use crate::store::{RedisStore, Scripts};
use crate::window_cache::WindowCache;

/// The default key prefix.
pub const DEFAULT_KEY_PREFIX: &str = "chatmem";

/// The default connect and response timeouts.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default byte budget of the window cache: 64 MiB (see
/// [`RedisStoreBuilder::window_cache_bytes`]).
pub const DEFAULT_WINDOW_CACHE_BYTES: usize = 64 << 20;

/// URL schemes of Redis over TLS, which this crate refuses (see the crate docs).
const TLS_SCHEMES: &[&str] = &["rediss", "valkeys"];

/// URL parameter for both timeouts at once, in milliseconds.
pub const TIMEOUT_PARAM: &str = "chatmem_timeout_ms";
/// URL parameter for the connect timeout, in milliseconds.
pub const CONNECT_TIMEOUT_PARAM: &str = "chatmem_connect_timeout_ms";
/// URL parameter for the response timeout, in milliseconds.
pub const RESPONSE_TIMEOUT_PARAM: &str = "chatmem_response_timeout_ms";

/// The URL parameters the driver reads (`db`, `user` and `pass` only over a Unix socket,
/// where the URL has no other place for them): any other is refused, not ignored.
const DRIVER_PARAMS: &[&str] = &["protocol"];
const UNIX_DRIVER_PARAMS: &[&str] = &["protocol", "db", "user", "pass"];

/// Settings for a [`RedisStore`]; see [`RedisStore::builder`].
/// (`Debug` prints the URL without its password.)
#[derive(Clone, Debug)]
pub struct RedisStoreBuilder {
    pub(crate) url: SecretUrl,
    pub(crate) key_prefix: String,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) response_timeout: Option<Duration>,
    pub(crate) window_cache_bytes: usize,
}

/// The URL the driver opens, and the timeouts as resolved.
struct Resolved {
    url: String,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl RedisStoreBuilder {
    /// The prefix of every key this store uses (default [`DEFAULT_KEY_PREFIX`]). Stores
    /// with different prefixes on one Redis never see each other's conversations. It must
    /// not be empty nor contain `{` or `}` (it would change the keys' hash tag).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// How many bytes of messages the store keeps of the windows it has seen (default
    /// [`DEFAULT_WINDOW_CACHE_BYTES`], 64 MiB, counted as the stored records' sizes), so
    /// that loading a window seen before reads only the messages added since. Past it, the
    /// least recently used conversations are forgotten. `0` keeps no messages: every load
    /// reads the whole window. Other processes may write the same conversations: every load
    /// still reads the conversation's state from Redis, and a conversation cleared and
    /// created again is told apart by a marker stored when it is created. Not used on
    /// Redis Cluster, whose loads always run the load script.
    ///
    /// ```
    /// let builder = chatmem_redis::RedisStore::builder("redis://127.0.0.1:6379").window_cache_bytes(16 << 20);
    /// # let _ = builder;
    /// ```
    pub fn window_cache_bytes(mut self, bytes: usize) -> Self {
        self.window_cache_bytes = bytes;
        self
    }

    /// Sets both the connect and the response timeout (default [`DEFAULT_TIMEOUT`]; must be
    /// longer than zero, checked by [`connect`](RedisStoreBuilder::connect)).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self.response_timeout = Some(timeout);
        self
    }

    /// How long [`connect`](RedisStoreBuilder::connect), and each later reconnection
    /// attempt, may take (default [`DEFAULT_TIMEOUT`]; must be longer than zero).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long one store operation may take end to end, reconnecting included, before it
    /// fails with [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable)
    /// (default [`DEFAULT_TIMEOUT`]; must be longer than zero). A commit that gets no answer
    /// in time is sent once more within a second window of this length (see the
    /// [crate docs](crate), *Outages*).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = Some(timeout);
        self
    }

    /// Connects, then checks (or creates) the schema version key and lists in the recency
    /// index the conversations last committed before it existed (see the crate docs).
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) for a
    /// malformed URL, a TLS URL (`rediss://`, not supported), an empty key prefix or one
    /// holding `{` or `}`, a zero timeout, a URL parameter the driver does not read, or a
    /// `chatmem_*` one that is unknown or not a whole number of milliseconds;
    /// [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable) when Redis
    /// cannot be reached within the connect timeout;
    /// [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind::SchemaTooNew) when the keys
    /// were written by a newer chatmem. Messages show the URL without its password
    /// ([`chatmem::store::redact_url`]).
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let url = self.url.to_string();
        let resolved = self.check(&url)?;
        let conn = Conn::open(&resolved.url, &url, resolved.connect_timeout, resolved.response_timeout).await?;
        let store = RedisStore {
            conn,
            keys: Keys::new(&self.key_prefix),
            scripts: Arc::new(Scripts {
                load: Script::new(scripts::LOAD),
                history: Script::new(scripts::HISTORY),
                commit: Script::new(scripts::COMMIT),
                clear: Script::new(scripts::CLEAR),
                prune: Script::new(scripts::PRUNE),
                recent: Script::new(scripts::RECENT),
                check: Script::new(scripts::CHECK),
                recent_backfill: Script::new(scripts::RECENT_BACKFILL),
                schema: Script::new(scripts::SCHEMA),
                search: Script::new(scripts::SEARCH),
                fetch: Script::new(scripts::FETCH),
                facts_commit: Script::new(scripts::FACTS_COMMIT),
            }),
            cache: Arc::new(WindowCache::new(self.window_cache_bytes)),
            response_timeout: resolved.response_timeout,
            url: url.into(),
        };
        store.check_schema().await?;
        store.backfill_recent().await?;
        Ok(store)
    }

    /// Refuses what this store cannot do, before any connection is tried; the URL the
    /// driver opens (chatmem's parameters taken out) and the timeouts: each from its builder
    /// setting, else its URL parameter, else `chatmem_timeout_ms`, else [`DEFAULT_TIMEOUT`].
    fn check(&self, shown: &str) -> Result<Resolved, StoreError> {
        let raw = self.url.expose();
        let scheme = raw.split_once("://").map_or("", |(scheme, _)| scheme);
        if TLS_SCHEMES.iter().any(|tls| scheme.eq_ignore_ascii_case(tls)) {
            return Err(invalid(format!(
                "{shown}: TLS ({scheme}://) is not supported by chatmem-redis; reach Redis over a private \
                 network, or through a TLS tunnel (stunnel, for example) and connect to the tunnel's \
                 local end with redis://"
            )));
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err(invalid("key_prefix must be non-empty and hold no `{` or `}`"));
        }
        // The query starts at the first `?` after the credentials (a password holds a `?`
        // only percent-encoded, as the driver's URL parser requires).
        let after_credentials = raw.rfind('@').map_or(0, |at| at + 1);
        let query = raw[after_credentials..].find('?').map(|q| q + after_credentials);
        let (url, values) = chatmem::store::split_ms_params(
            raw,
            query,
            &[TIMEOUT_PARAM, CONNECT_TIMEOUT_PARAM, RESPONSE_TIMEOUT_PARAM],
            "chatmem-redis",
        )?;
        let (all, connect, response) = (values[0], values[1], values[2]);
        let driver = if scheme.ends_with("unix") {
            UNIX_DRIVER_PARAMS
        } else {
            DRIVER_PARAMS
        };
        if let Some((_, rest)) = url.split_once('?') {
            for param in rest.split('&') {
                let name = param.split_once('=').map_or(param, |(name, _)| name);
                if !driver.contains(&name) {
                    return Err(invalid(format!(
                        "{shown}: unknown URL parameter {name:?}: chatmem-redis reads {}, {TIMEOUT_PARAM}, \
                         {CONNECT_TIMEOUT_PARAM} and {RESPONSE_TIMEOUT_PARAM}",
                        driver.join(", ")
                    )));
                }
            }
        }
        let pick =
            |setting: Option<Duration>, name: &'static str, param: Option<Duration>, param_name: &'static str| {
                setting
                    .map(|t| (t, name))
                    .or(param.map(|t| (t, param_name)))
                    .or(all.map(|t| (t, TIMEOUT_PARAM)))
                    .unwrap_or((DEFAULT_TIMEOUT, name))
            };
        let connect = pick(self.connect_timeout, "connect_timeout", connect, CONNECT_TIMEOUT_PARAM);
        let response = pick(
            self.response_timeout,
            "response_timeout",
            response,
            RESPONSE_TIMEOUT_PARAM,
        );
        for (timeout, from) in [connect, response] {
            if timeout.is_zero() {
                return Err(invalid(format!("{from} must be longer than zero")));
            }
        }
        Ok(Resolved {
            url,
            connect_timeout: connect.0,
            response_timeout: response.0,
        })
    }
}
