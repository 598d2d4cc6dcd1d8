//! [`PostgresStoreBuilder`]: the connection string, pool and timeout settings, and
//! connecting with them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::tokio_postgres::config::Host;
use deadpool_postgres::tokio_postgres::{Config, NoTls};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use chatmem::{StoreError, StoreErrorKind};

use crate::sql::Statements;
use crate::store::PostgresStore;

/// The default time a store operation (getting a connection included) may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default schema.
pub const DEFAULT_SCHEMA: &str = "public";

/// Settings for a [`PostgresStore`]; see [`PostgresStore::builder`].
#[derive(Clone)]
pub struct PostgresStoreBuilder {
    url: String,
    pool_size: usize,
    timeout: Duration,
    connect_timeout: Option<Duration>,
    statement_timeout: Option<Duration>,
    schema: String,
}

impl fmt::Debug for PostgresStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStoreBuilder")
            .field("url", &redact(&self.url))
            .field("pool_size", &self.pool_size)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("schema", &self.schema)
            .finish()
    }
}

impl PostgresStoreBuilder {
    /// The settings for `url` with every default; made by [`PostgresStore::builder`].
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            pool_size: DEFAULT_POOL_SIZE,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: None,
            statement_timeout: None,
            schema: DEFAULT_SCHEMA.to_owned(),
        }
    }

    /// How many connections the pool may open (default [`DEFAULT_POOL_SIZE`], at least 1).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// The most a store operation may take, waiting for a pooled connection included
    /// (default [`DEFAULT_TIMEOUT`]); past it the operation fails with
    /// [`StoreErrorKind::Unavailable`]. Also the default for the connect and statement
    /// timeouts.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most opening one connection may take (default: the [`timeout`](Self::timeout)).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The server-side `statement_timeout` of every connection (default: the
    /// [`timeout`](Self::timeout)), so that a statement abandoned by the client does not
    /// keep running.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// The schema holding chatmem's tables (default [`DEFAULT_SCHEMA`]); created if
    /// missing. An identifier of ASCII letters, digits and `_` (not starting with a
    /// digit), at most 63 bytes, used as written (case-sensitive). Separate schemas are
    /// separate stores: tests use one each.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Connects, creates or upgrades the schema, and returns the store.
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] for a malformed URL or schema name,
    /// [`StoreErrorKind::Unavailable`] when the server cannot be reached within the
    /// timeout, [`StoreErrorKind::SchemaTooNew`] when the schema was written by a newer
    /// chatmem-postgres. Errors name the server without its password.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let quoted = quote_schema(&self.schema)?;
        let mut config = Config::from_str(&self.url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("invalid PostgreSQL connection string {}", redact(&self.url)),
            )
            .with_source(e)
        })?;
        let target = describe(&config);
        config.connect_timeout(self.connect_timeout.unwrap_or(self.timeout));
        let statement_ms = self.statement_timeout.unwrap_or(self.timeout).as_millis().max(1);
        let options = match config.get_options() {
            Some(existing) => format!("{existing} -c statement_timeout={statement_ms}"),
            None => format!("-c statement_timeout={statement_ms}"),
        };
        config.options(options);
        if config.get_application_name().is_none() {
            config.application_name("chatmem");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // Fast: no test query when a connection is reused, so an operation stays
                // one round trip; a dead connection fails its statement and is dropped.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(self.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(self.timeout))
            .create_timeout(Some(self.connect_timeout.unwrap_or(self.timeout)))
            .recycle_timeout(Some(self.timeout))
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
            sql: std::sync::Arc::new(Statements::new(&quoted)),
            timeout: self.timeout,
            target,
            schema: self.schema,
        };
        store.migrate(&quoted).await?;
        Ok(store)
    }
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

/// The server a config points at, as `postgres://user@host:port/database`: no password.
fn describe(config: &Config) -> String {
    let user = config.get_user().unwrap_or("");
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let db = config.get_dbname().unwrap_or(user);
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    format!("postgres://{at}{}/{db}", hosts.join(","))
}

/// A connection string fit for errors and logs: parsed and re-described without its
/// password, or a placeholder when it does not parse.
fn redact(url: &str) -> String {
    match Config::from_str(url) {
        Ok(config) => describe(&config),
        Err(_) => "(unparsable connection string, not shown)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        let shown = redact("postgres://alice:s3cret@db.example:6543/app");
        assert_eq!(shown, "postgres://alice@db.example:6543/app");
        assert!(!redact("host=h user=u password=s3cret dbname=d").contains("s3cret"));
        assert!(!redact("postgres://a:s3cret@h:notaport/d").contains("s3cret"));
        let builder = PostgresStore::builder("postgres://alice:s3cret@h/d");
        assert!(!format!("{builder:?}").contains("s3cret"));
    }

    #[test]
    fn schema_names() {
        assert_eq!(quote_schema("chatmem_t1").unwrap(), "\"chatmem_t1\"");
        for bad in ["", "1abc", "a\"b", "a b", "a;drop", &"x".repeat(64)] {
            assert_eq!(quote_schema(bad).unwrap_err().kind(), StoreErrorKind::InvalidInput);
        }
    }
}
