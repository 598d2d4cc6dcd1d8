//! [`RedisStore`]: the store type and its [`Store`] operations (load, commit, history,
//! clear, list, recent, purge_expired, search, and users' facts).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::facts::FactChange;
use chatmem::store::{
    Commit, FactsCommit, RecentPage, RecentQuery, SearchQuery, SearchResult, Snapshot, StoreError, StoredFacts,
    StoredMessage,
};
use chatmem::{ConversationId, Page, Store, Summary, UserId};
use redis::{Script, Value};

use crate::builder::{DEFAULT_KEY_PREFIX, DEFAULT_WINDOW_CACHE_BYTES, RedisStoreBuilder};
use crate::codec;
use crate::conn::Conn;
use crate::index::{INDEX_BATCH, index_id};
use crate::keys::Keys;
use crate::recall;
use crate::reply::{Loaded, parse_snapshot};
use crate::scripts::LOAD_FIELDS;
use crate::window_cache::{Entry, WindowCache};

/// Longest TTL passed to Redis, in milliseconds (about 1,100 years): `PEXPIRE` fails when
/// now plus the TTL overflows. A longer TTL never expires, as chatmem documents for a TTL a
/// store cannot represent.
const MAX_TTL_MS: u128 = 1 << 45;

/// `ttl` as the milliseconds `PEXPIRE` takes, rounded up (Redis counts whole milliseconds;
/// rounding up never expires a conversation early, and a zero TTL stays zero: expired at
/// once, as on the other stores); `None` when it is longer than [`MAX_TTL_MS`] and so never
/// expires.
fn ttl_millis(ttl: Duration) -> Option<u64> {
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    if ms > MAX_TTL_MS {
        return None;
    }
    u64::try_from(ms).ok()
}

/// Conversations stored in Redis or Redis Cluster. Cheap to clone: clones share one
/// multiplexed connection (per node, on Cluster).
///
/// Create one with [`RedisStore::connect`] or [`RedisStore::builder`]. See the
/// [crate docs](crate) for the key layout, expiry and outage behaviour.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) conn: Conn,
    pub(crate) keys: Keys,
    pub(crate) scripts: Arc<Scripts>,
    /// Windows seen, for loads without the script (shared by clones; unused on Cluster).
    pub(crate) cache: Arc<WindowCache>,
    pub(crate) response_timeout: Duration,
    pub(crate) url: Arc<str>,
}

impl RedisStore {
    /// The snapshot of `id` read with `HMGET` and `ZRANGEBYSCORE` in one `MULTI`/`EXEC`
    /// (one round trip, no script), only the messages added since `seen` was recorded;
    /// `None` when the stored conversation is not the one seen (created again), so the
    /// script must read it.
    async fn load_seen(&self, id: &ConversationId, seen: &Entry) -> Result<Option<Snapshot>, StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("HMGET").arg(self.keys.meta(id));
        for field in LOAD_FIELDS {
            pipe.arg(field);
        }
        let from = seen.read_from();
        pipe.cmd("ZRANGEBYSCORE").arg(self.keys.msgs(id)).arg(from).arg("+inf");
        let pipe = &pipe;
        let (mut meta, records): (Vec<Value>, Value) = self
            .run("loading", |mut conn| async move { pipe.query_async(&mut conn).await })
            .await
            .map_err(|e| e.for_conversation(id))?;
        if meta.first().is_none_or(|version| matches!(version, Value::Nil)) {
            // No meta hash: no conversation, whatever messages were left behind.
            self.forget(id);
            return Ok(Some(Snapshot::empty()));
        }
        meta.push(records);
        let Loaded {
            mut snapshot,
            created,
            sizes,
        } = parse_snapshot(id, Value::Array(meta))?;
        let start = snapshot.window_start;
        if start < seen.window_start || created != seen.created || snapshot.next_seq < seen.next_seq {
            return Ok(None);
        }
        if snapshot.version == seen.version && seen.created.is_some() {
            // Nothing changed since: the cached window as it is, shared (and the entry stays).
            snapshot.messages = seen.in_window_from(start);
            return Ok(Some(snapshot));
        }
        // Another store committed since. The messages seen are still stored as they were;
        // those after them were read. With none cached, they were read from an earlier
        // start: those that left the window go.
        let mut entry = if seen.created.is_some() {
            let mut entry = seen.clone();
            entry.drop_below(start);
            entry
        } else {
            Entry::default()
        };
        let fetched = snapshot.messages.into_vec().into_iter().zip(sizes);
        entry.append(fetched.filter(|(m, _)| m.seq >= start));
        snapshot.messages = entry.messages.clone();
        self.saw(id, || Entry::seen(created, &snapshot, entry.sizes));
        Ok(Some(snapshot))
    }

    /// Whether this store caches windows: not on Cluster, whose loads always run the script.
    fn caches(&self) -> bool {
        !self.conn.is_cluster()
    }

    /// What was last seen of `id` (always `None` on Cluster).
    fn seen(&self, id: &ConversationId) -> Option<Arc<Entry>> {
        self.caches().then(|| self.cache.get(id)).flatten()
    }

    /// Records what was seen of `id`, made only when this store caches.
    fn saw(&self, id: &ConversationId, entry: impl FnOnce() -> Entry) {
        if self.caches() {
            self.cache.put(id, entry());
        }
    }

    /// Records what `commit`, now applied as `version`, made of `id`: built on the entry seen
    /// when that is the version the commit was checked against, or made from the commit
    /// alone when it created the conversation (its token is the creation marker).
    fn committed(&self, id: &ConversationId, commit: &Commit, version: u64, sizes: &[usize]) {
        if commit.expected_version() == 0 {
            let created = Entry {
                created: Some(commit.token()),
                ..Entry::default()
            };
            self.saw(id, || created.committed(commit, version, sizes));
            return;
        }
        // Taken out, so that the commit appends to the cached window in place; seen at
        // another version (or not at all), what is cached stays true.
        if self.caches()
            && let Some(seen) = self.cache.take_at(id, commit.expected_version())
        {
            self.cache.put(id, seen.committed(commit, version, sizes));
        }
    }

    /// Forgets `id` (cleared, or not found).
    fn forget(&self, id: &ConversationId) {
        self.cache.forget(id);
    }
}

/// The Lua scripts of [`crate::scripts`], made once per store and run with `EVALSHA`.
pub(crate) struct Scripts {
    pub(crate) load: Script,
    pub(crate) history: Script,
    pub(crate) commit: Script,
    pub(crate) clear: Script,
    pub(crate) prune: Script,
    pub(crate) recent: Script,
    pub(crate) check: Script,
    pub(crate) recent_backfill: Script,
    pub(crate) schema: Script,
    pub(crate) search: Script,
    pub(crate) fetch: Script,
    pub(crate) facts_commit: Script,
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
            url: url.into(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            connect_timeout: None,
            response_timeout: None,
            window_cache_bytes: DEFAULT_WINDOW_CACHE_BYTES,
        }
    }

    /// The key prefix in use.
    pub fn key_prefix(&self) -> &str {
        self.keys.prefix()
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        // On a single Redis, a conversation loaded or committed before is read with plain
        // commands, only what changed since (see `window_cache`); on Cluster, and
        // otherwise, with the load script.
        if let Some(seen) = self.seen(id)
            && let Some(snapshot) = self.load_seen(id, &seen).await?
        {
            return Ok(snapshot);
        }
        let mut inv = self.scripts.load.prepare_invoke();
        inv.key(self.keys.meta(id)).key(self.keys.msgs(id));
        for field in LOAD_FIELDS {
            inv.arg(field);
        }
        let inv = &inv;
        let reply: Value = self
            .run("loading", |mut conn| async move { inv.invoke_async(&mut conn).await })
            .await
            .map_err(|e| e.for_conversation(id))?;
        let Loaded {
            snapshot,
            created,
            sizes,
        } = parse_snapshot(id, reply)?;
        if snapshot.version == 0 {
            self.forget(id);
        } else {
            self.saw(id, || Entry::seen(created, &snapshot, sizes));
        }
        Ok(snapshot)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        // The version check in the script is the only check: a `Commit` cannot be built
        // invalid, so its sequences, window start and next seq are stored as they are.
        let cluster = self.conn.is_cluster();
        let creates = commit.expected_version() == 0;
        let mut inv = self.scripts.commit.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.idx(id));
        if !cluster {
            inv.key(self.keys.index()).key(self.keys.recent());
        }
        inv.arg(commit.expected_version())
            .arg(id.as_str())
            .arg(commit.window_start());
        match commit.delete_below() {
            Some(below) => inv.arg(below),
            None => inv.arg(""),
        };
        match commit.ttl().and_then(ttl_millis) {
            Some(ms) => inv.arg(ms),
            None => inv.arg(""),
        };
        let system = commit.system();
        let system_counter = system.and_then(|s| s.counted_by.as_deref());
        match (system, system_counter) {
            (Some(s), Some(_)) => inv.arg(2).arg(s.seq).arg(s.tokens).arg(s.message_json()?),
            (Some(s), None) => inv.arg(1).arg(s.seq).arg(s.tokens).arg(s.message_json()?),
            (None, _) => inv.arg(0).arg(0).arg(0).arg(""),
        };
        inv.arg(commit.next_seq());
        // Lets a resend after a lost connection or a timeout recognise a commit that
        // already applied.
        inv.arg(commit.token());
        inv.arg(system_counter.unwrap_or(""));
        // Empty keeps the stored summary.
        inv.arg(commit.summary().map(Summary::to_json).unwrap_or_default());
        let mut sizes = Vec::with_capacity(commit.appended().len());
        inv.arg(commit.appended().len());
        for m in commit.appended() {
            let member = codec::encode(m)?;
            sizes.push(member.len());
            inv.arg(m.seq).arg(member);
        }
        // Written by the same script, only if the version check passes.
        recall::push_index(&mut inv, &commit);
        if cluster && creates {
            // Listed before it exists (by recency with time 0), so that no crash can leave
            // it unlisted; `list` and `recent` drop the entries again if this commit does
            // not create it.
            self.index_add(std::slice::from_ref(id))
                .await
                .map_err(|e| e.for_conversation(id))?;
        }
        let inv = &inv;
        let (code, n, now): (i64, i64, String) = self
            .run_commit(
                "committing",
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await
            .map_err(|e| e.for_conversation(id))?;
        match code {
            1 => {
                let version = u64::try_from(n)
                    .map_err(|_| StoreError::corrupt(id, format!("the commit returned version {n}")))?;
                self.committed(id, &commit, version, &sizes);
                if cluster {
                    // The recency entry, with the time of the conversation's node; for a new
                    // conversation also the index entry again: a concurrent `list` or `clear`
                    // may have removed it while the conversation did not exist yet.
                    if let Err(e) = self.touch_cluster(id, &now, creates).await {
                        // The commit is applied: the conversation is listed (by the entries
                        // added before it), at worst with an older time.
                        tracing::warn!(error = %e, "redis cluster: recording a commit in the indexes failed");
                    }
                }
                Ok(version)
            }
            0 => Err(StoreError::conflict()),
            _ => Err(StoreError::corrupt(id, "metadata field version is not a number")),
        }
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // A script, not a bare ZRANGEBYSCORE: messages whose meta hash is gone are not a
        // conversation (see the crate docs on eviction).
        let mut inv = self.scripts.history.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .arg(after)
            .arg(limit.min(i64::MAX as usize));
        let inv = &inv;
        let records: Vec<Vec<u8>> = self
            .run("reading history", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await
            .map_err(|e| e.for_conversation(id))?;
        records
            .iter()
            .enumerate()
            .map(|(i, r)| codec::decode(id, r, i))
            .collect()
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let cluster = self.conn.is_cluster();
        let mut inv = self.scripts.clear.prepare_invoke();
        inv.key(self.keys.meta(id))
            .key(self.keys.msgs(id))
            .key(self.keys.idx(id));
        if !cluster {
            inv.key(self.keys.index()).key(self.keys.recent());
        }
        inv.arg(id.as_str());
        let inv = &inv;
        self.forget(id);
        let existed: i64 = self
            .run("clearing", |mut conn| async move { inv.invoke_async(&mut conn).await })
            .await
            .map_err(|e| e.for_conversation(id))?;
        if cluster && existed == 1 {
            // The keys first, then the index entry (an entry without keys is harmless).
            self.index_remove_checked(std::slice::from_ref(id))
                .await
                .map_err(|e| e.for_conversation(id))?;
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

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit);
        self.recent_page(prefix, before, limit).await
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

    /// The index is written by the commit script itself (see the crate docs, *Recall*).
    fn searches(&self) -> bool {
        true
    }

    /// One script run on the conversation's node, exact as chatmem's BM25.
    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        self.search_index(id, query).await
    }

    /// Per user, in three hashes of their own hash tag, never expiring (see the crate docs,
    /// *Facts*).
    fn keeps_facts(&self) -> bool {
        true
    }

    /// One `MULTI`/`EXEC` on the user's node.
    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        self.load_user_facts(user).await
    }

    /// One script on the user's node, resent once on a lost reply.
    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        self.commit_user_facts(user, &commit).await
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        self.user_fact_history(user, fact).await
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        self.forget_user_facts(user).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_and_one_too_long_never_expires() {
        assert_eq!(ttl_millis(Duration::ZERO), Some(0));
        assert_eq!(ttl_millis(Duration::from_nanos(1)), Some(1));
        assert_eq!(ttl_millis(Duration::from_micros(1500)), Some(2));
        assert_eq!(ttl_millis(Duration::from_secs(60)), Some(60_000));
        assert_eq!(ttl_millis(Duration::from_millis(1 << 45)), Some(1 << 45));
        assert_eq!(ttl_millis(Duration::from_millis((1 << 45) + 1)), None);
        assert_eq!(ttl_millis(Duration::MAX), None);
    }
}
