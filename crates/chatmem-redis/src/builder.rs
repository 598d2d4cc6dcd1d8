//! [`RedisStoreBuilder`]: the URL and options a [`RedisStore`] is made from, and connecting.

use std::sync::Arc;
use std::time::Duration;

use chatmem::{StoreError, StoreErrorKind};
use redis::Script;

use crate::conn::Conn;
use crate::error::redact_url;
use crate::keys::Keys;
use crate::scripts;
use crate::store::{RedisStore, Scripts};

/// The default key prefix.
pub const DEFAULT_KEY_PREFIX: &str = "chatmem";

/// The default connect and response timeouts.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Settings for a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    pub(crate) url: String,
    pub(crate) key_prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
}

impl RedisStoreBuilder {
    /// The prefix of every key this store uses (default [`DEFAULT_KEY_PREFIX`]). Stores
    /// with different prefixes on one Redis never see each other's conversations. It must
    /// not be empty nor contain `{` or `}` (it would change the keys' hash tag).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets both the connect and the response timeout (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self.response_timeout = timeout;
        self
    }

    /// How long [`connect`](RedisStoreBuilder::connect), and each later reconnection
    /// attempt, may take (default [`DEFAULT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take end to end, reconnecting included, before it
    /// fails with [`StoreErrorKind::Unavailable`] (default [`DEFAULT_TIMEOUT`]).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Connects, then checks (or creates) the schema version key.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for a malformed URL or key prefix;
    /// [`StoreErrorKind::Unavailable`] when Redis cannot be reached within the connect
    /// timeout; [`StoreErrorKind::SchemaTooNew`] when the keys were written by a newer
    /// chatmem. Messages show the URL without its password.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let url = redact_url(&self.url);
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                "redis key prefix must be non-empty and hold no `{` or `}`",
            ));
        }
        let conn = Conn::open(&self.url, &url, self.connect_timeout, self.response_timeout).await?;
        let store = RedisStore {
            conn,
            keys: Keys::new(&self.key_prefix),
            scripts: Arc::new(Scripts {
                load: Script::new(scripts::LOAD),
                commit: Script::new(scripts::COMMIT),
                clear: Script::new(scripts::CLEAR),
                prune: Script::new(scripts::PRUNE),
            }),
            response_timeout: self.response_timeout,
            url: url.into(),
        };
        store.check_schema().await?;
        Ok(store)
    }
}
