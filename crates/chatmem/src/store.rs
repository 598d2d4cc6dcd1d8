//! The [`Store`] trait that durable backends implement, and the records it moves.
//!
//! A store keeps, per conversation: the current system message, an append-only log of the
//! other messages numbered by sequence, the sequence where the window starts, and a version
//! that every commit bumps. It never decides which messages stay: [`ChatMemory`]
//! (crate::ChatMemory) computes the new window start from the loaded tail and the new
//! messages and hands the store a [`Commit`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::id::ConversationId;
use crate::message::Message;

/// A message as stored: its sequence number and its token count, computed once when added.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the conversation's log; strictly increasing, never reused.
    pub seq: u64,
    /// Token count by the counter of the memory that added it.
    pub tokens: u32,
    /// The message.
    pub message: Message,
}

impl StoredMessage {
    /// A stored message.
    pub fn new(seq: u64, tokens: u32, message: Message) -> Self {
        Self { seq, tokens, message }
    }
}

/// Whether messages that leave the window are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// Evicted messages are deleted (default): memory, not history.
    #[default]
    DropEvicted,
    /// Evicted messages are kept and [`ChatMemory::history`](crate::ChatMemory::history)
    /// returns them.
    KeepHistory,
}

/// What [`Store::load`] returns: a conversation's state and the messages from its window
/// start on. An unknown (or expired) conversation loads as [`Snapshot::empty`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Bumped by every commit; 0 means the conversation does not exist.
    pub version: u64,
    /// The system message, if any (its `seq` is the sequence at which it was set).
    pub system: Option<StoredMessage>,
    /// The first sequence inside the window.
    pub window_start: u64,
    /// The sequence the next appended message gets.
    pub next_seq: u64,
    /// Messages with `seq >= window_start`, oldest first.
    pub messages: Vec<StoredMessage>,
}

impl Snapshot {
    /// The snapshot of a conversation that does not exist.
    pub fn empty() -> Self {
        Self {
            version: 0,
            system: None,
            window_start: 1,
            next_seq: 1,
            messages: Vec::new(),
        }
    }

    /// Whether the conversation exists.
    pub fn exists(&self) -> bool {
        self.version > 0
    }
}

/// One atomic write: what [`Store::commit`] applies if the version still matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// The version the writer loaded; the commit fails with a conflict if it changed.
    pub expected_version: u64,
    /// A replacement system message, or `None` to keep the current one.
    pub system: Option<StoredMessage>,
    /// New messages, with consecutive sequences starting at the loaded `next_seq`.
    pub append: Vec<StoredMessage>,
    /// The new window start (never below the old one).
    pub window_start: u64,
    /// Delete messages below `window_start` ([`Retention::DropEvicted`]) or keep them.
    pub retention: Retention,
    /// Expire the whole conversation this long after this commit; `None` never expires.
    pub ttl: Option<Duration>,
}

impl Commit {
    /// The sequence after the last appended message, given the loaded `next_seq`.
    pub fn next_seq(&self, loaded_next_seq: u64) -> u64 {
        self.append.last().map_or(loaded_next_seq, |m| m.seq + 1)
    }
}

/// A page of conversation ids from [`Store::list`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// Ids in ascending order.
    pub ids: Vec<ConversationId>,
    /// Pass this as `after` to get the next page; `None` when this was the last.
    pub next: Option<ConversationId>,
}

impl Page {
    /// A page from up to `limit + 1` ascending ids fetched for a page of `limit`: the extra
    /// id only tells that more remain.
    ///
    /// ```
    /// use chatmem::{ConversationId, Page};
    /// let ids: Vec<ConversationId> = ["a", "b", "c"].iter().map(|s| ConversationId::new(*s).unwrap()).collect();
    /// let page = Page::from_overfetch(ids, 2);
    /// assert_eq!(page.ids.len(), 2);
    /// assert_eq!(page.next.as_ref().map(|id| id.as_str()), Some("b"));
    /// ```
    pub fn from_overfetch(mut ids: Vec<ConversationId>, limit: usize) -> Self {
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().cloned()
        } else {
            None
        };
        Self { ids, next }
    }
}

/// A conversation store: where memory lives.
///
/// Required: [`load`](Store::load), [`commit`](Store::commit), [`history`](Store::history),
/// [`clear`](Store::clear) and [`list`](Store::list); [`purge_expired`](Store::purge_expired)
/// has a default. Durable backends make `load` one round trip and `commit` one atomic round
/// trip that checks `expected_version` and fails with
/// [`StoreErrorKind::Conflict`](crate::StoreErrorKind::Conflict) if another writer won.
///
/// The trait is object safe: `Arc<dyn Store>` works.
///
/// ```
/// use chatmem::{ConversationId, InMemoryStore, Store};
/// # tokio_test_block_on(async {
/// let store = InMemoryStore::new();
/// let snap = store.load(&ConversationId::new("c1")?).await?;
/// assert!(!snap.exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The conversation's state and its messages from the window start on.
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError>;

    /// Applies `commit` atomically if the conversation's version is still
    /// `commit.expected_version`; returns the new version.
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError>;

    /// Up to `limit` stored messages with `seq > after` (all kept messages, evicted ones
    /// included under [`Retention::KeepHistory`]), oldest first.
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError>;

    /// Deletes the conversation; returns whether it existed.
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError>;

    /// Up to `limit` conversation ids greater than `after`, ascending.
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError>;

    /// Removes expired conversations now; returns how many. Stores whose backend expires
    /// data by itself keep the default, which does nothing.
    async fn purge_expired(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
}

macro_rules! forward_store {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<S: Store + ?Sized> Store for $ty {
            async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
                (**self).load(id).await
            }
            async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
                (**self).commit(id, commit).await
            }
            async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
                (**self).history(id, after, limit).await
            }
            async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
                (**self).clear(id).await
            }
            async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
                (**self).list(after, limit).await
            }
            async fn purge_expired(&self) -> Result<u64, StoreError> {
                (**self).purge_expired().await
            }
        }
    )*};
}

forward_store!(Arc<S>, Box<S>, &S);
