//! [`PostgresStore`]: the connection pool and the [`Store`] operations, each one statement.

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::tokio_postgres::types::{ToSql, Type};
use deadpool_postgres::tokio_postgres::{Config, NoTls, Row};
use deadpool_postgres::{Object, Pool};
use tokio::time::timeout;

use chatmem::facts::{FactChange, UserId};
use chatmem::recall::{IndexedMessage, MAX_POSTINGS_PER_TERM, MessageVector, Vector, VectorHit, rank_by_similarity};
use chatmem::store::{
    Commit, FactsCommit, LexicalHit, RecentConversation, RecentPage, RecentQuery, SearchQuery, SearchResult, Snapshot,
    StoreError, StoreErrorKind, StoredFacts, StoredMessage, unix_micros,
};
use chatmem::{ConversationId, Page, Store};
use chatmem_sql::{Timeouts, history_messages, load_snapshot, outcome_unknown, statement_timed_out};

use crate::builder::PostgresStoreBuilder;
use crate::error::{connection_lost, db_error, pool_error};
use crate::facts::{self, FactsParams};
use crate::migrate;
use crate::params::{CommitParams, cursor_time, token_bits};
use crate::rows::{COLUMNS, Column, Reader};
use crate::sql::{Statement, Statements};

/// The schema version this crate writes; a database at a higher one is refused with
/// [`StoreErrorKind::SchemaTooNew`].
pub const SCHEMA_VERSION: i32 = migrate::LATEST;

/// How much longer than the server's `statement_timeout` the client waits for an answer.
/// With both at the same length, the client could give up first on a statement still waiting
/// for a row lock, and the server then apply it once the lock came free: a commit reported as
/// failed that lands later. Waiting a little longer lets the server's own cancel
/// (SQLSTATE 57014: not applied) arrive first whenever the server is alive; the client's
/// timer is for a server that does not answer at all.
const SERVER_ANSWERS_FIRST: Duration = Duration::from_millis(250);

/// Conversations in PostgreSQL.
///
/// Made by [`PostgresStore::connect`] or [`PostgresStore::builder`]; cheap to share behind
/// an `Arc` (it holds a connection pool). Every operation is one parameterised statement
/// (one round trip), bounded by the configured timeouts: at most the pool timeout (plus the
/// connect timeout when a connection has to be opened) and then the statement timeout. An
/// unreachable or silent server gives [`StoreErrorKind::Unavailable`], and the store
/// recovers once the server is back. A commit that got no answer is sent once more, on a
/// new connection, before it fails (see [*Outages*](crate#outages)).
///
/// Layout, per schema: `chatmem_conversations` (one row per conversation: version, system
/// message, window start, next sequence, expiry, when the last commit landed, the last
/// commit's token, the summary) and
/// `chatmem_messages` (conversation id, sequence, token count and the counter that made it,
/// the message JSON as text), and the lexical index it [searches](Store::search)
/// (`chatmem_postings`, `chatmem_removed_postings`; see [*Recall*](crate#recall)), and users'
/// facts (`chatmem_fact_users`, `chatmem_facts`, `chatmem_fact_history`; see
/// [*Facts*](crate#facts)); see [*Data layout*](crate#data-layout). Expired conversations read
/// as absent and are deleted by [`Store::purge_expired`], their index with them.
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: Pool,
    /// What the pool connects with, for the one-off connection a commit is resent on.
    pub(crate) config: std::sync::Arc<Config>,
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
    /// How long the client waits for a statement's answer: the server's statement timeout,
    /// then [`SERVER_ANSWERS_FIRST`].
    fn answer_wait(&self) -> Duration {
        self.timeouts.statement.saturating_add(SERVER_ANSWERS_FIRST)
    }

    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`, or the
    /// `key=value` form) with the default settings, creating the schema if needed (see
    /// [`PostgresStoreBuilder::migrate`] to connect without).
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
            self.answer_wait(),
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

    /// Checks that the schema is current without writing anything (see
    /// [`PostgresStoreBuilder::migrate`]), within the statement timeout; run once, by the
    /// builder.
    pub(crate) async fn check_schema(&self, quoted: &str) -> Result<(), StoreError> {
        const WHAT: &str = "checking the schema";
        let client = self.pool.get().await.map_err(|e| pool_error(e, WHAT, &self.target))?;
        match timeout(
            self.answer_wait(),
            migrate::check(&client, &self.schema, quoted, &self.target),
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

    /// Runs one statement with `values` bound to its parameters: the only way this store
    /// talks to the server, so every operation is exactly one round trip (the statement was
    /// prepared when the pooled connection opened; only Bind/Execute/Sync are sent).
    ///
    /// Getting the connection is bounded by the pool's own timeouts (pool wait, connect).
    async fn query(
        &self,
        what: &str,
        statement: &Statement,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.run(what, statement, values).await.map_err(|failed| failed.error)
    }

    /// [`query`](Self::query), telling a statement that may have been applied from one that
    /// was not.
    async fn run(&self, what: &str, statement: &Statement, values: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Failed> {
        let client = self.pool.get().await.map_err(|e| Failed {
            // No connection, nothing sent.
            maybe_applied: false,
            error: pool_error(e, what, &self.target),
        })?;
        let sent = async {
            // A cache hit (prepared when the connection opened) sends nothing.
            let prepared = client
                .prepare_typed_cached(&statement.text, statement.types)
                .await
                .map_err(|e| (e, false))?;
            client.query(&prepared, values).await.map_err(|e| (e, true))
        };
        match timeout(self.answer_wait(), sent).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err((e, false))) => Err(Failed {
                // Preparing failed: nothing was run.
                maybe_applied: false,
                error: db_error(e, what, &self.target),
            }),
            Ok(Err((e, _))) => Err(Failed {
                // The server's own error (a SQLSTATE) means the statement did not apply; a
                // lost connection may have lost only the answer.
                maybe_applied: connection_lost(&e),
                error: db_error(e, what, &self.target),
            }),
            Err(_) => {
                // The connection may still be waiting for the answer: close it rather
                // than hand it to the next caller.
                drop(Object::take(client));
                Err(Failed {
                    maybe_applied: true,
                    error: statement_timed_out(what, &self.target),
                })
            }
        }
    }

    /// Sends a commit whose first send got no answer once more, on a new connection of its
    /// own (a pooled one may be as broken as the one just lost): at most the connect
    /// timeout to open it, then the statement timeout for what it sends. The connection is
    /// closed afterwards; it is not counted in the pool size.
    ///
    /// Usually one statement. When its version check read a snapshot taken before a
    /// commit that landed while it waited for the row (possibly the first send, still
    /// running on the server when its answer was given up), it sends the statement once
    /// more to read that commit.
    ///
    /// `read` reads the statement's result row: a conversation's commit and a user's facts
    /// commit are resent alike.
    async fn resend_commit(
        &self,
        statement: &Statement,
        values: &[&(dyn ToSql + Sync)],
        read: impl Fn(&[Row]) -> Result<Outcome, StoreError>,
    ) -> Result<Outcome, StoreError> {
        // A connection of its own, used once: sent unprepared (parsed with the same types).
        let params: Vec<(&(dyn ToSql + Sync), Type)> =
            values.iter().copied().zip(statement.types.iter().cloned()).collect();
        const WHAT: &str = "resending a commit";
        let (client, connection) = match timeout(self.timeouts.connect, self.config.connect(NoTls)).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(db_error(e, WHAT, &self.target)),
            Err(_) => {
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!(
                        "{WHAT} on {}: connecting took longer than the connect timeout",
                        self.target
                    ),
                ));
            }
        };
        // The connection runs beside the statements and ends once the client is dropped.
        let connection = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "the connection of a resent commit failed");
            }
        });
        let sends = async {
            let mut outcome = Outcome::Conflict { stale: true };
            for _ in 0..2 {
                let rows = client
                    .query_typed(&statement.text, &params)
                    .await
                    .map_err(|e| db_error(e, WHAT, &self.target))?;
                outcome = read(&rows)?;
                if outcome != (Outcome::Conflict { stale: true }) {
                    break;
                }
            }
            Ok(outcome)
        };
        let result = timeout(self.answer_wait(), sends).await;
        drop(client);
        result.unwrap_or_else(|_| {
            // A silent server would keep the connection task waiting: stop it.
            connection.abort();
            Err(statement_timed_out(WHAT, &self.target))
        })
    }

    /// A conversation id read back from a listing; one that is not a valid id is corrupt.
    fn listed_id(&self, text: &str) -> Result<ConversationId, StoreError> {
        ConversationId::new(text).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("conversation id {text:?} in {} is not a valid id", self.schema),
            )
            .with_source(e)
        })
    }
}

/// A statement that failed, and whether it may have been applied all the same.
struct Failed {
    /// Sent, but the connection was lost or no answer came within the statement timeout.
    maybe_applied: bool,
    error: StoreError,
}

/// What a commit statement's result row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Applied, by this statement or by an earlier send of the same commit (recognised by
    /// its token); the version it made.
    Applied(u64),
    /// The version check failed, nothing was written. `stale`: the statement's snapshot
    /// still showed the expected version (or, for a create, no conversation), so a commit
    /// landed while the statement waited for the row.
    Conflict { stale: bool },
}

/// Reads the result row of a commit statement (see `sql::COMMIT_RESULT`).
fn commit_outcome(id: &ConversationId, rows: &[Row], commit: &Commit) -> Result<Outcome, StoreError> {
    let read = Reader {
        id,
        what: "the commit result",
    };
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the commit statement returned no row"))?;
    let new = read
        .get::<Option<i64>>(row, 0)?
        .map(|version| read.counter(Some(version), "the new version"))
        .transpose()?;
    // No live conversation reads as version 0, as a load would.
    let current = read.counter(Some(read.get::<Option<i64>>(row, 1)?.unwrap_or(0)), "version")?;
    let token = read.get::<Option<i64>>(row, 2)?;
    Ok(outcome(new, current, token, commit.expected_version(), commit.token()))
}

/// What a commit statement's result says (the new version `new`; else the current version
/// and token), for a commit that expected version `expected` and has token `own`.
fn outcome(new: Option<u64>, current: u64, token: Option<i64>, expected: u64, own: u64) -> Outcome {
    if let Some(version) = new {
        return Outcome::Applied(version);
    }
    if current.checked_sub(1) == Some(expected) && token == Some(token_bits(own)) {
        // This very commit was applied by an earlier send whose answer was lost.
        return Outcome::Applied(current);
    }
    Outcome::Conflict {
        stale: current == expected,
    }
}

/// Reads the rows of the search statement (see `sql::SEARCH`) for a query of `terms` terms.
/// The best `limit` of a vector search's candidate rows, ranked by the core's rule.
fn vector_hits(id: &ConversationId, rows: &[Row], query: &Vector, limit: usize) -> Result<Vec<VectorHit>, StoreError> {
    let read = Reader {
        id,
        what: "a vector search row",
    };
    let mut candidates = Vec::with_capacity(rows.len());
    let mut values: Vec<f32> = Vec::with_capacity(query.dim());
    for (i, row) in rows.iter().enumerate() {
        let seq: i64 = read.get(row, 0)?;
        let bytes: &[u8] = read.get(row, 5)?;
        values.clear();
        values.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        candidates.push((u64::try_from(seq).unwrap_or(0), query.dot(&values), i));
    }
    let best = rank_by_similarity(candidates.iter().map(|&(seq, sim, _)| (seq, sim)), limit);
    best.into_iter()
        .map(|(seq, similarity)| {
            let at = candidates
                .iter()
                .find(|c| c.0 == seq)
                .map(|c| c.2)
                .ok_or_else(|| StoreError::corrupt(id, "a ranked vector lost its row"))?;
            let row = &rows[at];
            let json: &str = read.get(row, 2)?;
            let message = read.message(read.get(row, 0)?, read.get(row, 1)?, json.as_bytes(), read.get(row, 3)?)?;
            let when: Option<SystemTime> = read.get(row, 4)?;
            Ok(VectorHit::new(message, when.map_or(0, unix_micros), similarity))
        })
        .collect()
}

fn search_result(id: &ConversationId, rows: &[Row], terms: usize) -> Result<SearchResult, StoreError> {
    let read = Reader {
        id,
        what: "a search result row",
    };
    let mut totals = None;
    let mut df = vec![0; terms];
    let mut hits: Vec<(f64, LexicalHit)> = Vec::new();
    // A term's position (from 1) in the query, as a vector index.
    let position = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .filter(|&i| i < terms)
            .ok_or_else(|| StoreError::corrupt(id, format!("a search row names query term {i} of {terms}")))
    };
    for row in rows {
        let a = read.get::<Option<i64>>(row, 1)?;
        let b = read.get::<Option<i64>>(row, 2)?;
        match read.get::<i32>(row, 0)? {
            0 => totals = Some((read.counter(a, "indexed_docs")?, read.counter(b, "indexed_len")?)),
            1 => df[position(read.not_null(a, 1)?)?] = read.counter(b, "df")?,
            _ => {
                let seq = read.not_null(a, 1)?;
                let len = u32::try_from(read.not_null(b, 2)?)
                    .map_err(|_| StoreError::corrupt(id, format!("message {seq} has an index length beyond u32")))?;
                let json: &str = read.not_null(read.get(row, 4)?, 4)?;
                let message = read.message(
                    seq,
                    read.not_null(read.get(row, 3)?, 3)?,
                    json.as_bytes(),
                    read.get(row, 5)?,
                )?;
                let at: SystemTime = read.not_null(read.get(row, 6)?, 6)?;
                let positions: Vec<i64> = read.not_null(read.get(row, 7)?, 7)?;
                let counts: Vec<i64> = read.not_null(read.get(row, 8)?, 8)?;
                let mut tf = vec![0; terms];
                for (i, count) in positions.into_iter().zip(counts) {
                    tf[position(i)?] = u32::try_from(count)
                        .map_err(|_| StoreError::corrupt(id, format!("message {seq} has a term count beyond u32")))?;
                }
                let score: f64 = read.not_null(read.get(row, 9)?, 9)?;
                hits.push((score, LexicalHit::new(message, unix_micros(at), len, tf)));
            }
        }
    }
    let Some((docs, total_len)) = totals else {
        return Ok(SearchResult::default());
    };
    hits.sort_by(|(a, x), (b, y)| b.total_cmp(a).then(y.message.seq.cmp(&x.message.seq)));
    Ok(SearchResult::new(
        docs,
        total_len,
        df,
        hits.into_iter().map(|(_, hit)| hit).collect(),
    ))
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let rows = self
            .query("loading a conversation", &self.sql.load, &[&id.as_str()])
            .await?;
        load_snapshot(id, &rows, &COLUMNS)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        const WHAT: &str = "committing to a conversation";
        let p = CommitParams::new(&commit)?;
        // A commit that neither indexes nor deletes leaves the index alone: the shorter
        // statement, which costs what a commit cost before there was an index.
        let (statement, params) = if commit.expected_version() == 0 {
            (&self.sql.commit_create, 21)
        } else if commit.index().is_empty() && commit.delete_below().is_none() {
            (&self.sql.commit_update_plain, 16)
        } else {
            (&self.sql.commit_update, 21)
        };
        let id_text = id.as_str();
        let values: [&(dyn ToSql + Sync); 21] = [
            &id_text,
            &p.expected,
            &p.system_seq,
            &p.system_tokens,
            &p.system_json,
            &p.window_start,
            &p.next_seq,
            &p.delete_below,
            &p.ttl_micros,
            &p.seqs,
            &p.tokens,
            &p.jsons,
            &p.token,
            &p.system_counted_by,
            &p.counted_by,
            &p.summary,
            &p.index_lens,
            &p.posting_terms,
            &p.posting_seqs,
            &p.posting_tfs,
            &p.posting_lens,
        ];
        let values = &values[..params];
        let outcome = match self.run(WHAT, statement, values).await {
            Ok(rows) => commit_outcome(id, &rows, &commit)?,
            Err(failed) if failed.maybe_applied => {
                // The commit may have landed with only its answer lost: the token makes the
                // same statement, sent again, answer with the version it made.
                tracing::debug!(server = %self.target, error = %failed.error, "no answer to a commit; resending it once");
                self.resend_commit(statement, values, |rows| commit_outcome(id, rows, &commit))
                    .await
                    .map_err(|e| outcome_unknown(e, WHAT, &self.target))?
            }
            Err(failed) => return Err(failed.error),
        };
        match outcome {
            Outcome::Applied(version) => Ok(version),
            Outcome::Conflict { .. } => Err(StoreError::conflict()),
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
                &[&id.as_str(), &after, &limit],
            )
            .await?;
        history_messages(id, &rows, &COLUMNS)
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let rows = self
            .query("clearing a conversation", &self.sql.clear, &[&id.as_str()])
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
            .query("listing conversations", &self.sql.list, &[&after, &fetch])
            .await?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: &str = row.try_get(0).map_err(|e| {
                StoreError::new(StoreErrorKind::Other, "reading a listed conversation id").with_source(e)
            })?;
            ids.push(self.listed_id(text)?);
        }
        Ok(Page::from_overfetch(ids, limit))
    }

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit);
        const WHAT: &str = "listing conversations by recency";
        // No id holds NUL, which PostgreSQL's text cannot bind.
        if prefix.contains('\0') {
            return Ok(RecentPage::default());
        }
        let limit = limit.max(1);
        let fetch = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let end = chatmem::store::prefix_end(prefix);
        let (before_at, before_id) = (
            before.map(|c| cursor_time(c.updated_micros)),
            before.map(|c| c.id.as_str()),
        );
        let rows = self
            .query(WHAT, &self.sql.recent, &[&prefix, &end, &before_at, &before_id, &fetch])
            .await?;
        let unreadable = |e| StoreError::new(StoreErrorKind::Other, "reading a listed conversation").with_source(e);
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: &str = row.try_get(0).map_err(unreadable)?;
            let updated: SystemTime = row.try_get(1).map_err(unreadable)?;
            let expires: Option<SystemTime> = row.try_get(2).map_err(unreadable)?;
            found.push(RecentConversation {
                id: self.listed_id(text)?,
                updated_micros: unix_micros(updated),
                expires_micros: expires.map(unix_micros),
            });
        }
        Ok(RecentPage::from_overfetch(found, limit))
    }

    fn searches(&self) -> bool {
        true
    }

    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        // PostgreSQL's text cannot hold NUL, and no indexed term does: such a term is a NULL,
        // which matches nothing.
        let terms: Vec<Option<&str>> = query
            .terms
            .iter()
            .map(|t| (!t.contains('\0')).then_some(t.as_str()))
            .collect();
        let before = i64::try_from(query.before).unwrap_or(i64::MAX);
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let per_term = i64::try_from(MAX_POSTINGS_PER_TERM).unwrap_or(i64::MAX);
        let key = id.as_str();
        let lexical_values: [&(dyn ToSql + Sync); 5] = [&key, &terms, &before, &limit, &per_term];
        let lexical = self.query("searching a conversation", &self.sql.search, &lexical_values);
        let Some(vector) = &query.vector else {
            return search_result(id, &lexical.await?, terms.len());
        };
        // Both statements at once, each on its own connection: one round trip's wait.
        let bytes = i32::try_from(vector.dim() * 4).unwrap_or(i32::MAX);
        let model = vector.model();
        let vector_values: [&(dyn ToSql + Sync); 4] = [&key, &before, &model, &bytes];
        let by_vector = self.query(
            "searching a conversation's vectors",
            &self.sql.vector_search,
            &vector_values,
        );
        let (lexical, by_vector) = tokio::join!(lexical, by_vector);
        let found = search_result(id, &lexical?, terms.len())?;
        Ok(found.with_vector_hits(vector_hits(id, &by_vector?, vector, query.limit)?))
    }

    fn keeps_vectors(&self) -> bool {
        true
    }

    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        let seqs: Vec<i64> = vectors.iter().filter_map(|v| i64::try_from(v.seq).ok()).collect();
        if seqs.is_empty() {
            return Ok(0);
        }
        let rows = self
            .query(
                "reading messages to embed",
                &self.sql.vector_targets,
                &[&id.as_str(), &seqs],
            )
            .await?;
        let read = Reader {
            id,
            what: "a message to embed",
        };
        let (mut put_seqs, mut jsons, mut values) = (Vec::new(), Vec::new(), Vec::new());
        let mut model: Option<&str> = None;
        for row in &rows {
            let seq: i64 = read.get(row, 0)?;
            let json: &str = read.get(row, 2)?;
            let message = read.message(seq, read.get(row, 1)?, json.as_bytes(), read.get(row, 3)?)?;
            for v in vectors.iter().filter(|v| v.fits(&message)) {
                // One model a call: a vector of another is left for its own call.
                if *model.get_or_insert(v.vector.model()) != v.vector.model() {
                    continue;
                }
                put_seqs.push(seq);
                jsons.push(json.to_owned());
                values.push(v.vector.to_bytes());
            }
        }
        let Some(model) = model else { return Ok(0) };
        let written = self
            .query(
                "storing vectors",
                &self.sql.vector_put,
                &[&id.as_str(), &put_seqs, &jsons, &model, &values],
            )
            .await?;
        let mut kept = written.len();
        let others: Vec<MessageVector> = vectors.iter().filter(|v| v.vector.model() != model).cloned().collect();
        if !others.is_empty() {
            kept += Box::pin(self.put_vectors(id, &others)).await?;
        }
        Ok(kept)
    }

    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        let Ok(after) = i64::try_from(after) else {
            return Ok(Vec::new());
        };
        let bytes = i32::try_from(dim * 4).unwrap_or(i32::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "listing messages without vectors",
                &self.sql.unembedded,
                &[&id.as_str(), &after, &model, &bytes, &limit],
            )
            .await?;
        let read = Reader {
            id,
            what: "a message without a vector",
        };
        rows.iter()
            .map(|row| {
                let seq: i64 = read.get(row, 0)?;
                let json: &str = read.get(row, 2)?;
                let message = read.message(seq, read.get(row, 1)?, json.as_bytes(), read.get(row, 3)?)?;
                let at: Option<SystemTime> = read.get(row, 4)?;
                Ok(IndexedMessage::new(message, at.map_or(0, unix_micros)))
            })
            .collect()
    }

    fn keeps_facts(&self) -> bool {
        true
    }

    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        let rows = self
            .query("loading a user's facts", &self.sql.facts_load, &[&user.as_str()])
            .await?;
        facts::stored_facts(user, &rows)
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        const WHAT: &str = "committing a user's facts";
        let p = FactsParams::new(&commit)?;
        let user_key = user.as_str();
        let values: [&(dyn ToSql + Sync); 9] = [
            &user_key,
            &p.expected,
            &p.next_id,
            &p.token,
            &p.ids,
            &p.facts,
            &p.entry_facts,
            &p.entries,
            &p.dropped,
        ];
        let read = |rows: &[Row]| {
            let (new, current, token) = facts::commit_result(user, rows)?;
            Ok(outcome(new, current, token, commit.expected_version(), commit.token()))
        };
        let statement = &self.sql.facts_commit;
        let outcome = match self.run(WHAT, statement, &values).await {
            Ok(rows) => read(&rows)?,
            Err(failed) if failed.maybe_applied => {
                // As for a conversation's commit: the token makes a resend that finds it
                // applied answer with the version it made.
                tracing::debug!(server = %self.target, error = %failed.error, "no answer to a facts commit; resending it once");
                self.resend_commit(statement, &values, read)
                    .await
                    .map_err(|e| outcome_unknown(e, WHAT, &self.target))?
            }
            Err(failed) => return Err(failed.error),
        };
        match outcome {
            Outcome::Applied(version) => Ok(version),
            Outcome::Conflict { .. } => Err(StoreError::facts_conflict()),
        }
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        // No fact has an id beyond a bigint.
        let Ok(id) = i64::try_from(fact) else {
            return Ok(Vec::new());
        };
        let rows = self
            .query(
                "reading a fact's history",
                &self.sql.fact_history,
                &[&user.as_str(), &id],
            )
            .await?;
        facts::history(user, &rows, fact)
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        let rows = self
            .query("forgetting a user's facts", &self.sql.facts_forget, &[&user.as_str()])
            .await?;
        match rows.first() {
            Some(row) => facts::column(user, row, 0, "the forget result"),
            None => Ok(false),
        }
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
