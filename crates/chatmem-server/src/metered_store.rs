//! [`MeteredStore`]: the server's store, counted and bounded. Every store call of the server
//! passes here (through [`chatmem::ChatMemory`], whose retries are invisible from outside), so
//! commits, lost version checks and store errors are counted where they happen, and each call
//! is bounded by the store timeout: the timeout bounds store calls only, never a summary or
//! model call made between them. Every call of the [`Store`] trait is forwarded, recall's
//! `searches` and `search` and the facts calls included: a default left in place would turn
//! recall or facts off silently.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::facts::FactChange;
use chatmem::recall::{IndexedMessage, MessageVector, SearchQuery, SearchResult};
use chatmem::store::{
    Commit, FactsCommit, RecentPage, RecentQuery, Snapshot, StoreError, StoreErrorKind, StoredFacts, StoredMessage,
};
use chatmem::{ConversationId, Page, Store, UserId};

use crate::metrics::{Metrics, store_kind};

/// A store that counts what its inner store answers, and gives each call at most `timeout`.
#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Metrics,
    timeout: Duration,
}

impl MeteredStore {
    pub(crate) fn new(inner: Arc<dyn Store>, metrics: Metrics, timeout: Duration) -> Self {
        Self {
            inner,
            metrics,
            timeout,
        }
    }

    /// The error of a call that did not answer within the timeout, counted as a `timeout`.
    fn timed_out(&self, op: &'static str) -> StoreError {
        self.metrics.store_error(op, "timeout");
        tracing::warn!(operation = op, timeout = ?self.timeout, "the store did not answer in time");
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!("the store did not answer within {:?}", self.timeout),
        )
    }

    /// `call` within the timeout, its error counted.
    async fn count<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let Ok(result) = tokio::time::timeout(self.timeout, call).await else {
            return Err(self.timed_out(op));
        };
        if let Err(e) = &result {
            self.metrics.store_error(op, store_kind(e.kind()));
        }
        result
    }
}

#[async_trait]
impl Store for MeteredStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        self.count("load", self.inner.load(id)).await
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let Ok(result) = tokio::time::timeout(self.timeout, self.inner.commit(id, commit)).await else {
            return Err(self.timed_out("commit"));
        };
        match &result {
            Ok(_) => self.metrics.commit(),
            // Lost to another writer: ChatMemory reloads and retries; not a failure.
            Err(e) if e.is_conflict() => self.metrics.conflict(),
            Err(e) => self.metrics.store_error("commit", store_kind(e.kind())),
        }
        result
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.count("history", self.inner.history(id, after, limit)).await
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.count("clear", self.inner.clear(id)).await
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.count("list", self.inner.list(after, limit)).await
    }

    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
        self.count("recent", self.inner.recent(query)).await
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.count("purge", self.inner.purge_expired()).await
    }

    fn searches(&self) -> bool {
        self.inner.searches()
    }

    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        self.count("search", self.inner.search(id, query)).await
    }

    fn keeps_vectors(&self) -> bool {
        self.inner.keeps_vectors()
    }

    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        self.count("put_vectors", self.inner.put_vectors(id, vectors)).await
    }

    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        self.count("unembedded", self.inner.unembedded(id, model, dim, after, limit))
            .await
    }

    fn keeps_facts(&self) -> bool {
        self.inner.keeps_facts()
    }

    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        self.count("load_facts", self.inner.load_facts(user)).await
    }

    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        let Ok(result) = tokio::time::timeout(self.timeout, self.inner.commit_facts(user, commit)).await else {
            return Err(self.timed_out("commit_facts"));
        };
        // Lost to another writer: the facts writer reloads and retries; not a failure.
        if let Err(e) = &result
            && !e.is_conflict()
        {
            self.metrics.store_error("commit_facts", store_kind(e.kind()));
        }
        result
    }

    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        self.count("fact_history", self.inner.fact_history(user, fact)).await
    }

    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        self.count("forget_user", self.inner.forget_user(user)).await
    }
}
