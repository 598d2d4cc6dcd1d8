//! A PostgreSQL [`Store`] for chatmem: conversation memory that survives restarts and is
//! shared by every process connected to the same database.
//!
//! [`PostgresStore`] keeps each conversation as one row plus an append-only message log,
//! and does each [`Store::load`] in one statement and each [`Store::commit`] in one atomic,
//! version-checked statement — one round trip each, whatever the history length. Use it
//! with [`chatmem::ChatMemory`]; it holds no window logic of its own.
//!
//! It is not a general PostgreSQL client, and it connects **without TLS**: use it on
//! loopback, a Unix socket or a network you trust. Schema creation and upgrades are
//! automatic (tables `chatmem_conversations`, `chatmem_messages`,
//! `chatmem_schema_version` in the configured schema, `public` by default).
//!
//! Round trips: every operation is one `query_typed` call (parse, bind, execute and sync
//! sent in one write, no separate prepare) on a pooled connection that is reused without a
//! test query. `tests/round_trips.rs` checks this on the wire with a loopback proxy that
//! counts the client's `Sync` messages: load = 1, commit = 1.
//!
//! ```no_run
//! use std::time::Duration;
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_postgres::PostgresStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = PostgresStore::builder("postgres://postgres@127.0.0.1:5432/test")
//!     .pool_size(8)
//!     .timeout(Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("我的订单还没发货。"), Message::assistant("已查询。")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```

mod error;
mod migrate;
mod sql;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::tokio_postgres::config::Host;
use deadpool_postgres::tokio_postgres::types::{ToSql, Type};
use deadpool_postgres::tokio_postgres::{Config, NoTls, Row};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio::time::{Instant, timeout_at};

use chatmem::{
    Commit, ConversationId, Message, Page, Retention, Snapshot, Store, StoreError, StoreErrorKind, StoredMessage,
};

use crate::error::{db_error, pool_error, timed_out};
use crate::sql::Statements;

/// The default time a store operation (getting a connection included) may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default schema.
pub const DEFAULT_SCHEMA: &str = "public";
/// The schema version this crate writes; a database at a higher one is refused with
/// [`StoreErrorKind::SchemaTooNew`].
pub const SCHEMA_VERSION: i32 = migrate::LATEST;

/// TTLs are capped at about 1,000 years so the expiry stays a valid timestamp.
const MAX_TTL_MICROS: u128 = 1_000 * 366 * 24 * 3600 * 1_000_000;

/// Conversations in PostgreSQL.
///
/// Made by [`PostgresStore::connect`] or [`PostgresStore::builder`]; cheap to share behind
/// an `Arc` (it holds a connection pool). Every operation is one parameterised statement
/// (one round trip) bounded by the configured timeout; an unreachable or silent server
/// gives [`StoreErrorKind::Unavailable`], and the store recovers once the server is back.
///
/// Layout, per schema: `chatmem_conversations` (one row per conversation: version, system
/// message, window start, next sequence, expiry) and `chatmem_messages` (conversation id,
/// sequence, token count, the message JSON as text). Expired conversations read as absent
/// and are deleted by [`Store::purge_expired`].
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    sql: std::sync::Arc<Statements>,
    timeout: Duration,
    /// The server as `postgres://user@host:port/db`, never with a password: for errors.
    target: String,
    schema: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("timeout", &self.timeout)
            .field("pool", &self.pool.status())
            .finish()
    }
}

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

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`, or the
    /// `key=value` form) with the default settings, creating the schema if needed.
    ///
    /// # Errors
    /// As [`PostgresStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// A builder for a store at `url`, with the defaults of [`connect`](Self::connect).
    pub fn builder(url: &str) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            url: url.to_owned(),
            pool_size: DEFAULT_POOL_SIZE,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: None,
            statement_timeout: None,
            schema: DEFAULT_SCHEMA.to_owned(),
        }
    }

    /// The schema holding this store's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    async fn migrate(&self, quoted: &str) -> Result<(), StoreError> {
        const WHAT: &str = "migrating the schema";
        let deadline = Instant::now() + self.timeout;
        let mut client = match timeout_at(deadline, self.pool.get()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(pool_error(e, WHAT, &self.target)),
            Err(_) => return Err(timed_out(WHAT, &self.target)),
        };
        match timeout_at(
            deadline,
            migrate::migrate(&mut client, &self.schema, quoted, &self.target),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                Err(timed_out(WHAT, &self.target))
            }
        }
    }

    /// Runs one statement: the only way this store talks to the server, so every
    /// operation is exactly one round trip. `query_typed` sends parse, bind, execute and
    /// sync in one write, with no separate prepare.
    async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, StoreError> {
        let deadline = Instant::now() + self.timeout;
        let client = match timeout_at(deadline, self.pool.get()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(pool_error(e, what, &self.target)),
            Err(_) => return Err(timed_out(what, &self.target)),
        };
        match timeout_at(deadline, client.query_typed(sql, params)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(db_error(e, what, &self.target)),
            Err(_) => {
                // The connection may still be waiting for the answer: close it rather
                // than hand it to the next caller.
                drop(Object::take(client));
                Err(timed_out(what, &self.target))
            }
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let rows = self
            .query("loading a conversation", &self.sql.load, &[(&id.as_str(), Type::TEXT)])
            .await?;
        let mut rows = rows.iter();
        let Some(head) = rows.next() else {
            return Ok(Snapshot::empty());
        };
        let read = Reader {
            id,
            what: "the conversation row",
        };
        let system = match read.get::<Option<String>>(head, 6)? {
            Some(json) => {
                let seq = read.u64(read.get::<Option<i64>>(head, 4)?.unwrap_or(-1), "system_seq")?;
                let tokens = read.get::<Option<i64>>(head, 5)?.unwrap_or(-1);
                Some(read.message(seq, tokens, &json)?)
            }
            None => None,
        };
        let mut snapshot = Snapshot {
            version: read.u64(read.get::<Option<i64>>(head, 1)?.unwrap_or(-1), "version")?,
            system,
            window_start: read.u64(read.get::<Option<i64>>(head, 2)?.unwrap_or(-1), "window_start")?,
            next_seq: read.u64(read.get::<Option<i64>>(head, 3)?.unwrap_or(-1), "next_seq")?,
            messages: Vec::with_capacity(rows.len()),
        };
        let read = Reader {
            id,
            what: "a message row",
        };
        for row in rows {
            let seq = read.u64(read.get::<i64>(row, 4)?, "seq")?;
            let tokens = read.get::<i64>(row, 5)?;
            let json = read.get::<&str>(row, 6)?;
            snapshot.messages.push(read.message(seq, tokens, json)?);
        }
        Ok(snapshot)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let p = CommitParams::new(&commit)?;
        let sql = if commit.expected_version == 0 {
            &self.sql.commit_create
        } else {
            &self.sql.commit_update
        };
        let rows = self
            .query(
                "committing to a conversation",
                sql,
                &[
                    (&id.as_str(), Type::TEXT),
                    (&p.expected, Type::INT8),
                    (&p.system_seq, Type::INT8),
                    (&p.system_tokens, Type::INT8),
                    (&p.system_json, Type::TEXT),
                    (&p.window_start, Type::INT8),
                    (&p.first_seq, Type::INT8),
                    (&p.next_seq, Type::INT8),
                    (&p.drop_evicted, Type::BOOL),
                    (&p.ttl_micros, Type::INT8),
                    (&p.seqs, Type::INT8_ARRAY),
                    (&p.tokens, Type::INT8_ARRAY),
                    (&p.jsons, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let read = Reader {
            id,
            what: "the commit result",
        };
        let row = rows
            .first()
            .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the commit statement returned no row"))?;
        if let Some(version) = read.get::<Option<i64>>(row, 0)? {
            return read.u64(version, "version");
        }
        // Not applied: tell a lost version check from a sequence that does not follow,
        // by the row as this statement saw it.
        let current = read.get::<Option<i64>>(row, 1)?.unwrap_or(0);
        let next_seq = read.get::<Option<i64>>(row, 2)?.unwrap_or(1);
        match p.first_seq {
            Some(first) if current == p.expected && first != next_seq => Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("appended sequence {first} does not follow {next_seq}"),
            )),
            _ => Err(StoreError::conflict()),
        }
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "reading a conversation's history",
                &self.sql.history,
                &[(&id.as_str(), Type::TEXT), (&after, Type::INT8), (&limit, Type::INT8)],
            )
            .await?;
        let read = Reader {
            id,
            what: "a message row",
        };
        rows.iter()
            .map(|row| {
                let seq = read.u64(read.get::<i64>(row, 0)?, "seq")?;
                read.message(seq, read.get::<i64>(row, 1)?, read.get::<&str>(row, 2)?)
            })
            .collect()
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let rows = self
            .query(
                "clearing a conversation",
                &self.sql.clear,
                &[(&id.as_str(), Type::TEXT)],
            )
            .await?;
        let read = Reader {
            id,
            what: "the clear result",
        };
        match rows.first() {
            Some(row) => read.get::<bool>(row, 0),
            None => Ok(false),
        }
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        let limit = limit.max(1);
        let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let after = after.map(ConversationId::as_str);
        let rows = self
            .query(
                "listing conversations",
                &self.sql.list,
                &[(&after, Type::TEXT), (&fetch, Type::INT8)],
            )
            .await?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: &str = row.try_get(0).map_err(|e| {
                StoreError::new(StoreErrorKind::Other, "reading a listed conversation id").with_source(e)
            })?;
            ids.push(ConversationId::new(text).map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Corrupt,
                    format!("conversation id {text:?} in {} is not a valid id", self.schema),
                )
                .with_source(e)
            })?);
        }
        Ok(Page::from_overfetch(ids, limit))
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        let rows = self
            .query("purging expired conversations", &self.sql.purge, &[])
            .await?;
        let count: i64 = match rows.first() {
            Some(row) => row
                .try_get(0)
                .map_err(|e| StoreError::new(StoreErrorKind::Other, "reading the purge count").with_source(e))?,
            None => 0,
        };
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

/// A commit's statement parameters, checked and converted before anything is sent.
struct CommitParams {
    expected: i64,
    system_seq: Option<i64>,
    system_tokens: Option<i64>,
    system_json: Option<String>,
    window_start: i64,
    first_seq: Option<i64>,
    next_seq: Option<i64>,
    drop_evicted: bool,
    ttl_micros: Option<i64>,
    seqs: Vec<i64>,
    tokens: Vec<i64>,
    jsons: Vec<String>,
}

impl CommitParams {
    fn new(commit: &Commit) -> Result<Self, StoreError> {
        let invalid = |what: String| StoreError::new(StoreErrorKind::InvalidInput, what);
        let int = |value: u64, what: &str| {
            i64::try_from(value)
                .map_err(|_| invalid(format!("{what} {value} is beyond what PostgreSQL's bigint holds")))
        };
        let json = |m: &Message, seq: u64| {
            serde_json::to_string(m)
                .map_err(|e| invalid(format!("message {seq} cannot be written as JSON")).with_source(e))
        };
        let n = commit.append.len();
        let (mut seqs, mut tokens, mut jsons) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, m) in commit.append.iter().enumerate() {
            if let Some(first) = commit.append.first()
                && m.seq != first.seq.saturating_add(i as u64)
            {
                return Err(invalid(format!(
                    "appended sequences are not consecutive: {} follows {}",
                    m.seq,
                    first.seq.saturating_add(i as u64).saturating_sub(1)
                )));
            }
            seqs.push(int(m.seq, "sequence")?);
            tokens.push(i64::from(m.tokens));
            jsons.push(json(&m.message, m.seq)?);
        }
        let system = commit.system.as_ref();
        Ok(Self {
            expected: int(commit.expected_version, "expected version")?,
            system_seq: system.map(|s| int(s.seq, "system sequence")).transpose()?,
            system_tokens: system.map(|s| i64::from(s.tokens)),
            system_json: system.map(|s| json(&s.message, s.seq)).transpose()?,
            window_start: int(commit.window_start, "window start")?,
            first_seq: seqs.first().copied(),
            next_seq: seqs.last().map(|last| last.saturating_add(1)),
            drop_evicted: commit.retention == Retention::DropEvicted,
            ttl_micros: commit
                .ttl
                .map(|ttl| i64::try_from(ttl.as_micros().min(MAX_TTL_MICROS)).unwrap_or(i64::MAX)),
            seqs,
            tokens,
            jsons,
        })
    }
}

/// Reads columns of one conversation's rows, turning bad data into
/// [`StoreErrorKind::Corrupt`] errors that name the conversation.
struct Reader<'a> {
    id: &'a ConversationId,
    what: &'static str,
}

impl Reader<'_> {
    fn get<'r, T: deadpool_postgres::tokio_postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        index: usize,
    ) -> Result<T, StoreError> {
        row.try_get(index).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!(
                    "conversation {:?}: {} has an unreadable column {index}",
                    self.id.as_str(),
                    self.what
                ),
            )
            .with_source(e)
        })
    }

    fn u64(&self, value: i64, column: &str) -> Result<u64, StoreError> {
        u64::try_from(value).map_err(|_| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("conversation {:?}: {column} is {value}", self.id.as_str()),
            )
        })
    }

    fn message(&self, seq: u64, tokens: i64, json: &str) -> Result<StoredMessage, StoreError> {
        let corrupt = |why: &str| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("conversation {:?} seq {seq}: {why}", self.id.as_str()),
            )
        };
        let tokens = u32::try_from(tokens).map_err(|_| corrupt(&format!("token count {tokens} is out of range")))?;
        let message: Message = serde_json::from_str(json)
            .map_err(|e| corrupt("the stored message is not a valid chatmem message").with_source(e))?;
        Ok(StoredMessage::new(seq, tokens, message))
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

    #[test]
    fn commit_params_reject_gaps() {
        let m = |seq| StoredMessage::new(seq, 1, Message::user("x"));
        let commit = Commit {
            expected_version: 0,
            system: None,
            append: vec![m(1), m(3)],
            window_start: 1,
            retention: Retention::KeepHistory,
            ttl: None,
        };
        assert!(matches!(CommitParams::new(&commit), Err(e) if e.kind() == StoreErrorKind::InvalidInput));
    }

    #[test]
    fn statements_fill_every_placeholder() {
        let s = Statements::new("\"s\"");
        for sql in [
            &s.load,
            &s.commit_update,
            &s.commit_create,
            &s.history,
            &s.clear,
            &s.list,
            &s.purge,
        ] {
            assert!(!sql.contains('{'), "{sql}");
            assert!(sql.contains("\"s\".chatmem_conversations"), "{sql}");
        }
    }
}
