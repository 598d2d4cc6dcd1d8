//! [`MysqlStoreBuilder`]: the URL, pool, timeout and table-prefix settings, and connecting
//! with them.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

use chatmem::store::{SecretUrl, StoreError, StoreErrorKind};
use chatmem_sql::{TimeoutSettings, Timeouts};

use crate::sql::Statements;
use crate::store::MysqlStore;
use crate::url;

/// The default of every timeout: connect, pool and statement.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default table prefix: tables `chatmem_conversations`, `chatmem_messages`, ….
pub const DEFAULT_PREFIX: &str = "chatmem";

/// How long an idle pooled connection is kept.
const IDLE_TTL: Duration = Duration::from_secs(300);

/// Settings for a [`MysqlStore`]; see [`MysqlStore::builder`].
///
/// Timeouts can also come from the URL (see the [crate docs](crate#settings)); a builder
/// method overrides the URL.
///
/// ```no_run
/// # async fn demo() -> Result<(), chatmem::store::StoreError> {
/// let store = chatmem_mysql::MysqlStore::builder("mysql://root@127.0.0.1:3306/test")
///     .prefix("app1")
///     .timeout(std::time::Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MysqlStoreBuilder {
    url: SecretUrl,
    pool_size: usize,
    /// The builder's timeouts; the URL's are read at connect.
    timeouts: TimeoutSettings,
    prefix: String,
    migrate: bool,
}

impl MysqlStoreBuilder {
    /// The settings for `url` with every default; made by [`MysqlStore::builder`].
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.into(),
            pool_size: DEFAULT_POOL_SIZE,
            timeouts: TimeoutSettings::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            migrate: true,
        }
    }

    chatmem_sql::sql_builder_setters!();

    /// The prefix of chatmem's tables and procedures in the URL's database (default
    /// [`DEFAULT_PREFIX`]): 1-40 ASCII letters, digits and `_`, not starting with a digit.
    /// Separate prefixes are separate stores: tests use one each.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Connects, creates or upgrades the prefix's tables (unless
    /// [`migrate(false)`](Self::migrate)), and returns the store.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for a malformed URL (or one without a database),
    /// prefix or setting, or, without migrations, a missing or older schema;
    /// [`StoreErrorKind::Unavailable`] when the server cannot be reached within the
    /// timeouts; [`StoreErrorKind::SchemaTooNew`] for a schema of a newer chatmem-mysql.
    /// Errors name the server without its password.
    pub async fn connect(self) -> Result<MysqlStore, StoreError> {
        check_prefix(&self.prefix)?;
        let target = self.url.to_string();
        if !self.url.expose().starts_with("mysql://") {
            return Err(invalid_setting(format!("{target} is not a mysql:// URL")));
        }
        let (driver_url, from_url) = url::split(self.url.expose())?;
        let opts = Opts::from_url(&driver_url).map_err(|e| {
            StoreError::new(StoreErrorKind::InvalidInput, format!("invalid MySQL URL {target}")).with_source(e)
        })?;
        if opts.db_name().is_none_or(str::is_empty) {
            return Err(invalid_setting(format!(
                "the MySQL URL {target} names no database (mysql://USER@HOST:PORT/DATABASE)"
            )));
        }
        if self.pool_size == 0 {
            return Err(invalid_setting("pool_size must be at least 1"));
        }
        let timeouts = self.timeouts(from_url)?;
        let lock_wait_secs = timeouts.statement.as_millis().div_ceil(1000).max(1);
        let constraints =
            PoolConstraints::new(0, self.pool_size).ok_or_else(|| invalid_setting("pool_size must be at least 1"))?;
        let opts: Opts = OptsBuilder::from_opts(opts)
            // Over TCP as given: never switch to the server's Unix socket behind the URL's back.
            .prefer_socket(false)
            // An UPDATE answers the rows it matched, not only those it changed: a vector
            // written again where it already is still counts as kept (whatever the URL says).
            .client_found_rows(true)
            // Once per connection, when it opens: the commit's row lock wait ends on the
            // server near the client's own deadline; a search of more terms than the slotted
            // statements take returns per-term values as GROUP_CONCATs, which MySQL would cut
            // at 1,024 bytes (MariaDB at 1 MiB), and 64 MiB is far more than they take.
            .init(vec![format!(
                "SET NAMES utf8mb4 COLLATE utf8mb4_bin, SESSION innodb_lock_wait_timeout = {lock_wait_secs}, \
                 SESSION group_concat_max_len = 67108864"
            )])
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(constraints)
                    // Keep idle connections (up to the pool size) for this long: without a
                    // TTL the pool closes every connection above its minimum when it comes
                    // back, and each operation would open a new one.
                    .with_inactive_connection_ttl(IDLE_TTL)
                    // No COM_RESET_CONNECTION when a connection goes back to the pool: it would
                    // drop the prepared statements and cost a round trip per operation.
                    .with_reset_connection(false),
            )
            .into();
        let mut store = MysqlStore {
            pool: Pool::new(opts.clone()),
            opts,
            sql: Arc::new(Statements::new(&self.prefix)),
            timeouts,
            target,
            prefix: self.prefix,
            // Until read, the smallest any server ships (MySQL 5.x's 4 MiB).
            max_packet: 4 << 20,
        };
        if self.migrate {
            store.migrate().await?;
        } else {
            store.check_schema().await?;
        }
        store.max_packet = store.read_max_packet().await?;
        Ok(store)
    }

    /// Each timeout from the first of: its builder method, the builder's `timeout`, its URL
    /// parameter, the URL's `chatmem_timeout_ms`, [`DEFAULT_TIMEOUT`]; checked. MySQL sets
    /// no upper limit of its own: the lock wait is rounded up to whole seconds.
    fn timeouts(&self, from_url: TimeoutSettings) -> Result<Timeouts, StoreError> {
        self.timeouts.resolve(&from_url, DEFAULT_TIMEOUT, None)
    }
}

fn invalid_setting(what: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, what)
}

/// Checks a table prefix: it is written into table and procedure names.
fn check_prefix(prefix: &str) -> Result<(), StoreError> {
    let valid = !prefix.is_empty()
        && prefix.len() <= 40
        && !prefix.starts_with(|c: char| c.is_ascii_digit())
        && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(invalid_setting(format!(
            "table prefix {prefix:?} is not 1-40 ASCII letters, digits and _ (not starting with a digit)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert!(check_prefix("chatmem_t1").is_ok());
        for bad in ["", "1abc", "a`b", "a b", "a;drop", &"x".repeat(41)] {
            assert_eq!(check_prefix(bad).unwrap_err().kind(), StoreErrorKind::InvalidInput);
        }
    }

    #[tokio::test]
    async fn bad_settings_are_refused_before_connecting() {
        for (builder, said) in [
            (MysqlStore::builder("postgres://u:s3cret@h/db"), "not a mysql:// URL"),
            (MysqlStore::builder("mysql://u:s3cret@h:1"), "names no database"),
            (MysqlStore::builder("mysql://u:s3cret@h:1/db").pool_size(0), "pool_size"),
            (
                MysqlStore::builder("mysql://u:s3cret@h:1/db").prefix("a-b"),
                "table prefix",
            ),
            (MysqlStore::builder("mysql://u:s3cret@h:1/db?chatmem_x=1"), "chatmem_x"),
        ] {
            let err = builder.connect().await.unwrap_err();
            assert_eq!(err.kind(), StoreErrorKind::InvalidInput, "{err}");
            assert!(err.to_string().contains(said), "{err}");
            assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
        }
    }
}
