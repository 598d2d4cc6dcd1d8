//! [`MysqlStore`]: the connection pool and the [`Store`] operations, each one statement (but
//! recall's vectors: a search with a vector sends two at once, and a write of vectors reads
//! before it writes).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Pool, Row, Value};
use tokio::time::timeout;

use chatmem::facts::{FactChange, UserId};
use chatmem::recall::{IndexedMessage, MessageVector};
use chatmem::store::{
    Commit, FactsCommit, RecentConversation, RecentPage, RecentQuery, SearchQuery, SearchResult, Snapshot, StoreError,
    StoreErrorKind, StoredFacts, StoredMessage,
};
use chatmem::{ConversationId, Page, Store};
use chatmem_sql::{Timeouts, history_messages, load_snapshot, outcome_unknown, statement_timed_out};

use crate::builder::MysqlStoreBuilder;
use crate::error::{connection_lost, db_error, no_connection};
use crate::facts;
use crate::migrate;
use crate::params::{CommitParams, commit_params, values_len};
use crate::rows::{COLUMNS, Column, Reader};
use crate::search;
use crate::sql::{Statements, like_prefix};
use crate::vectors;

/// The schema version this crate writes; a database at a higher one is refused with
/// [`StoreErrorKind::SchemaTooNew`].
pub const SCHEMA_VERSION: i32 = migrate::LATEST;

/// Conversations, and users' facts, in MySQL or MariaDB.
///
/// Made by [`MysqlStore::connect`] or [`MysqlStore::builder`]; cheap to clone and share (it
/// holds a connection pool). Every operation is one prepared statement (one round trip;
/// [`put_vectors`](Store::put_vectors) two), bounded by the configured timeouts. An unreachable or silent server gives
/// [`StoreErrorKind::Unavailable`], and the store recovers once the server is back. A commit
/// that got no answer is sent once more, on a new connection, before it fails (see
/// [*Outages*](crate#outages)).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = chatmem_mysql::MysqlStore::connect("mysql://root@127.0.0.1:3306/test").await?;
/// let memory = chatmem::ChatMemory::new(store);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MysqlStore {
    pub(crate) pool: Pool,
    /// What the pool connects with, for the one-off connection a commit is resent on.
    pub(crate) opts: Opts,
    pub(crate) sql: Arc<Statements>,
    pub(crate) timeouts: Timeouts,
    /// The server as typed, the password hidden: for errors.
    pub(crate) target: String,
    pub(crate) prefix: String,
    /// The server's `max_allowed_packet`, read when the store connects: no packet may be
    /// larger (the server drops the connection of one that is).
    pub(crate) max_packet: usize,
}

impl fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlStore")
            .field("target", &self.target)
            .field("prefix", &self.prefix)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

/// A statement that failed, and whether it may have been applied all the same.
struct Failed {
    /// Sent, but the connection was lost or no answer came within the statement timeout.
    maybe_applied: bool,
    error: StoreError,
}

impl MysqlStore {
    /// Connects to `url` (`mysql://user[:password]@host[:port]/database`) with the default
    /// settings, creating the tables if needed (see [`MysqlStoreBuilder::migrate`]).
    ///
    /// # Errors
    /// As [`MysqlStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// A builder for a store at `url`, with the defaults of [`connect`](Self::connect).
    pub fn builder(url: &str) -> MysqlStoreBuilder {
        MysqlStoreBuilder::new(url)
    }

    /// The prefix of this store's tables.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A pooled connection within the pool wait plus the connect timeout.
    async fn conn(&self, what: &str) -> Result<Conn, StoreError> {
        self.conn_within(what, self.timeouts.pool + self.timeouts.connect).await
    }

    /// The builder's first connection, within the connect timeout: the pool is new, so there
    /// is no connection to wait for, only one to open.
    async fn first_conn(&self, what: &str) -> Result<Conn, StoreError> {
        self.conn_within(what, self.timeouts.connect).await
    }

    async fn conn_within(&self, what: &str, bound: Duration) -> Result<Conn, StoreError> {
        match timeout(bound, self.pool.get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(db_error(e, what, &self.target)),
            Err(_) => Err(no_connection(what, &self.target)),
        }
    }

    /// Creates or upgrades the schema; run once, by the builder.
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        const WHAT: &str = "migrating the schema";
        let mut conn = self.first_conn(WHAT).await?;
        // DDL and the lock wait may take longer than a statement: bounded by the lock wait.
        let bound = self.timeouts.statement.max(Duration::from_secs(60));
        timeout(bound, migrate::migrate(&mut conn, &self.prefix, &self.target))
            .await
            .unwrap_or_else(|_| Err(statement_timed_out(WHAT, &self.target)))
    }

    /// Checks that the schema is current without writing anything; run once, by the builder.
    pub(crate) async fn check_schema(&self) -> Result<(), StoreError> {
        const WHAT: &str = "checking the schema";
        let mut conn = self.first_conn(WHAT).await?;
        timeout(
            self.timeouts.statement,
            migrate::check(&mut conn, &self.prefix, &self.target),
        )
        .await
        .unwrap_or_else(|_| Err(statement_timed_out(WHAT, &self.target)))
    }

    /// The server's `max_allowed_packet`; run once, by the builder.
    pub(crate) async fn read_max_packet(&self) -> Result<usize, StoreError> {
        const WHAT: &str = "reading max_allowed_packet";
        let rows = self.query(WHAT, "SELECT @@max_allowed_packet", Vec::new()).await?;
        rows.first()
            .and_then(|row| row.get::<u64, _>(0))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| StoreError::new(StoreErrorKind::Other, format!("{WHAT} on {}: no value", self.target)))
    }

    /// Runs one prepared statement: the only way this store talks to the server, so every
    /// operation is exactly one round trip (plus the prepare, once per connection; a commit
    /// whose batch is too large for one parameter stages it first, see [`send`]).
    async fn query(&self, what: &str, statement: &str, params: Vec<Value>) -> Result<Vec<Row>, StoreError> {
        self.run(what, statement, params, Staging::NONE)
            .await
            .map_err(|failed| failed.error)
    }

    /// Runs one prepared statement that returns no rows, within the statement timeout;
    /// answers its affected rows (rows matched, for an `UPDATE`: see the builder).
    async fn execute(&self, what: &str, statement: &str, params: Vec<Value>) -> Result<u64, StoreError> {
        let mut conn = self.conn(what).await?;
        let run = async {
            conn.exec_drop(statement, params_of(params)).await?;
            Ok::<_, mysql_async::Error>(conn.affected_rows())
        };
        match timeout(self.timeouts.statement, run).await {
            Ok(result) => result.map_err(|e| db_error(e, what, &self.target)),
            Err(_) => Err(statement_timed_out(what, &self.target)),
        }
    }

    /// [`query`](Self::query), telling a statement that may have been applied from one that
    /// was not; a commit's `staged` chunks (see [`CommitParams`]) are staged first.
    async fn run(
        &self,
        what: &str,
        statement: &str,
        params: Vec<Value>,
        staged: Staging<'_>,
    ) -> Result<Vec<Row>, Failed> {
        let mut conn = self.conn(what).await.map_err(|error| Failed {
            maybe_applied: false,
            error,
        })?;
        match timeout(
            self.bound(staged),
            send(&mut conn, &self.sql, statement, params, staged),
        )
        .await
        {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(Failed {
                // A server error means the statement did not apply; a lost connection may
                // have lost only the answer.
                maybe_applied: connection_lost(&e),
                error: db_error(e, what, &self.target),
            }),
            // The connection goes back to the pool, which reads and discards the late answer
            // (or drops the connection) before handing it out again.
            Err(_) => Err(Failed {
                maybe_applied: true,
                error: statement_timed_out(what, &self.target),
            }),
        }
    }

    /// Sends a commit whose first send got no answer once more, on a new connection of its
    /// own (a pooled one may be as broken as the one just lost), within the connect timeout
    /// plus the statement timeout; its result rows. Its row lock makes it read the newest
    /// committed row, so one send tells applied from conflict. A conversation's commit and a
    /// user's facts commit are resent alike.
    async fn resend_commit(
        &self,
        statement: &str,
        values: Vec<Value>,
        staging: Staging<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        const WHAT: &str = "resending a commit";
        let mut conn = match timeout(self.timeouts.connect, Conn::new(self.opts.clone())).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(db_error(e, WHAT, &self.target)),
            Err(_) => return Err(no_connection(WHAT, &self.target)),
        };
        let sent = timeout(
            self.bound(staging),
            send(&mut conn, &self.sql, statement, values, staging),
        )
        .await;
        // Closed in the background: a silent server must not hold the caller.
        tokio::spawn(async move {
            let _ = timeout(Duration::from_secs(1), conn.disconnect()).await;
        });
        match sent {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(db_error(e, WHAT, &self.target)),
            Err(_) => Err(statement_timed_out(WHAT, &self.target)),
        }
    }

    /// Refuses parameters that would make a packet over the server's `max_allowed_packet`,
    /// with what to do, rather than sending them for the server to drop the connection
    /// (which reads as an outage whose outcome is unknown).
    fn check_packet(&self, what: &str, values: &[Value], advice: &str) -> Result<(), StoreError> {
        let size = values_len(values) + PACKET_OVERHEAD;
        if size > self.max_packet {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "{what} on {}: too large for the server: a packet of {size} bytes is over its \
                     max_allowed_packet of {} bytes; raise max_allowed_packet or {advice}",
                    self.target, self.max_packet
                ),
            ));
        }
        Ok(())
    }
}

/// What a statement's packet holds besides its parameters' bytes (header, statement id,
/// parameter types, length prefixes), rounded up.
const PACKET_OVERHEAD: usize = 1024;

/// The `DATETIME` range in microseconds from the epoch: 1000-01-01 and 9999-12-31
/// 23:59:59.999999.
const MIN_DATETIME_MICROS: i64 = -30_610_224_000_000_000;
const MAX_DATETIME_MICROS: i64 = 253_402_300_799_999_999;

impl MysqlStore {
    /// The id in column 0 of a listed row.
    fn listed_id(&self, row: &Row) -> Result<ConversationId, StoreError> {
        let bytes: Vec<u8> = row
            .get_opt(0)
            .and_then(Result::ok)
            .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "reading a listed conversation id"))?;
        String::from_utf8(bytes)
            .ok()
            .and_then(|text| ConversationId::new(text).ok())
            .ok_or_else(|| {
                StoreError::new(
                    StoreErrorKind::Corrupt,
                    format!("a conversation id in {}_conversations is not a valid id", self.prefix),
                )
            })
    }

    /// How long the client waits for one operation: the statement timeout per statement.
    fn bound(&self, staged: Staging<'_>) -> Duration {
        let statements = staged.statements();
        self.timeouts
            .statement
            .saturating_mul(u32::try_from(statements).unwrap_or(u32::MAX))
    }
}

/// What a commit stages before its call: the chunks of its messages and of its index
/// entries too large for one parameter (see [`CommitParams`]); none for every other statement.
#[derive(Debug, Clone, Copy)]
struct Staging<'a> {
    messages: &'a [String],
    index: &'a [String],
}

impl Staging<'_> {
    const NONE: Staging<'static> = Staging {
        messages: &[],
        index: &[],
    };

    /// The statements sent: the call, and per staged table its drop and create before, its
    /// chunks, and its drop after.
    fn statements(&self) -> usize {
        let table = |chunks: &[String]| if chunks.is_empty() { 0 } else { chunks.len() + 3 };
        1 + table(self.messages) + table(self.index)
    }
}

impl CommitParams {
    fn staging(&self) -> Staging<'_> {
        Staging {
            messages: &self.staged,
            index: &self.staged_index,
        }
    }
}

/// Sends one statement on `conn`. A commit with staged chunks first makes the connection's
/// temporary tables afresh and fills them (one statement per chunk), and drops them after
/// the call.
async fn send(
    conn: &mut Conn,
    sql: &Statements,
    statement: &str,
    params: Vec<Value>,
    staged: Staging<'_>,
) -> Result<Vec<Row>, mysql_async::Error> {
    let tables = [
        (staged.messages, &sql.stage_drop, &sql.stage_create, &sql.stage_insert),
        (
            staged.index,
            &sql.stage_index_drop,
            &sql.stage_index_create,
            &sql.stage_index_insert,
        ),
    ];
    for (chunks, drop, create, insert) in tables {
        if chunks.is_empty() {
            continue;
        }
        conn.query_drop(drop.as_str()).await?;
        conn.query_drop(create.as_str()).await?;
        for chunk in chunks {
            conn.exec_drop(insert.as_str(), (chunk.as_bytes(),)).await?;
        }
    }
    let rows = conn.exec(statement, params_of(params)).await?;
    for (chunks, drop, _, _) in tables {
        if !chunks.is_empty() {
            conn.query_drop(drop.as_str()).await?;
        }
    }
    Ok(rows)
}

fn params_of(values: Vec<Value>) -> Params {
    if values.is_empty() {
        Params::Empty
    } else {
        Params::Positional(values)
    }
}

/// Reads the procedure's result row: (applied, version). Applied by this call or by an
/// earlier send of the same commit: `Some` of the version it made. Not applied (a lost
/// version check): `None`.
fn commit_outcome(id: &ConversationId, rows: &[Row]) -> Result<Option<u64>, StoreError> {
    let read = Reader {
        id,
        what: "the commit result",
    };
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the commit procedure returned no row"))?;
    if read.get::<i64>(row, 0)? == 1 {
        return read
            .counter(read.get::<Option<i64>>(row, 1)?, "the new version")
            .map(Some);
    }
    Ok(None)
}

#[async_trait]
impl Store for MysqlStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let key = Value::Bytes(id.as_str().as_bytes().to_vec());
        let rows = self
            .query("loading a conversation", &self.sql.load, vec![key.clone(), key])
            .await?;
        load_snapshot(id, &rows, &COLUMNS)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        const WHAT: &str = "committing to a conversation";
        let params = commit_params(id, &commit)?;
        // Refused here, with what to do, rather than sent for the server to drop the
        // connection (which reads as an outage whose outcome is unknown).
        let largest = params.largest_packet() + PACKET_OVERHEAD;
        if largest > self.max_packet {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "{WHAT} on {}: too large for the server: a packet of {largest} bytes (the messages as \
                     stored JSON) is over its max_allowed_packet of {} bytes; raise max_allowed_packet \
                     or store smaller messages",
                    self.target, self.max_packet
                ),
            )
            .for_conversation(id));
        }
        let outcome = match self
            .run(WHAT, &self.sql.commit, params.values.clone(), params.staging())
            .await
        {
            Ok(rows) => commit_outcome(id, &rows)?,
            Err(failed) if failed.maybe_applied => {
                // The commit may have landed with only its answer lost: the token makes the
                // same call, sent again, answer with the version it made.
                tracing::debug!(server = %self.target, error = %failed.error, "no answer to a commit; resending it once");
                let rows = self
                    .resend_commit(&self.sql.commit, params.values.clone(), params.staging())
                    .await
                    .map_err(|e| outcome_unknown(e, WHAT, &self.target))?;
                commit_outcome(id, &rows)?
            }
            Err(failed) => return Err(failed.error),
        };
        outcome.ok_or_else(StoreError::conflict)
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        let params = vec![
            Value::Bytes(id.as_str().as_bytes().to_vec()),
            Value::Int(after),
            Value::UInt(limit),
        ];
        let rows = self
            .query("reading a conversation's history", &self.sql.history, params)
            .await?;
        history_messages(id, &rows, &COLUMNS)
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let key = Value::Bytes(id.as_str().as_bytes().to_vec());
        let rows = self
            .query("clearing a conversation", &self.sql.clear, vec![key])
            .await?;
        let read = Reader {
            id,
            what: "the clear result",
        };
        match rows.first() {
            Some(row) => Ok(read.get::<Option<i64>>(row, 0)?.unwrap_or(0) == 1),
            None => Ok(false),
        }
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        let limit = limit.max(1);
        let fetch = u64::try_from(limit.saturating_add(1)).unwrap_or(u64::MAX);
        let after = after.map_or(&b""[..], |a| a.as_str().as_bytes()).to_vec();
        let rows = self
            .query(
                "listing conversations",
                &self.sql.list,
                vec![Value::Bytes(after), Value::UInt(fetch)],
            )
            .await?;
        let ids = rows.iter().map(|row| self.listed_id(row)).collect::<Result<_, _>>()?;
        Ok(Page::from_overfetch(ids, limit))
    }

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit);
        let limit = limit.max(1);
        let fetch = u64::try_from(limit.saturating_add(1)).unwrap_or(u64::MAX);
        // A cursor past the last DATETIME comes after every row; one before the first, before
        // none (their times would not convert).
        let before = match before {
            Some(c) if c.updated_micros < MIN_DATETIME_MICROS => return Ok(RecentPage::default()),
            Some(c) if c.updated_micros > MAX_DATETIME_MICROS => None,
            before => before,
        };
        let (flag, micros, after) = before.map_or((0, 0, Vec::new()), |c| {
            (1, c.updated_micros, c.id.as_str().as_bytes().to_vec())
        });
        let params = vec![
            Value::Bytes(like_prefix(prefix).into_bytes()),
            Value::Int(flag),
            Value::Int(micros),
            Value::Int(micros),
            Value::Bytes(after),
            Value::UInt(fetch),
        ];
        let rows = self
            .query("listing conversations by recency", &self.sql.recent, params)
            .await?;
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            let id = self.listed_id(row)?;
            let read = Reader {
                id: &id,
                what: "a conversation listed by recency",
            };
            let (updated_micros, expires_micros) = (read.get(row, 1)?, read.get(row, 2)?);
            found.push(RecentConversation {
                id,
                updated_micros,
                expires_micros,
            });
        }
        Ok(RecentPage::from_overfetch(found, limit))
    }

    fn searches(&self) -> bool {
        true
    }

    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        let mut search = search::prepare(id, query)?;
        let statement = match search.statement {
            search::Statement::Slotted(i) => &self.sql.search[i],
            search::Statement::Any => &self.sql.search_any,
        };
        let lexical = self.query(
            "searching a conversation",
            statement,
            std::mem::take(&mut search.params),
        );
        let Some(vector) = &query.vector else {
            return search.result(id, &lexical.await?);
        };
        // Both statements at once, each on its own connection: one round trip's wait.
        let by_vector = self.query(
            "searching a conversation's vectors",
            &self.sql.vector_search,
            vectors::search_params(id, vector, query.before),
        );
        let (lexical, by_vector) = tokio::join!(lexical, by_vector);
        let found = search.result(id, &lexical?)?;
        Ok(found.with_vector_hits(vectors::hits(id, &by_vector?, vector, query.limit)?))
    }

    fn keeps_vectors(&self) -> bool {
        true
    }

    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        const WHAT: &str = "storing vectors";
        let Some(params) = vectors::target_params(id, vectors)? else {
            return Ok(0);
        };
        let rows = self
            .query("reading messages to embed", &self.sql.vector_targets, params)
            .await?;
        let Some(params) = vectors::put_params(id, &rows, vectors)? else {
            return Ok(0);
        };
        self.check_packet(WHAT, &params, "store fewer vectors at once")?;
        let written = self.execute(WHAT, &self.sql.vector_put, params).await?;
        Ok(usize::try_from(written).unwrap_or(usize::MAX))
    }

    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        let Some(params) = vectors::unembedded_params(id, model, dim, after, limit) else {
            return Ok(Vec::new());
        };
        let rows = self
            .query("listing messages without vectors", &self.sql.unembedded, params)
            .await?;
        vectors::unembedded(id, &rows)
    }

    fn keeps_facts(&self) -> bool {
        true
    }

    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        let key = facts::user_key(user);
        let rows = self
            .query("loading a user's facts", &self.sql.facts_load, vec![key.clone(), key])
            .await?;
        facts::stored_facts(user, &rows)
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        const WHAT: &str = "committing a user's facts";
        let values = facts::commit_params(user, &commit)?;
        self.check_packet(WHAT, &values, "keep fewer or shorter facts")?;
        let statement = &self.sql.facts_commit;
        let outcome = match self.run(WHAT, statement, values.clone(), Staging::NONE).await {
            Ok(rows) => facts::commit_outcome(user, &rows)?,
            Err(failed) if failed.maybe_applied => {
                // As for a conversation's commit: the token makes the same call, sent again,
                // answer with the version it made.
                tracing::debug!(server = %self.target, error = %failed.error, "no answer to a facts commit; resending it once");
                let rows = self
                    .resend_commit(statement, values, Staging::NONE)
                    .await
                    .map_err(|e| outcome_unknown(e, WHAT, &self.target))?;
                facts::commit_outcome(user, &rows)?
            }
            Err(failed) => return Err(failed.error),
        };
        outcome.ok_or_else(StoreError::facts_conflict)
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        // No fact has an id beyond a BIGINT.
        let Ok(id) = i64::try_from(fact) else {
            return Ok(Vec::new());
        };
        let rows = self
            .query(
                "reading a fact's history",
                &self.sql.fact_history,
                vec![facts::user_key(user), Value::Int(id)],
            )
            .await?;
        facts::history(user, &rows, fact)
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        let deleted = self
            .execute(
                "forgetting a user's facts",
                &self.sql.facts_forget,
                vec![facts::user_key(user)],
            )
            .await?;
        Ok(deleted > 0)
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.execute("purging expired conversations", &self.sql.purge, Vec::new())
            .await
    }
}
