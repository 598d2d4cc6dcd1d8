//! What this crate's unit tests share (its integration tests use `chatmem-test`, which
//! depends on this crate and so cannot serve its unit tests).

/// Runs `f` to completion on a new current-thread runtime.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// A test store's [`Store`](crate::Store) impl: the conversation calls forwarded to its
/// `inner` store, then the calls given (the facts calls, say). The whole impl is made here so
/// that `async_trait` reads it expanded.
macro_rules! over_inner_store {
    ($ty:ty { $($calls:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Store for $ty {
            async fn load(
                &self,
                id: &$crate::ConversationId,
            ) -> Result<$crate::store::Snapshot, $crate::store::StoreError> {
                self.inner.load(id).await
            }
            async fn commit(
                &self,
                id: &$crate::ConversationId,
                commit: $crate::store::Commit,
            ) -> Result<u64, $crate::store::StoreError> {
                self.inner.commit(id, commit).await
            }
            async fn history(
                &self,
                id: &$crate::ConversationId,
                after: u64,
                limit: usize,
            ) -> Result<Vec<$crate::store::StoredMessage>, $crate::store::StoreError> {
                self.inner.history(id, after, limit).await
            }
            async fn clear(&self, id: &$crate::ConversationId) -> Result<bool, $crate::store::StoreError> {
                self.inner.clear(id).await
            }
            async fn list(
                &self,
                after: Option<&$crate::ConversationId>,
                limit: usize,
            ) -> Result<$crate::Page, $crate::store::StoreError> {
                self.inner.list(after, limit).await
            }
            async fn recent(
                &self,
                query: &$crate::store::RecentQuery,
            ) -> Result<$crate::store::RecentPage, $crate::store::StoreError> {
                self.inner.recent(query).await
            }
            $($calls)*
        }
    };
}

pub(crate) use over_inner_store;
