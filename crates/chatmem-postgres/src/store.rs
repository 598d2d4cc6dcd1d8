//! [`PostgresStore`]: the connection pool and the [`Store`] operations, each one statement.

use std::fmt;

use async_trait::async_trait;
use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::{ToSql, Type};
use deadpool_postgres::{Object, Pool};
use tokio::time::timeout;

use chatmem::{Commit, ConversationId, Page, Snapshot, Store, StoreError, StoreErrorKind, StoredMessage};

use crate::builder::{PostgresStoreBuilder, Timeouts};
use crate::error::{db_error, pool_error, statement_timed_out};
use crate::migrate;
use crate::params::CommitParams;
use crate::rows::{self, Reader};
use crate::sql::Statements;

/// The schema version this crate writes; a database at a higher one is refused with
/// [`StoreErrorKind::SchemaTooNew`].
pub const SCHEMA_VERSION: i32 = migrate::LATEST;

/// Conversations in PostgreSQL.
///
/// Made by [`PostgresStore::connect`] or [`PostgresStore::builder`]; cheap to share behind
/// an `Arc` (it holds a connection pool). Every operation is one parameterised statement
/// (one round trip), bounded by the configured timeouts: at most the pool timeout (plus the
/// connect timeout when a connection has to be opened) and then the statement timeout. An
/// unreachable or silent server gives [`StoreErrorKind::Unavailable`], and the store
/// recovers once the server is back.
///
/// Layout, per schema: `chatmem_conversations` (one row per conversation: version, system
/// message, window start, next sequence, expiry) and `chatmem_messages` (conversation id,
/// sequence, token count, the message JSON as text). Expired conversations read as absent
/// and are deleted by [`Store::purge_expired`].
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: Pool,
    pub(crate) sql: std::sync::Arc<Statements>,
    pub(crate) timeouts: Timeouts,
    /// The server as `postgres://user@host:port/db`, never with a password: for errors.
    pub(crate) target: String,
    pub(crate) schema: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("timeouts", &self.timeouts)
            .field("pool", &self.pool.status())
            .finish()
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
        PostgresStoreBuilder::new(url)
    }

    /// The schema holding this store's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Creates or upgrades the schema, the whole migration within the statement timeout;
    /// run once, by the builder.
    pub(crate) async fn migrate(&self, quoted: &str) -> Result<(), StoreError> {
        const WHAT: &str = "migrating the schema";
        let mut client = self.pool.get().await.map_err(|e| pool_error(e, WHAT, &self.target))?;
        match timeout(
            self.timeouts.statement,
            migrate::migrate(&mut client, &self.schema, quoted, &self.target),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                Err(statement_timed_out(WHAT, &self.target))
            }
        }
    }

    /// Runs one statement: the only way this store talks to the server, so every
    /// operation is exactly one round trip. `query_typed` sends parse, bind, execute and
    /// sync in one write, with no separate prepare.
    ///
    /// Getting the connection is bounded by the pool's own timeouts (pool wait, connect).
    async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.pool.get().await.map_err(|e| pool_error(e, what, &self.target))?;
        match timeout(self.timeouts.statement, client.query_typed(sql, params)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(db_error(e, what, &self.target)),
            Err(_) => {
                // The connection may still be waiting for the answer: close it rather
                // than hand it to the next caller.
                drop(Object::take(client));
                Err(statement_timed_out(what, &self.target))
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
        rows::snapshot(id, &rows)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let p = CommitParams::new(&commit)?;
        let sql = if commit.expected_version() == 0 {
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
        // NULL: the version check failed, nothing was written.
        match read.get::<Option<i64>>(row, 0)? {
            Some(version) => read.u64(version, "the new version"),
            None => Err(StoreError::conflict()),
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
        rows::history(id, &rows)
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
