//! [`InMemoryStore`]: the default store, inside the process.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use async_trait::async_trait;

use crate::commit::Commit;
use crate::error::StoreError;
use crate::facts::{FactChange, UserId};
use crate::id::ConversationId;
use crate::page::Page;
use crate::recall::{IndexedMessage, MemoryIndex, MessageVector, SearchQuery, SearchResult};
use crate::shared_messages::SharedMessages;
use crate::snapshot::Snapshot;
use crate::store::{FactsCommit, RecentConversation, RecentPage, RecentQuery, Store, StoredFacts, now_micros};
use crate::stored_message::StoredMessage;
use crate::summary::Summary;

/// Conversations kept in this process's memory.
///
/// **Memory is lost when the process exits**, and two processes (or two `InMemoryStore`
/// values) never see each other's conversations: a new `ChatMemory` over a new
/// `InMemoryStore` is empty. Use a durable store (SQLite, PostgreSQL, Redis) to keep
/// conversations across restarts or share them between instances.
///
/// It keeps users' [facts](crate::facts) too, apart from the conversations (under a lock of
/// their own), lost with them when the process exits.
///
/// Operations hold one lock briefly and never across an `.await`.
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let id = ConversationId::new("app-user-42-aftersale")?;
/// let memory = ChatMemory::new(InMemoryStore::new());
/// memory.add(&id, [Message::user("hi")]).await?;
/// assert_eq!(memory.get(&id).await?.len(), 1);
///
/// let restarted = ChatMemory::new(InMemoryStore::new());
/// assert!(restarted.get(&id).await?.is_empty());
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct InMemoryStore {
    conversations: Mutex<BTreeMap<ConversationId, Conversation>>,
    users: Mutex<BTreeMap<UserId, UserFacts>>,
}

/// What is kept of one user's facts: there is an entry once a facts commit applied, until the
/// user is forgotten.
#[derive(Debug, Default)]
struct UserFacts {
    stored: StoredFacts,
    /// The token of the commit that made `stored.version`.
    token: u64,
    /// Each fact's history, in the order committed; a fact deleted by hand has no entry.
    history: BTreeMap<u64, Vec<FactChange>>,
}

impl UserFacts {
    /// Applies `commit`, whose version check passed: the set replaced, the dropped facts'
    /// history gone, the new entries appended, the version bumped, the token kept.
    fn apply(&mut self, commit: FactsCommit) -> u64 {
        let token = commit.token();
        let (set, history, dropped) = commit.into_parts();
        for fact in dropped {
            self.history.remove(&fact);
        }
        for change in history {
            self.history.entry(change.fact).or_default().push(change);
        }
        self.stored.set = set;
        self.stored.version += 1;
        self.token = token;
        self.stored.version
    }
}

#[derive(Debug)]
struct Conversation {
    version: u64,
    /// The token of the commit that made `version`.
    token: u64,
    system: Option<StoredMessage>,
    window_start: u64,
    next_seq: u64,
    /// The kept messages below the window start (history), oldest first.
    history: VecDeque<StoredMessage>,
    /// The messages from the window start on, shared with the snapshots loaded since: a
    /// load copies none, and a commit appends in place unless a snapshot is still held.
    window: SharedMessages,
    summary: Option<Summary>,
    expires_at: Option<Instant>,
    /// The last commit's time and the expiry, in microseconds since the Unix epoch, for
    /// [`Store::recent`].
    updated_micros: i64,
    expires_micros: Option<i64>,
    /// The lexical index of the messages committed with recall on.
    index: MemoryIndex,
}

impl Conversation {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Moves the window's start to `start` and deletes the messages below `delete_below`.
    /// The start never moves back (a `Commit` cannot be built so, and the version check
    /// makes its loaded start the current one), so the messages that leave the window are a
    /// prefix of it and history only grows at its end.
    fn split(&mut self, start: u64, delete_below: Option<u64>) {
        let keep_from = delete_below.unwrap_or(0);
        let left = self.window.split_below(start.max(keep_from), keep_from);
        self.history.extend(left);
        while self.history.front().is_some_and(|m| m.seq < keep_from) {
            self.history.pop_front();
        }
        self.index.delete_below(keep_from);
        self.window_start = start;
    }

    /// The kept message at `seq`, if any.
    fn message(&self, seq: u64) -> Option<StoredMessage> {
        let find = |ms: &[StoredMessage]| ms.binary_search_by_key(&seq, |m| m.seq).ok().map(|i| ms[i].clone());
        let (a, b) = self.history.as_slices();
        find(a).or_else(|| find(b)).or_else(|| find(&self.window))
    }
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<ConversationId, Conversation>> {
        // A panic elsewhere while holding the lock cannot leave a half-applied commit
        // (commits mutate only after every check), so a poisoned map is still consistent.
        self.conversations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn users(&self) -> MutexGuard<'_, BTreeMap<UserId, UserFacts>> {
        // As for the conversations: a commit mutates only after its version check.
        self.users.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops `id` if it has expired; returns the live conversation, if any.
    fn live<'a>(
        map: &'a mut BTreeMap<ConversationId, Conversation>,
        id: &ConversationId,
    ) -> Option<&'a mut Conversation> {
        // Only a conversation with a TTL reads the clock.
        if map
            .get(id)
            .is_some_and(|c| c.expires_at.is_some() && c.expired(Instant::now()))
        {
            map.remove(id);
        }
        map.get_mut(id)
    }
}

#[async_trait]
impl Store for InMemoryStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        let mut map = self.lock();
        let Some(c) = Self::live(&mut map, id) else {
            return Ok(Snapshot::empty());
        };
        Ok(Snapshot {
            version: c.version,
            system: c.system.clone(),
            window_start: c.window_start,
            next_seq: c.next_seq,
            messages: c.window.clone(),
            summary: c.summary.clone(),
        })
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let mut map = self.lock();
        let (current, token) = Self::live(&mut map, id).map_or((0, 0), |c| (c.version, c.token));
        if current != commit.expected_version() {
            // The same commit sent again: answered as applied, not applied twice.
            if commit.expected_version().checked_add(1) == Some(current) && token == commit.token() {
                return Ok(current);
            }
            return Err(StoreError::conflict());
        }
        let c = map.entry(id.clone()).or_insert_with(|| Conversation {
            version: 0,
            token: 0,
            system: None,
            window_start: 1,
            next_seq: 1,
            history: VecDeque::new(),
            window: SharedMessages::new(),
            summary: None,
            expires_at: None,
            updated_micros: 0,
            expires_micros: None,
            index: MemoryIndex::new(),
        });
        c.next_seq = commit.next_seq();
        let (start, delete_below, ttl, token) = (
            commit.window_start(),
            commit.delete_below(),
            commit.ttl(),
            commit.token(),
        );
        if let Some(summary) = commit.summary() {
            c.summary = Some(summary.clone());
        }
        let now = now_micros();
        c.index.add(commit.index(), now);
        let (system, appended) = commit.into_messages();
        c.window.extend(appended);
        if let Some(system) = system {
            c.system = Some(system);
        }
        c.split(start, delete_below);
        // A TTL too long to represent never expires (rather than overflowing).
        c.expires_at = ttl.and_then(|ttl| Instant::now().checked_add(ttl));
        c.updated_micros = now;
        c.expires_micros = c.expires_at.and_then(|_| {
            let ttl = i64::try_from(ttl?.as_micros()).ok()?;
            c.updated_micros.checked_add(ttl)
        });
        c.version += 1;
        c.token = token;
        Ok(c.version)
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        let mut map = self.lock();
        let Some(c) = Self::live(&mut map, id) else {
            return Ok(Vec::new());
        };
        let from = c.history.partition_point(|m| m.seq <= after);
        let in_window = c.window.partition_point(|m| m.seq <= after);
        Ok(c.history
            .range(from..)
            .chain(&c.window[in_window..])
            .take(limit)
            .cloned()
            .collect())
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let mut map = self.lock();
        let existed = Self::live(&mut map, id).is_some();
        map.remove(id);
        Ok(existed)
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        use std::ops::Bound;
        let limit = limit.max(1);
        let map = self.lock();
        let now = Instant::now();
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let ids: Vec<ConversationId> = map
            .range((lower, Bound::Unbounded))
            .filter(|(_, c)| !c.expired(now))
            .map(|(id, _)| id.clone())
            .take(limit.saturating_add(1))
            .collect();
        Ok(Page::from_overfetch(ids, limit))
    }

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit);
        let limit = limit.max(1);
        let map = self.lock();
        let now = Instant::now();
        let mut found: Vec<RecentConversation> = map
            .iter()
            .filter(|(id, c)| id.as_str().starts_with(prefix) && !c.expired(now))
            .filter(|(id, c)| before.is_none_or(|b| b.comes_before(c.updated_micros, id)))
            .map(|(id, c)| RecentConversation {
                id: id.clone(),
                updated_micros: c.updated_micros,
                expires_micros: c.expires_micros,
            })
            .collect();
        found.sort_by(|a, b| (b.updated_micros, &b.id).cmp(&(a.updated_micros, &a.id)));
        found.truncate(limit.saturating_add(1));
        Ok(RecentPage::from_overfetch(found, limit))
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        let mut map = self.lock();
        let now = Instant::now();
        let before = map.len();
        map.retain(|_, c| !c.expired(now));
        Ok((before - map.len()) as u64)
    }

    fn searches(&self) -> bool {
        true
    }

    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        let mut map = self.lock();
        Ok(
            Self::live(&mut map, id)
                .map_or_else(SearchResult::default, |c| c.index.search(query, |seq| c.message(seq))),
        )
    }

    fn keeps_vectors(&self) -> bool {
        true
    }

    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        let mut map = self.lock();
        Ok(Self::live(&mut map, id).map_or(0, |c| {
            let Conversation { index, .. } = c;
            let mut index = std::mem::take(index);
            let kept = index.put_vectors(vectors, |seq| c.message(seq));
            c.index = index;
            kept
        }))
    }

    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        let mut map = self.lock();
        Ok(Self::live(&mut map, id).map_or_else(Vec::new, |c| {
            c.index.unembedded(model, dim, after, limit, |seq| c.message(seq))
        }))
    }

    fn keeps_facts(&self) -> bool {
        true
    }

    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        Ok(self.users().get(user).map(|u| u.stored.clone()).unwrap_or_default())
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        let mut users = self.users();
        let (current, token) = users.get(user).map_or((0, 0), |u| (u.stored.version, u.token));
        if current != commit.expected_version() {
            // The same commit sent again: answered as applied, not applied twice.
            if commit.expected_version().checked_add(1) == Some(current) && token == commit.token() {
                return Ok(current);
            }
            return Err(StoreError::facts_conflict());
        }
        Ok(users.entry(user.clone()).or_default().apply(commit))
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        Ok(self
            .users()
            .get(user)
            .and_then(|u| u.history.get(&fact))
            .cloned()
            .unwrap_or_default())
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        Ok(self.users().remove(user).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::Retention;
    use crate::message::Message;
    use crate::test_support::block_on;

    /// Appends `n` user messages on `loaded`, moving the window start to keep the last `keep`.
    fn turn(loaded: &Snapshot, n: u64, keep: u64, retention: Retention) -> Commit {
        let mut commit = Commit::on(loaded).retention(retention);
        for k in 0..n {
            commit = commit.append(Message::user(format!("m{}", loaded.next_seq + k)), 1);
        }
        let next = loaded.next_seq + n;
        let start = next.saturating_sub(keep).max(loaded.window_start);
        commit.window_start(start).build().expect("a valid commit")
    }

    fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
        messages.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn a_held_snapshot_keeps_what_it_saw_while_the_window_moves_on() {
        block_on(async {
            let store = InMemoryStore::new();
            let id = ConversationId::new("c").unwrap();
            store
                .commit(&id, turn(&Snapshot::empty(), 4, 3, Retention::DropEvicted))
                .await
                .unwrap();
            let held = store.load(&id).await.unwrap();
            assert_eq!(seqs(&held.messages), [2, 3, 4]);
            // Commits while the snapshot is held copy the window rather than change it.
            let mut latest = held.clone();
            for _ in 0..3 {
                store
                    .commit(&id, turn(&latest, 2, 3, Retention::DropEvicted))
                    .await
                    .unwrap();
                latest = store.load(&id).await.unwrap();
            }
            assert_eq!(seqs(&held.messages), [2, 3, 4]);
            assert_eq!(seqs(&latest.messages), [8, 9, 10]);
            // Dropped evicted messages are gone from history too.
            assert_eq!(seqs(&store.history(&id, 0, 100).await.unwrap()), [8, 9, 10]);
        });
    }

    #[test]
    fn kept_history_survives_the_window_moving_and_compacting() {
        block_on(async {
            let store = InMemoryStore::new();
            let id = ConversationId::new("c").unwrap();
            let mut loaded = Snapshot::empty();
            // 300 turns of 2 messages, a window of 10, the snapshot let go before each commit
            // (as `Turn::commit` does): appended in place, the log compacts many times over.
            for _ in 0..300 {
                let commit = turn(&loaded, 2, 10, Retention::KeepHistory);
                drop(std::mem::take(&mut loaded));
                store.commit(&id, commit).await.unwrap();
                loaded = store.load(&id).await.unwrap();
            }
            assert_eq!(seqs(&loaded.messages), (591..=600).collect::<Vec<_>>());
            let all = store.history(&id, 0, 1_000).await.unwrap();
            assert_eq!(seqs(&all), (1..=600).collect::<Vec<_>>());
            // A page that spans the history and the window.
            assert_eq!(
                seqs(&store.history(&id, 585, 10).await.unwrap()),
                (586..=595).collect::<Vec<_>>()
            );
        });
    }

    #[test]
    fn a_restore_keeps_what_lies_below_its_window_start_as_history() {
        block_on(async {
            let store = InMemoryStore::new();
            let id = ConversationId::new("c").unwrap();
            let mut commit = Commit::restore(1).retention(Retention::KeepHistory);
            for k in 1..=6 {
                commit = commit.append(Message::user(format!("m{k}")), 1);
            }
            store
                .commit(&id, commit.window_start(5).build().unwrap())
                .await
                .unwrap();
            let loaded = store.load(&id).await.unwrap();
            assert_eq!(seqs(&loaded.messages), [5, 6]);
            assert_eq!(seqs(&store.history(&id, 0, 10).await.unwrap()), [1, 2, 3, 4, 5, 6]);
        });
    }
}
