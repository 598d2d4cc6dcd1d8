//! [`MeteredStore`]: the server's store, counted. Every store call of the server passes
//! here (through [`chatmem::ChatMemory`], whose retries are invisible from outside), so
//! commits, lost version checks and store errors are counted where they happen.

use std::sync::Arc;

use async_trait::async_trait;
use chatmem::store::{Commit, Snapshot, StoreError, StoredMessage};
use chatmem::{ConversationId, Page, Store};

use crate::metrics::{Metrics, store_kind};

/// A store that counts what its inner store answers.
#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Metrics,
}

impl MeteredStore {
    pub(crate) fn new(inner: Arc<dyn Store>, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }

    fn count<T>(&self, op: &'static str, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &result {
            self.metrics.store_error(op, store_kind(e.kind()));
        }
        result
    }
}

#[async_trait]
impl Store for MeteredStore {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        self.count("load", self.inner.load(id).await)
    }

    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let result = self.inner.commit(id, commit).await;
        match &result {
            Ok(_) => self.metrics.commit(),
            // Lost to another writer: ChatMemory reloads and retries; not a failure.
            Err(e) if e.is_conflict() => self.metrics.conflict(),
            Err(e) => self.metrics.store_error("commit", store_kind(e.kind())),
        }
        result
    }

    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.count("history", self.inner.history(id, after, limit).await)
    }

    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.count("clear", self.inner.clear(id).await)
    }

    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.count("list", self.inner.list(after, limit).await)
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.count("purge", self.inner.purge_expired().await)
    }
}
