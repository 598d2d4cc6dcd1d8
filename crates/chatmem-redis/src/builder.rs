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

/// Settings for a [`RedisStore`]; see [`RedisStore::builder`].
/// (`Debug` prints the URL without its password.)
#[derive(Clone, Debug)]
pub struct RedisStoreBuilder {
    pub(crate) url: SecretUrl,
    pub(crate) key_prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) window_cache_bytes: usize,
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
        self.connect_timeout = timeout;
        self.response_timeout = timeout;
        self
    }

    /// How long [`connect`](RedisStoreBuilder::connect), and each later reconnection
    /// attempt, may take (default [`DEFAULT_TIMEOUT`]; must be longer than zero).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take end to end, reconnecting included, before it
    /// fails with [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable)
    /// (default [`DEFAULT_TIMEOUT`]; must be longer than zero). A commit that gets no answer
    /// in time is sent once more within a second window of this length (see the
    /// [crate docs](crate), *Outages*).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Connects, then checks (or creates) the schema version key and lists in the recency
    /// index the conversations last committed before it existed (see the crate docs).
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`](chatmem::store::StoreErrorKind::InvalidInput) for a
    /// malformed URL, a TLS URL (`rediss://`, not supported), an empty key prefix or one
    /// holding `{` or `}`, or a zero timeout;
    /// [`StoreErrorKind::Unavailable`](chatmem::store::StoreErrorKind::Unavailable) when Redis
    /// cannot be reached within the connect timeout;
    /// [`StoreErrorKind::SchemaTooNew`](chatmem::store::StoreErrorKind::SchemaTooNew) when the keys
    /// were written by a newer chatmem. Messages show the URL without its password
    /// ([`chatmem::store::redact_url`]).
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let url = self.url.to_string();
        self.check(&url)?;
        let conn = Conn::open(self.url.expose(), &url, self.connect_timeout, self.response_timeout).await?;
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
            }),
            cache: Arc::new(WindowCache::new(self.window_cache_bytes)),
            response_timeout: self.response_timeout,
            url: url.into(),
        };
        store.check_schema().await?;
        store.backfill_recent().await?;
        Ok(store)
    }

    /// Refuses what this store cannot do, before any connection is tried.
    fn check(&self, shown: &str) -> Result<(), StoreError> {
        let scheme = self.url.expose().split_once("://").map_or("", |(scheme, _)| scheme);
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
        for (setting, timeout) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
        ] {
            if timeout.is_zero() {
                return Err(invalid(format!("{setting} must be longer than zero")));
            }
        }
        Ok(())
    }
}
