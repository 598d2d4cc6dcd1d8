//! A Redis store for [`chatmem`]: conversation memory shared by every instance of an
//! application that talks to one Redis, expiring natively with Redis TTLs.
//!
//! [`RedisStore`] implements [`chatmem::Store`]. A load is one round trip and a commit is
//! one atomic round trip (each a Lua script run with `EVALSHA`); the per-turn cost does not
//! grow with the length of the conversation's history. This crate is not a cache in front
//! of another database, does not do TLS (`rediss://`), and does not speak the Redis Cluster
//! protocol (see *Redis Cluster* below).
//!
//! ```no_run
//! use chatmem::{ChatMemory, ConversationId, Message};
//! use chatmem_redis::RedisStore;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::builder("redis://127.0.0.1:6379")
//!     .key_prefix("myapp")
//!     .timeout(std::time::Duration::from_secs(2))
//!     .connect()
//!     .await?;
//! let memory = ChatMemory::new(store);
//! let id = ConversationId::new("app-user-42-aftersale")?;
//! memory.add(&id, [Message::user("hi"), Message::assistant("hello")]).await?;
//! assert_eq!(memory.get(&id).await?.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # Data layout
//!
//! With the default prefix `chatmem`, conversation `id` has two keys sharing one hash
//! tag, `<tag>` being the lower-case hex of the id's bytes (so ids holding `{`, `}`, `:`,
//! `*`, quotes or `%` are safe):
//!
//! - `chatmem:{<tag>}:meta`, a hash: `id` (the raw id), `version`, `window_start`,
//!   `next_seq`, `commit_token` (see *Outages*), and the system message as `sys_seq`,
//!   `sys_tokens`, `sys_json`;
//! - `chatmem:{<tag>}:msgs`, a sorted set scored by sequence whose members are
//!   `<seq>:<tokens>:<message JSON>`. A load reads only scores `>= window_start`.
//!
//! Plus `chatmem:ids`, a sorted set of every conversation id (score 0, ordered by bytes)
//! that [`list`](chatmem::Store::list) pages through with `ZRANGEBYLEX` (never `KEYS`), and
//! `chatmem:schema`, the layout version (1), created on connect; a larger value fails
//! [`RedisStore::connect`] with [`StoreErrorKind::SchemaTooNew`](chatmem::StoreErrorKind).
//!
//! # Expiry
//!
//! Every commit sets `PEXPIRE` on both keys of the conversation to the commit's TTL, or
//! `PERSIST`s them when the TTL is `None`, inside the commit script (so both keys always
//! carry the same deadline). An expired conversation's keys are gone, so it reads as empty
//! at once. Its index entry stays until a [`list`](chatmem::Store::list) meets it (each
//! listed id is checked with `EXISTS` and stale ones are removed from the index in the same
//! script) or [`purge_expired`](chatmem::Store::purge_expired) sweeps the index.
//!
//! # Redis Cluster
//!
//! The conversation keys are Cluster-ready (one hash tag per conversation), but the commit
//! and clear scripts also update the id index, which lives in another slot: on a single
//! Redis (or a primary with replicas) the index is exact and updated atomically with the
//! conversation. On Cluster that script would fail with `CROSSSLOT`; a Cluster port must
//! update the index with a separate command after the commit, so a crash between the two
//! could leave a conversation unlisted until its next commit (stale entries are already
//! handled lazily). Sequence numbers must stay below 2^53 (sorted-set scores are doubles).
//!
//! # Outages
//!
//! Each operation is bounded by the response timeout (default 5 s) and fails with
//! [`StoreErrorKind::Unavailable`](chatmem::StoreErrorKind) when Redis does not answer in
//! time or the connection is refused; the connection is re-established on the next call
//! once Redis is back. A request whose connection was lost (server restart, killed
//! client) is sent once more on a new connection within that time; each commit carries a
//! random token stored with the version, so a resend of a commit that had in fact been
//! applied answers with its version instead of a conflict (no duplicated turn). A commit
//! that still fails with `Unavailable` (a timeout) may or may not have been applied.

mod codec;
mod error;
mod keys;
mod scripts;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::{Commit, ConversationId, Page, Retention, Snapshot, Store, StoreError, StoreErrorKind, StoredMessage};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisResult, Script, Value};

use crate::error::{corrupt, from_redis, redact_url, timed_out};
use crate::keys::Keys;

/// The key layout version this code writes and reads.
pub const SCHEMA_VERSION: u64 = 1;

/// The default key prefix.
pub const DEFAULT_KEY_PREFIX: &str = "chatmem";

/// The default connect and response timeouts.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest TTL passed to Redis (about 1,100 years); longer ones are clamped so that
/// `PEXPIRE` cannot overflow.
const MAX_TTL_MS: u128 = 1 << 45;

/// How many index entries one `list` or `purge_expired` step checks at most.
const INDEX_BATCH: usize = 1000;

/// Conversations stored in Redis. Cheap to clone: clones share one multiplexed connection.
///
/// Create one with [`RedisStore::connect`] or [`RedisStore::builder`]. See the
/// [crate docs](crate) for the key layout, expiry and outage behaviour.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    keys: Keys,
    scripts: Arc<Scripts>,
    response_timeout: Duration,
    url: Arc<str>,
}

struct Scripts {
    load: Script,
    commit: Script,
    clear: Script,
    prune: Script,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .field("key_prefix", &self.keys.prefix())
            .field("response_timeout", &self.response_timeout)
            .finish_non_exhaustive()
    }
}

/// Settings for a [`RedisStore`]; see [`RedisStore::builder`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    url: String,
    key_prefix: String,
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
        let client = redis::Client::open(self.url.as_str()).map_err(|e| {
            StoreError::new(StoreErrorKind::InvalidInput, format!("invalid redis URL {url}")).with_source(e)
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            // Few, quick reconnection attempts: every operation is bounded by the response
            // timeout anyway, and the next operation after a failure tries again.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(1));
        let what = format!("connecting to {url}");
        let conn = match tokio::time::timeout(self.connect_timeout, ConnectionManager::new_with_config(client, config))
            .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(from_redis(e, &what)),
            Err(_) => return Err(timed_out(&what, self.connect_timeout)),
        };
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

impl RedisStore {
    /// Connects to `url` (`redis://[user:password@]host[:port][/db]` or
    /// `redis+unix:///path`) with the default prefix and timeouts.
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// A builder for a store at `url`.
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.to_owned(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            connect_timeout: DEFAULT_TIMEOUT,
            response_timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The key prefix in use.
    pub fn key_prefix(&self) -> &str {
        self.keys.prefix()
    }

    /// Runs one request under the response timeout. A request that failed because the
    /// connection was lost (killed, server restarted) is sent once more, on the fresh
    /// connection the manager opens: reads are idempotent, and a commit carries a token
    /// that makes its replay answer with the version it already produced.
    async fn run<T, F, Fut>(&self, what: impl Fn() -> String, send: F) -> Result<T, StoreError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let attempts = async {
            match send(self.conn.clone()).await {
                Err(e) if error::connection_lost(&e) => {
                    tracing::debug!(error = %e, "redis connection lost; sending once more on a new connection");
                    send(self.conn.clone()).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.response_timeout, attempts).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(from_redis(e, &what())),
            Err(_) => Err(timed_out(&what(), self.response_timeout)),
        }
    }

    /// Creates the schema key if missing; refuses a layout newer than this code.
    async fn check_schema(&self) -> Result<(), StoreError> {
        let key = self.keys.schema();
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&key)
            .arg(SCHEMA_VERSION)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(&key);
        let pipe = &pipe;
        let (stored,): (Option<String>,) = self
            .run(
                || format!("checking {key}"),
                |mut conn| async move { pipe.query_async(&mut conn).await },
            )
            .await?;
        let stored: u64 = stored
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| corrupt(format!("redis key {key} does not hold a schema version")))?;
        if stored > SCHEMA_VERSION {
            return Err(StoreError::new(
                StoreErrorKind::SchemaTooNew,
                format!("redis key {key} says schema {stored}; this chatmem knows up to {SCHEMA_VERSION}"),
            ));
        }
        // Version 1 is the first layout: nothing to migrate yet.
        Ok(())
    }

    /// Checks that `ids` still exist, drops the expired ones from the index, and returns
    /// a flag per id.
    async fn prune(&self, ids: &[Vec<u8>]) -> Result<Vec<bool>, StoreError> {
        let mut inv = self.scripts.prune.prepare_invoke();
        inv.key(self.keys.index());
        let mut parsed = Vec::with_capacity(ids.len());
        for raw in ids {
            let id = index_id(raw)?;
            inv.key(self.keys.meta(&id)).arg(raw.as_slice());
            parsed.push(id);
        }
        let inv = &inv;
        let flags: Vec<i64> = self
            .run(
                || "checking listed conversations".to_owned(),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        if flags.len() != ids.len() {
            return Err(corrupt("redis: unexpected reply to the index check".to_owned()));
        }
        Ok(flags.into_iter().map(|f| f == 1).collect())
    }

    /// Up to `count` raw index entries after `after` (exclusive lexicographic bound).
    async fn index_range(&self, after: &[u8], count: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        let min = if after.is_empty() {
            b"-".to_vec()
        } else {
            let mut min = Vec::with_capacity(after.len() + 1);
            min.push(b'(');
            min.extend_from_slice(after);
            min
        };
        let mut cmd = redis::cmd("ZRANGEBYLEX");
        cmd.arg(self.keys.index())
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(count);
        let cmd = &cmd;
        self.run(
            || "reading the conversation index".to_owned(),
            |mut conn| async move { cmd.query_async(&mut conn).await },
        )
        .await
    }
}

/// An id read from the index.
fn index_id(raw: &[u8]) -> Result<ConversationId, StoreError> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| ConversationId::new(s).ok())
        .ok_or_else(|| corrupt("redis: the conversation index holds an invalid id".to_owned()))
}

/// The bytes of a bulk or simple string reply; `None` for nil.
fn reply_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// A number reply (integers come back as strings from hashes).
fn reply_num(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::BulkString(b) => codec::parse_num(b),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// Builds the snapshot from the load script's reply.
fn parse_snapshot(id: &ConversationId, reply: Value) -> Result<Snapshot, StoreError> {
    let bad_meta = |field: &str| {
        corrupt(format!(
            "conversation {id:?}: metadata field {field} is missing or invalid"
        ))
    };
    let Value::Array(items) = reply else {
        return Err(corrupt(format!("conversation {id:?}: unexpected load reply")));
    };
    if items.is_empty() {
        return Ok(Snapshot::empty());
    }
    let [version, window_start, next_seq, sys_seq, sys_tokens, sys_json, records] =
        <[Value; 7]>::try_from(items).map_err(|_| corrupt(format!("conversation {id:?}: unexpected load reply")))?;
    let version = reply_num(&version).ok_or_else(|| bad_meta("version"))?;
    let window_start = reply_num(&window_start).ok_or_else(|| bad_meta("window_start"))?;
    let next_seq = reply_num(&next_seq).ok_or_else(|| bad_meta("next_seq"))?;
    let system = match reply_bytes(&sys_json) {
        None => None,
        Some(json) => {
            let seq = reply_num(&sys_seq).ok_or_else(|| bad_meta("sys_seq"))?;
            let tokens = reply_num(&sys_tokens)
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| bad_meta("sys_tokens"))?;
            Some(StoredMessage::new(seq, tokens, codec::decode_message(id, &json, seq)?))
        }
    };
    let records = match records {
        Value::Array(records) => records,
        Value::Nil => Vec::new(),
        _ => return Err(corrupt(format!("conversation {id:?}: unexpected load reply"))),
    };
    let messages = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let bytes = reply_bytes(r)
                .ok_or_else(|| corrupt(format!("conversation {id:?}: message record #{i} is not a string")))?;
            codec::decode(id, &bytes, i)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Snapshot {
        version,
        system,
        window_start,
        next_seq,
        messages,
    })
}

#[async_trait]
impl Store for RedisStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let mut inv = self.scripts.load.prepare_invoke();
        inv.key(self.keys.meta(id)).key(self.keys.msgs(id));
        let inv = &inv;
        let reply: Value = self
            .run(
                || format!("loading conversation {id:?}"),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        parse_snapshot(id, reply)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        if let Some(first) = commit.append.first() {
            let consecutive = commit.append.iter().zip(first.seq..).all(|(m, want)| m.seq == want);
            if first.seq == 0 || !consecutive {
                return Err(StoreError::new(
                    StoreErrorKind::InvalidInput,
                    "appended messages must have consecutive sequences from 1 on",
                ));
            }
        }
        let mut inv = self.scripts.commit.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.index())
            .arg(commit.expected_version)
            .arg(id.as_str())
            .arg(commit.window_start)
            .arg(u8::from(commit.retention == Retention::DropEvicted));
        match commit.ttl {
            Some(ttl) => inv.arg(ttl.as_millis().clamp(1, MAX_TTL_MS).to_string()),
            None => inv.arg(""),
        };
        match &commit.system {
            Some(s) => inv
                .arg(1)
                .arg(s.seq)
                .arg(s.tokens)
                .arg(codec::message_json(&s.message, s.seq)?),
            None => inv.arg(0).arg(0).arg(0).arg(""),
        };
        inv.arg(commit.append.last().map_or(0, |m| m.seq + 1));
        // Lets a resend after a lost connection recognise a commit that already applied.
        inv.arg(format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)));
        for m in &commit.append {
            inv.arg(m.seq).arg(codec::encode(m)?);
        }
        let inv = &inv;
        let (code, n): (i64, i64) = self
            .run(
                || format!("committing to conversation {id:?}"),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        match code {
            1 => u64::try_from(n).map_err(|_| corrupt(format!("conversation {id:?}: invalid version {n}"))),
            0 => Err(StoreError::conflict()),
            2 => Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "appended sequence {} does not follow {n}",
                    commit.append.first().map_or(0, |m| m.seq)
                ),
            )),
            _ => Err(corrupt(format!("conversation {id:?}: metadata is unreadable"))),
        }
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("ZRANGEBYSCORE");
        cmd.arg(self.keys.msgs(id))
            .arg(format!("({after}"))
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(limit.min(i64::MAX as usize));
        let cmd = &cmd;
        let records: Vec<Vec<u8>> = self
            .run(
                || format!("reading the history of conversation {id:?}"),
                |mut conn| async move { cmd.query_async(&mut conn).await },
            )
            .await?;
        records
            .iter()
            .enumerate()
            .map(|(i, r)| codec::decode(id, r, i))
            .collect()
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let mut inv = self.scripts.clear.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.index())
            .arg(id.as_str());
        let inv = &inv;
        let existed: i64 = self
            .run(
                || format!("clearing conversation {id:?}"),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        Ok(existed == 1)
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        let limit = limit.max(1);
        let want = limit.saturating_add(1);
        let mut cursor: Vec<u8> = after.map_or_else(Vec::new, |a| a.as_str().as_bytes().to_vec());
        let mut ids = Vec::new();
        // Usually one pass; more only when expired ids were met (and removed from the index).
        loop {
            let ask = (want - ids.len()).min(INDEX_BATCH);
            let batch = self.index_range(&cursor, ask).await?;
            if batch.is_empty() {
                break;
            }
            let live = self.prune(&batch).await?;
            for (raw, live) in batch.iter().zip(live) {
                if live {
                    ids.push(index_id(raw)?);
                }
            }
            if ids.len() >= want || batch.len() < ask {
                break;
            }
            if let Some(last) = batch.last() {
                cursor.clone_from(last);
            }
        }
        Ok(Page::from_overfetch(ids, limit))
    }

    /// Redis expires conversations by itself; this sweeps the id index (in batches of
    /// 1,000) and removes the entries of expired conversations. Returns how many.
    async fn purge_expired(&self) -> Result<u64, StoreError> {
        let mut cursor = Vec::new();
        let mut removed = 0u64;
        loop {
            let batch = self.index_range(&cursor, INDEX_BATCH).await?;
            if batch.is_empty() {
                break;
            }
            let live = self.prune(&batch).await?;
            removed += live.iter().filter(|l| !**l).count() as u64;
            if batch.len() < INDEX_BATCH {
                break;
            }
            if let Some(last) = batch.last() {
                cursor.clone_from(last);
            }
        }
        if removed > 0 {
            tracing::debug!(
                removed,
                prefix = self.keys.prefix(),
                "removed expired conversations from the redis index"
            );
        }
        Ok(removed)
    }
}
