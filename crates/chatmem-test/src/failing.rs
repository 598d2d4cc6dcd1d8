//! The one failing [`Store`] of the tests: an [`InMemoryStore`] whose loads, commits and
//! searches (and the same calls of facts) fail on the test's word, to see what a server or a
//! client makes of a store error.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chatmem::facts::FactChange;
use chatmem::store::{
    Commit, FactsCommit, RecentPage, RecentQuery, SearchQuery, SearchResult, Snapshot, StoreError, StoreErrorKind,
    StoredFacts, StoredMessage,
};
use chatmem::{ConversationId, InMemoryStore, Page, Store, UserId};

/// An in-memory store that fails on demand: its next [`lose_commits`](Self::lose_commits)
/// commits (of conversations or facts) lose a version check, its loads and searches (and facts
/// loads) fail as unavailable while it is [`down`](Self::set_down), and a
/// [`broken`](Self::broken) one fails every conversation load. A
/// [`blind`](Self::blind) one does not search (as a store without recall), and its searches
/// can be [slowed](Self::set_search_delay). One [`without_facts`](Self::without_facts) keeps
/// conversations only.
#[derive(Debug, Default)]
pub struct FailingStore {
    inner: InMemoryStore,
    conflicts: AtomicUsize,
    down: AtomicBool,
    broken: bool,
    blind: bool,
    factless: bool,
    search_delay_micros: AtomicU64,
}

impl FailingStore {
    /// A store that works until told otherwise.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose every load fails, naming the conversation as the real stores' errors do:
    /// unavailable for ids holding `down`, corrupt for the others.
    pub fn broken() -> Self {
        Self {
            broken: true,
            ..Self::default()
        }
    }

    /// A store that works but does not search: [`Store::searches`] is false, and a search
    /// asked of it panics (whoever asked should have checked).
    pub fn blind() -> Self {
        Self {
            blind: true,
            ..Self::default()
        }
    }

    /// A store that works but keeps no facts: [`Store::keeps_facts`] is false, and a facts
    /// call asked of it is refused as invalid input, as a store without facts refuses it.
    pub fn without_facts() -> Self {
        Self {
            factless: true,
            ..Self::default()
        }
    }

    /// The error of a facts call if this store keeps no facts.
    fn facts_kept(&self) -> Result<(), StoreError> {
        if self.factless {
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                "this store keeps no facts (the test made it without)",
            ));
        }
        Ok(())
    }

    /// Every search waits `delay` before it answers.
    pub fn set_search_delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.search_delay_micros.store(micros, Ordering::SeqCst);
    }

    /// The next `n` commits (of a conversation or a user's facts) fail with a version conflict.
    pub fn lose_commits(&self, n: usize) {
        self.conflicts.store(n, Ordering::SeqCst);
    }

    /// Whether this commit is one of those [`lose_commits`](Self::lose_commits) said to lose.
    fn lose_one(&self) -> bool {
        self.conflicts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The error of a call while the store is down, if it is.
    fn unless_down(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Unavailable, "the test took it down"));
        }
        Ok(())
    }

    /// While `down`, every load (a facts load included) and every search fails as unavailable.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

#[async_trait]
impl Store for FailingStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        if self.broken {
            return Err(if id.as_str().contains("down") {
                StoreError::new(StoreErrorKind::Unavailable, "the test took it down").for_conversation(id)
            } else {
                StoreError::corrupt(id, "message seq 9 is not a valid message")
            });
        }
        self.unless_down()?;
        self.inner.load(id).await
    }
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        if self.lose_one() {
            return Err(StoreError::conflict());
        }
        self.inner.commit(id, commit).await
    }
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.history(id, after, limit).await
    }
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.inner.clear(id).await
    }
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.inner.list(after, limit).await
    }
    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        self.inner.recent(query).await
    }
    fn searches(&self) -> bool {
        !self.blind
    }
    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        assert!(!self.blind, "a store that does not search was asked to");
        let delay = self.search_delay_micros.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_micros(delay)).await;
        }
        self.unless_down()?;
        self.inner.search(id, query).await
    }
    fn keeps_facts(&self) -> bool {
        !self.factless && self.inner.keeps_facts()
    }
    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        self.facts_kept()?;
        self.unless_down()?;
        self.inner.load_facts(user).await
    }
    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        self.facts_kept()?;
        if self.lose_one() {
            return Err(StoreError::facts_conflict());
        }
        self.inner.commit_facts(user, commit).await
    }
    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        self.facts_kept()?;
        self.inner.fact_history(user, fact).await
    }
    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        self.facts_kept()?;
        self.inner.forget_user(user).await
    }
}
