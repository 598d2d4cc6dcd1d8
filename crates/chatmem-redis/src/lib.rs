//! A Redis store for [`chatmem`]: conversation memory shared by every instance of an
//! application that talks to one Redis, expiring natively with Redis TTLs.
//!
//! [`RedisStore`] implements [`chatmem::Store`]. A load is one round trip and a commit is
//! one atomic round trip (each a Lua script run with `EVALSHA`); the per-turn cost does not
//! grow with the length of the conversation's history. It runs on a single Redis (or a
//! primary with replicas) and on Redis Cluster (see *Redis Cluster* below). This crate is
//! not a cache in front of another database, and does not do TLS (`rediss://`).
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
//! On Redis Cluster, name one or more seed nodes (the others are discovered):
//!
//! ```no_run
//! # async fn demo() -> Result<(), chatmem::StoreError> {
//! let store = chatmem_redis::RedisStore::connect(
//!     "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
//! )
//! .await?;
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
//! listed id is checked with `EXISTS` and stale ones are removed from the index) or
//! [`purge_expired`](chatmem::Store::purge_expired) sweeps the index. Sequence numbers
//! must stay below 2^53 (sorted-set scores are doubles).
//!
//! # Redis Cluster
//!
//! A URL `redis+cluster://[user:password@]host:port[,host:port...]` selects Redis Cluster
//! (database 0 only; the credentials apply to every node). Each command is routed to the
//! node owning its key's slot, following `MOVED`/`ASK` redirections. All keys of one
//! conversation share one hash tag, so load, commit, history and the conversation part of
//! clear stay single scripts or commands on one node: atomic, one round trip each, exactly
//! as on a single Redis.
//!
//! Only the id index (`chatmem:ids`) lives in another slot, so on Cluster it cannot be
//! updated inside the commit and clear scripts (`CROSSSLOT`) and is kept with separate
//! commands instead:
//!
//! - a commit that creates a conversation (`expected_version == 0`) `ZADD`s the id
//!   *before* the commit script, so a crash after the commit cannot leave the
//!   conversation unlisted (if the commit then fails, `list` drops the entry as stale),
//!   and once more *after* a successful commit, in case a concurrent `list`, `purge` or
//!   `clear` removed the entry in between (a failure of that second `ZADD` is logged,
//!   not returned: the commit is applied);
//! - `clear` deletes the conversation's keys first, then removes the index entry;
//! - whoever removes entries (`clear`, or `list`/`purge_expired` meeting ids whose meta
//!   key is gone) checks with `EXISTS` afterwards and puts back any conversation that was
//!   created meanwhile.
//!
//! So an existing conversation is always listed, except after the rare combination of an
//! index sweep racing its creation *and* the creating process failing right after its
//! commit (before the second `ZADD`); its next commit does not re-add it, but `load`,
//! `commit`, `history` and `clear` work on it regardless. On a single Redis the index is
//! exact: it is updated inside the same atomic scripts as the conversation.
//!
//! Round trips per operation (`N` = ids in the listed page, at most `limit + 1`; index
//! batches hold at most 1,000 ids):
//!
//! | operation | single Redis | Redis Cluster |
//! |---|---|---|
//! | `load`, `history` | 1 | 1 |
//! | `commit` | 1 | 1; 3 when it creates the conversation (`ZADD`, script, `ZADD`) |
//! | `clear` | 1 | 1 when it did not exist; else 3 (script, `ZREM`, `EXISTS`) |
//! | `list` | 2 (`ZRANGEBYLEX`, one check-and-prune script) | 2 (`ZRANGEBYLEX`, then `N` `EXISTS` sent at once, one per node's connection); +2 (`ZREM`, `EXISTS`) when stale ids were met |
//! | `purge_expired` | 2 per batch | 2 per batch, +2 when the batch held expired ids |
//!
//! Re-adding an id found recreated during a removal costs one more `ZADD`. The scripts
//! are loaded on a node the first time it runs them (`NOSCRIPT`, then `SCRIPT LOAD` and
//! `EVALSHA` again). Outages behave as on a single Redis (see below); the cluster
//! client also refreshes its slot map by itself when the topology changes.
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
mod conn;
mod error;
mod keys;
mod scripts;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::{Commit, ConversationId, Page, Retention, Snapshot, Store, StoreError, StoreErrorKind, StoredMessage};
use redis::{RedisResult, Script, Value};

use crate::conn::Conn;
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

/// Conversations stored in Redis or Redis Cluster. Cheap to clone: clones share one
/// multiplexed connection (per node, on Cluster).
///
/// Create one with [`RedisStore::connect`] or [`RedisStore::builder`]. See the
/// [crate docs](crate) for the key layout, expiry and outage behaviour.
#[derive(Clone)]
pub struct RedisStore {
    conn: Conn,
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
            .field("cluster", &self.conn.is_cluster())
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

impl RedisStore {
    /// Connects to `url` with the default prefix and timeouts: a single Redis at
    /// `redis://[user:password@]host[:port][/db]` or `redis+unix:///path`, or a Redis
    /// Cluster at `redis+cluster://[user:password@]host:port[,host:port...]` (one or more
    /// seed nodes; the others are discovered).
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
        F: Fn(Conn) -> Fut,
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
        if self.conn.is_cluster() {
            return self.prune_cluster(ids).await;
        }
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

    /// [`prune`](Self::prune) on Cluster, where the meta keys and the index live in
    /// different slots: one `EXISTS` per id (sent concurrently, so about one round trip),
    /// then the index clean-up for the ids found missing.
    async fn prune_cluster(&self, raw_ids: &[Vec<u8>]) -> Result<Vec<bool>, StoreError> {
        let ids = raw_ids.iter().map(|raw| index_id(raw)).collect::<Result<Vec<_>, _>>()?;
        let mut live = self.exist(&ids).await?;
        let stale: Vec<usize> = (0..ids.len()).filter(|&i| !live[i]).collect();
        if !stale.is_empty() {
            let stale_ids: Vec<ConversationId> = stale.iter().map(|&i| ids[i].clone()).collect();
            let exists_now = self.index_remove_checked(&stale_ids).await?;
            // Created meanwhile: it exists now, so it is listed.
            for (&i, exists) in stale.iter().zip(exists_now) {
                live[i] = exists;
            }
        }
        Ok(live)
    }

    /// Whether each conversation of `ids` exists (its meta key does), with one `EXISTS`
    /// per id: on Cluster each goes to its own slot's node, all of them at once.
    async fn exist(&self, ids: &[ConversationId]) -> Result<Vec<bool>, StoreError> {
        let metas: Vec<String> = ids.iter().map(|id| self.keys.meta(id)).collect();
        let metas = &metas;
        let flags: Vec<i64> = self
            .run(
                || "checking listed conversations".to_owned(),
                |conn| async move {
                    futures_util::future::try_join_all(metas.iter().map(|meta| {
                        let mut conn = conn.clone();
                        async move { redis::cmd("EXISTS").arg(meta).query_async::<i64>(&mut conn).await }
                    }))
                    .await
                },
            )
            .await?;
        Ok(flags.into_iter().map(|f| f == 1).collect())
    }

    /// Adds `ids` to the index (idempotent).
    async fn index_add(&self, ids: &[ConversationId]) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.keys.index());
        for id in ids {
            cmd.arg(0).arg(id.as_str());
        }
        let cmd = &cmd;
        self.run(
            || "adding to the conversation index".to_owned(),
            |mut conn| async move { cmd.query_async::<()>(&mut conn).await },
        )
        .await
    }

    /// Removes `ids` from the index on Cluster, then puts back those that exist after
    /// all (created concurrently: the creator's own index update may have come before
    /// this removal); returns whether each exists now. Without the cross-slot atomicity of a single
    /// Redis this re-check is what keeps an existing conversation listed.
    async fn index_remove_checked(&self, ids: &[ConversationId]) -> Result<Vec<bool>, StoreError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.index());
        for id in ids {
            cmd.arg(id.as_str());
        }
        let cmd = &cmd;
        self.run(
            || "removing from the conversation index".to_owned(),
            |mut conn| async move { cmd.query_async::<()>(&mut conn).await },
        )
        .await?;
        let exist = self.exist(ids).await?;
        let back: Vec<ConversationId> = ids
            .iter()
            .zip(&exist)
            .filter(|(_, exists)| **exists)
            .map(|(id, _)| id.clone())
            .collect();
        if !back.is_empty() {
            self.index_add(&back).await?;
        }
        Ok(exist)
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
        let cluster = self.conn.is_cluster();
        let creates = commit.expected_version == 0;
        let mut inv = self.scripts.commit.prepare_invoke();
        inv.key(self.keys.meta(id)).key(self.keys.msgs(id));
        if !cluster {
            inv.key(self.keys.index());
        }
        inv.arg(commit.expected_version)
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
        if cluster && creates {
            // Listed before it exists, so that no crash can leave it unlisted; `list` drops
            // the entry again if this commit does not create it.
            self.index_add(std::slice::from_ref(id)).await?;
        }
        let inv = &inv;
        let (code, n): (i64, i64) = self
            .run(
                || format!("committing to conversation {id:?}"),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        match code {
            1 => {
                let version =
                    u64::try_from(n).map_err(|_| corrupt(format!("conversation {id:?}: invalid version {n}")))?;
                if cluster && creates {
                    // Again after the commit: a concurrent `list` or `clear` may have removed
                    // the entry while the conversation did not exist yet.
                    if let Err(e) = self.index_add(std::slice::from_ref(id)).await {
                        // The commit is applied; the entry added before it is most likely
                        // still there.
                        tracing::warn!(error = %e, "redis cluster: re-adding a new conversation to the index failed");
                    }
                }
                Ok(version)
            }
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
        let cluster = self.conn.is_cluster();
        let mut inv = self.scripts.clear.prepare_invoke();
        inv.key(self.keys.meta(id)).key(self.keys.msgs(id));
        if !cluster {
            inv.key(self.keys.index());
        }
        inv.arg(id.as_str());
        let inv = &inv;
        let existed: i64 = self
            .run(
                || format!("clearing conversation {id:?}"),
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        if cluster && existed == 1 {
            // The keys first, then the index entry (an entry without keys is harmless).
            self.index_remove_checked(std::slice::from_ref(id)).await?;
        }
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
