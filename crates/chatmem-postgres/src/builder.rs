//! [`PostgresStoreBuilder`]: the connection string, pool and timeout settings, and
//! connecting with them.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::tokio_postgres::{Config, NoTls};
use deadpool_postgres::{Hook, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use chatmem::store::{SecretUrl, StoreError, StoreErrorKind};
use chatmem_sql::{TimeoutSettings, Timeouts};

use crate::sql::Statements;
use crate::store::PostgresStore;
use crate::url;

/// The default of every timeout: connect, pool and statement.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default schema.
pub const DEFAULT_SCHEMA: &str = "public";
/// The longest statement timeout: PostgreSQL's own limit, `i32::MAX` milliseconds (about
/// 24.8 days).
pub const MAX_STATEMENT_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Settings for a [`PostgresStore`]; see [`PostgresStore::builder`].
///
/// Timeouts can also come from the URL (see the [crate docs](crate#settings)); a builder
/// method overrides the URL.
#[derive(Clone, Debug)]
pub struct PostgresStoreBuilder {
    url: SecretUrl,
    pool_size: usize,
    /// The builder's timeouts; the URL's are read at connect.
    timeouts: TimeoutSettings,
    schema: String,
    migrate: bool,
}

impl PostgresStoreBuilder {
    /// The settings for `url` with every default; made by [`PostgresStore::builder`].
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.into(),
            pool_size: DEFAULT_POOL_SIZE,
            timeouts: TimeoutSettings::default(),
            schema: DEFAULT_SCHEMA.to_owned(),
            migrate: true,
        }
    }

    chatmem_sql::sql_builder_setters!();

    /// The schema holding chatmem's tables (default [`DEFAULT_SCHEMA`]); created if
    /// missing. An identifier of ASCII letters, digits and `_` (not starting with a
    /// digit), at most 63 bytes, used as written (case-sensitive). Separate schemas are
    /// separate stores: tests use one each.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Connects, creates or upgrades the schema (unless [`migrate(false)`](Self::migrate)),
    /// and returns the store.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for a malformed URL, schema name or setting (named
    /// in the message) or, without migrations, a missing or older schema, [`StoreErrorKind::Unavailable`] when the server cannot be reached
    /// within the timeouts, [`StoreErrorKind::SchemaTooNew`] when the schema was written by
    /// a newer chatmem-postgres. Errors name the server without its password.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let quoted = quote_schema(&self.schema)?;
        let (driver_url, from_url) = url::split(self.url.expose())?;
        let mut config = Config::from_str(&driver_url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("invalid PostgreSQL connection string {}", self.url),
            )
            .with_source(e)
        })?;
        let target = url::describe(&driver_url, &config)?;
        if self.pool_size == 0 {
            return Err(invalid_setting("pool_size must be at least 1"));
        }
        let timeouts = self.timeouts(from_url, config.get_connect_timeout().copied())?;
        config.connect_timeout(timeouts.connect);
        // Validated to be at most i32::MAX ms, so this fits.
        let statement_ms = timeouts.statement.as_nanos().div_ceil(1_000_000);
        // Appended last, so it wins over a statement_timeout in the URL's own options.
        let options = match config.get_options() {
            Some(existing) => format!("{existing} -c statement_timeout={statement_ms}"),
            None => format!("-c statement_timeout={statement_ms}"),
        };
        config.options(options);
        if config.get_application_name().is_none() {
            config.application_name("chatmem");
        }
        let config = std::sync::Arc::new(config);
        let manager = Manager::from_config(
            Config::clone(&config),
            NoTls,
            ManagerConfig {
                // Fast: no test query when a connection is reused, so an operation stays
                // one round trip; a dead connection fails its statement and is dropped.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let sql = std::sync::Arc::new(Statements::new(&quoted));
        let warm = std::sync::Arc::clone(&sql);
        let pool = Pool::builder(manager)
            .post_create(Hook::async_fn(move |client, _| {
                let warm = std::sync::Arc::clone(&warm);
                Box::pin(async move {
                    warm.prepare_all(client).await;
                    Ok(())
                })
            }))
            .max_size(self.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeouts.pool))
            .create_timeout(Some(timeouts.connect))
            .recycle_timeout(Some(timeouts.connect))
            .build()
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Other,
                    format!("building the connection pool for {target}"),
                )
                .with_source(e.to_string())
            })?;
        let store = PostgresStore {
            pool,
            config,
            sql,
            timeouts,
            target,
            schema: self.schema,
        };
        if self.migrate {
            store.migrate(&quoted).await?;
        } else {
            store.check_schema(&quoted).await?;
        }
        // The connection that ran the migration opened before the tables existed: prepare the
        // statements on it now, as every later connection does when it opens.
        if let Ok(client) = store.pool.get().await {
            store.sql.prepare_all(&client).await;
        }
        Ok(store)
    }

    /// The timeouts to run with: for each, the specific builder setting, else the builder's
    /// [`timeout`](Self::timeout), else the URL's specific parameter, else its
    /// `chatmem_timeout_ms`, else [`DEFAULT_TIMEOUT`]; checked, the statement timeout
    /// against [`MAX_STATEMENT_TIMEOUT`].
    ///
    /// `libpq_connect` is the URL's standard `connect_timeout`, a URL-specific connect
    /// timeout below `chatmem_connect_timeout_ms`.
    fn timeouts(&self, mut from_url: TimeoutSettings, libpq_connect: Option<Duration>) -> Result<Timeouts, StoreError> {
        // The driver keeps only a positive `connect_timeout`, so this one never fails the
        // zero check that would name it as `chatmem_connect_timeout_ms`.
        from_url.connect = from_url.connect.or(libpq_connect);
        self.timeouts
            .resolve(&from_url, DEFAULT_TIMEOUT, Some((MAX_STATEMENT_TIMEOUT, "PostgreSQL")))
    }
}

fn invalid_setting(what: impl Into<String>) -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, what)
}

/// Checks a schema name and quotes it as an identifier.
fn quote_schema(schema: &str) -> Result<String, StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(format!("\"{schema}\""))
    } else {
        Err(StoreError::new(
            StoreErrorKind::InvalidInput,
            format!("schema name {schema:?} is not 1-63 ASCII letters, digits and _ (not starting with a digit)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        assert_eq!(quote_schema("chatmem_t1").unwrap(), "\"chatmem_t1\"");
        for bad in ["", "1abc", "a\"b", "a b", "a;drop", &"x".repeat(64)] {
            assert_eq!(quote_schema(bad).unwrap_err().kind(), StoreErrorKind::InvalidInput);
        }
    }
}
