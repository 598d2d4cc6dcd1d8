//! The [`Store`] trait that durable backends implement, the records it moves, and everything
//! else a store implementer needs: [`Commit`] (built only by the core), [`SharedMessages`],
//! [`StoreError`] and its kinds, the counter names stored with token counts, and
//! [`redact_url`], the one way a store URL is printed. An application needs only what the crate
//! root re-exports.
//!
//! For stores that talk to a database server, the rules they share: the timeouts' URL
//! parameters and builder settings ([`TimeoutSettings`], [`Timeouts`]), the schema-version
//! check ([`SchemaVersion`]), the errors of an unanswered statement ([`statement_timed_out`],
//! [`outcome_unknown`]), and the conversions to and from 64-bit columns ([`to_bigint`],
//! [`ttl_micros`], [`stored_counter`]) and the rows of the load and history statements
//! ([`SqlColumns`], [`load_snapshot`], [`history_messages`]).
//!
//! A store keeps, per conversation: the current system message, an append-only log of the
//! other messages numbered by sequence, the sequence where the window starts, and a version
//! that every commit bumps. It never decides which messages stay:
//! [`ChatMemory`](crate::ChatMemory) computes the new window start from the loaded tail and the
//! new messages and hands the store a [`Commit`].

use std::sync::Arc;

pub use crate::commit::{Commit, CommitBuilder};
pub use crate::error::{StoreError, StoreErrorKind};
pub use crate::redact::{HIDDEN_URL, SecretUrl, redact_url};
pub use crate::shared_messages::SharedMessages;
pub use crate::tokens::{CounterName, UNCOUNTED};
pub use columns::{
    HISTORY_COLUMNS, LOAD_COLUMNS, RowReader, SqlColumns, history_messages, load_snapshot, stored_counter, to_bigint,
    ttl_micros,
};
pub use recent::{RecentConversation, RecentCursor, RecentPage, RecentQuery, now_micros, prefix_end, unix_micros};
pub use schema_version::SchemaVersion;
pub use server_errors::{outcome_unknown, statement_timed_out};
pub use timeouts::{
    CONNECT_TIMEOUT_PARAM, POOL_TIMEOUT_PARAM, STATEMENT_TIMEOUT_PARAM, TIMEOUT_PARAM, TIMEOUT_PARAMS, TimeoutSettings,
    Timeouts,
};

mod columns;
mod recent;
mod schema_version;
mod server_errors;
mod timeouts;

use async_trait::async_trait;

use crate::id::ConversationId;
use crate::message::Message;
use crate::summary::Summary;

/// A message as stored: its sequence number and its token count, computed once when added.
///
/// Every store keeps the message as the JSON of [`message_json`](StoredMessage::message_json)
/// and reads it back with [`from_json`](StoredMessage::from_json): one encoding, one
/// corrupt-data error.
///
/// ```
/// use chatmem::{ConversationId, Message};
/// use chatmem::store::{StoredMessage, StoreErrorKind};
/// let id = ConversationId::new("c1")?;
/// let m = StoredMessage::new(7, 3, Message::user("hi"));
/// let json = m.message_json()?;
/// assert_eq!(StoredMessage::from_json(&id, 7, 3, json.as_bytes())?, m);
/// let bad = StoredMessage::from_json(&id, 8, 1, br#"{"role":"wizard"}"#).unwrap_err();
/// assert_eq!(bad.kind(), StoreErrorKind::Corrupt);
/// assert!(bad.to_string().contains("seq 8"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the conversation's log; strictly increasing, never reused.
    pub seq: u64,
    /// Token count by the counter of the memory that added it.
    pub tokens: u32,
    /// The [name](crate::TokenCounter::name) of the counter that made `tokens`; `None` for
    /// data written before chatmem recorded it (taken as is). A memory whose counter has
    /// another name recounts the message when it loads it.
    pub counted_by: Option<CounterName>,
    /// The message, shared: a snapshot, a window and a plan hold the same message without
    /// copying it (clone it out with `Message::clone(&stored.message)` to own one).
    pub message: Arc<Message>,
}

impl StoredMessage {
    /// A stored message whose counter is not recorded.
    pub fn new(seq: u64, tokens: u32, message: impl Into<Arc<Message>>) -> Self {
        Self {
            seq,
            tokens,
            counted_by: None,
            message: message.into(),
        }
    }

    /// The message, owned: taken out when nothing else shares it, copied otherwise.
    ///
    /// ```
    /// let stored = chatmem::store::StoredMessage::new(1, 2, chatmem::Message::user("hi"));
    /// assert_eq!(stored.into_message(), chatmem::Message::user("hi"));
    /// ```
    pub fn into_message(self) -> Message {
        Arc::unwrap_or_clone(self.message)
    }

    /// The same message, its count made by the counter named `counter`.
    pub fn counted_by(mut self, counter: impl Into<CounterName>) -> Self {
        self.counted_by = Some(counter.into());
        self
    }

    /// The message as the JSON every store keeps (the OpenAI Chat Completions shape plus
    /// chatmem's fields, as [`Message`]'s `Serialize` writes it).
    ///
    /// # Errors
    /// [`StoreErrorKind::InvalidInput`] if the message cannot be written as JSON.
    pub fn message_json(&self) -> Result<String, StoreError> {
        serde_json::to_string(&*self.message).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidInput,
                format!("message seq {} cannot be written as JSON", self.seq),
            )
            .with_source(e)
        })
    }

    /// Reads a message of conversation `id` stored at `seq` as `json`.
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] naming the conversation and the seq when `json` is not a
    /// valid message.
    pub fn from_json(id: &ConversationId, seq: u64, tokens: u32, json: &[u8]) -> Result<Self, StoreError> {
        let message: Message = serde_json::from_slice(json)
            .map_err(|e| StoreError::corrupt(id, format!("message seq {seq} is not a valid message")).with_source(e))?;
        Ok(Self::new(seq, tokens, message))
    }

    /// [`from_json`](StoredMessage::from_json) for databases that keep seqs and token counts
    /// as signed 64-bit integers (SQLite, PostgreSQL).
    ///
    /// # Errors
    /// [`StoreErrorKind::Corrupt`] naming the conversation and the seq when a number is out of
    /// range or `json` is not a valid message.
    pub fn from_columns(id: &ConversationId, seq: i64, tokens: i64, json: &[u8]) -> Result<Self, StoreError> {
        let seq = u64::try_from(seq).map_err(|_| StoreError::corrupt(id, format!("message seq {seq} is negative")))?;
        let tokens = u32::try_from(tokens)
            .map_err(|_| StoreError::corrupt(id, format!("message seq {seq} has token count {tokens}")))?;
        Self::from_json(id, seq, tokens, json)
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
/// start on. An unknown (or expired) conversation loads as [`Snapshot::empty`], which is
/// also the [`Default`].
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Bumped by every commit; 0 means the conversation does not exist.
    pub version: u64,
    /// The system message, if any (its `seq` is the sequence at which it was set).
    pub system: Option<StoredMessage>,
    /// The first sequence inside the window.
    pub window_start: u64,
    /// The sequence the next appended message gets.
    pub next_seq: u64,
    /// Messages with `seq >= window_start`, oldest first (shared with the store when it
    /// keeps them in memory: loading copies none of them).
    pub messages: SharedMessages,
    /// The summary of what left the window, if the conversation has one.
    pub summary: Option<Summary>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Self::empty()
    }
}

impl Snapshot {
    /// The snapshot of a conversation that does not exist: version 0, sequences from 1.
    ///
    /// ```
    /// use chatmem::store::Snapshot;
    /// assert_eq!(Snapshot::default(), Snapshot::empty());
    /// assert_eq!((Snapshot::empty().window_start, Snapshot::empty().next_seq), (1, 1));
    /// ```
    pub fn empty() -> Self {
        Self {
            version: 0,
            system: None,
            window_start: 1,
            next_seq: 1,
            messages: SharedMessages::new(),
            summary: None,
        }
    }

    /// Whether the conversation exists.
    pub fn exists(&self) -> bool {
        self.version > 0
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
/// # The contract
/// Every store passes the conformance suite in `chatmem-test`; this is what it checks.
///
/// - **Per conversation** a store keeps a version, the system message, an append-only log of
///   the other messages (each with its seq and token count), the window start, the next
///   seq and the [`Summary`] (kept as [`Summary::to_json`] writes it). An unknown conversation, an expired one and a cleared one are all the same: they
///   [`load`](Store::load) as [`Snapshot::empty`] (version 0) and a commit expecting
///   version 0 creates them anew.
/// - [`load`](Store::load) returns the state (the summary included) and the messages with
///   `seq >= window_start`, oldest first. Durable backends make it one round trip.
/// - [`commit`](Store::commit) applies a [`Commit`] **atomically and only if** the
///   conversation is still at [`Commit::expected_version`]; otherwise it changes nothing and
///   fails with [`StoreError::conflict`]. Applying means: replace the system message if the
///   commit carries one; append [`Commit::appended`] as they are (their seqs are already
///   right); set the window start to [`Commit::window_start`] and the next seq to
///   [`Commit::next_seq`]; replace the summary if the commit carries one
///   ([`Commit::summary`]); delete messages below [`Commit::delete_below`], if set; set the
///   expiry to now + [`Commit::ttl`] (or none); bump the version by one and
///   return it. A store does not re-check a commit: [`Commit`] cannot be built invalid.
///   Durable backends make it one round trip.
/// - [`history`](Store::history) returns up to `limit` kept messages with `seq > after`,
///   oldest first; `limit` 0 returns none.
/// - [`clear`](Store::clear) deletes everything of the conversation and says whether it
///   existed (an expired conversation did not).
/// - [`list`](Store::list) returns up to `limit` ids greater than `after`, ascending by their
///   UTF-8 bytes, never an expired one; `limit` 0 is treated as 1; [`Page::next`] is set
///   exactly when more ids follow.
/// - [`recent`](Store::recent) lists live conversations whose id starts with the query's `prefix`, most
///   recently committed first (those committed in the same microsecond by id, descending),
///   each with when it was last committed and when it expires ([`RecentConversation`]),
///   after `before`, up to `limit` (0 is treated as 1), [`RecentPage::next`] set exactly when
///   more follow. A commit records its time by the store's clock.
/// - [`purge_expired`](Store::purge_expired) deletes expired conversations now and returns
///   how many; backends that expire data by themselves keep the default.
/// - Errors are [`StoreError`]s whose [`kind`](StoreError::kind) says what happened: a lost
///   version check is `Conflict`, an unreachable backend `Unavailable`, unreadable data
///   `Corrupt` (use [`StoreError::corrupt`] and [`StoredMessage::from_json`]).
///
/// The trait is object safe: `Arc<dyn Store>` works.
///
/// # A complete store
/// A new backend needs nothing more than this (a map behind a lock, without expiry):
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Mutex;
/// use async_trait::async_trait;
/// use chatmem::{ConversationId, Page, Store};
/// use chatmem::store::{Commit, RecentConversation, RecentPage, RecentQuery, Snapshot, StoreError, StoredMessage, now_micros};
///
/// #[derive(Debug, Default)]
/// struct MapStore(Mutex<BTreeMap<ConversationId, (Snapshot, Vec<StoredMessage>, i64)>>);
///
/// #[async_trait]
/// impl Store for MapStore {
///     async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
///         let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
///         Ok(map.get(id).map_or_else(Snapshot::empty, |(state, log, _)| Snapshot {
///             messages: log.iter().filter(|m| m.seq >= state.window_start).cloned().collect(),
///             ..state.clone()
///         }))
///     }
///
///     async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
///         let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
///         let (state, log, updated) = map.entry(id.clone()).or_insert_with(|| (Snapshot::empty(), Vec::new(), 0));
///         if state.version != commit.expected_version() {
///             return Err(StoreError::conflict());
///         }
///         state.version += 1;
///         *updated = now_micros();
///         state.window_start = commit.window_start();
///         state.next_seq = commit.next_seq();
///         let delete_below = commit.delete_below();
///         if let Some(summary) = commit.summary() {
///             state.summary = Some(summary.clone());
///         }
///         let (system, appended) = commit.into_messages();
///         state.system = system.or(state.system.take());
///         log.extend(appended);
///         if let Some(below) = delete_below {
///             log.retain(|m| m.seq >= below);
///         }
///         Ok(state.version)
///     }
///
///     async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
///         let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
///         let log = map.get(id).map(|(_, log, _)| log.as_slice()).unwrap_or_default();
///         Ok(log.iter().filter(|m| m.seq > after).take(limit).cloned().collect())
///     }
///
///     async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
///         Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id).is_some())
///     }
///
///     async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
///         let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
///         let limit = limit.max(1);
///         let ids = map.keys().filter(|id| after.is_none_or(|a| *id > a)).take(limit + 1).cloned().collect();
///         Ok(Page::from_overfetch(ids, limit))
///     }
///
///     async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
///         let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
///         let (prefix, before, limit) = (query.prefix.as_str(), query.before.as_ref(), query.limit.max(1));
///         let mut found: Vec<RecentConversation> = map
///             .iter()
///             .filter(|(id, (_, _, at))| id.as_str().starts_with(prefix) && before.is_none_or(|b| b.comes_before(*at, id)))
///             .map(|(id, (_, _, at))| RecentConversation { id: id.clone(), updated_micros: *at, expires_micros: None })
///             .collect();
///         found.sort_by(|a, b| (b.updated_micros, &b.id).cmp(&(a.updated_micros, &a.id)));
///         found.truncate(limit + 1);
///         Ok(RecentPage::from_overfetch(found, limit))
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = chatmem::ChatMemory::new(MapStore::default());
/// let id = ConversationId::new("c1")?;
/// memory.add(&id, [chatmem::Message::user("hi"), chatmem::Message::assistant("hello")]).await?;
/// assert_eq!(memory.get(&id).await?.len(), 2);
/// assert_eq!(memory.recent("c", None, 10).await?.conversations[0].id, id);
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The conversation's state and its messages from the window start on.
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError>;

    /// Applies `commit` atomically if the conversation's version is still
    /// `commit.expected_version`; returns the new version.
    ///
    /// A store keeps the [`token`](Commit::token) of the last commit with the conversation and
    /// answers a commit that finds the version already at `expected_version + 1` with that very
    /// token as applied (returning that version), so the same commit sent again after a lost
    /// reply is stored once (the conformance suite checks it). A network store, after a timeout
    /// or a lost connection, resends the same commit once before it reports a failure; when
    /// even the resend gets no answer the error says that the outcome is unknown (reload to
    /// find out). The last token only is kept: a resend that arrives after another writer's
    /// commit reports a conflict although the first send applied.
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError>;

    /// Up to `limit` stored messages with `seq > after` (all kept messages, evicted ones
    /// included under [`Retention::KeepHistory`]), oldest first.
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError>;

    /// Deletes the conversation; returns whether it existed.
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError>;

    /// Up to `limit` conversation ids greater than `after`, ascending.
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError>;

    /// Up to `query.limit` live conversations whose id starts with `query.prefix` (`""`: all),
    /// most recently committed first, after `query.before` (see the contract above).
    async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError>;

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
            async fn recent(&self, query: &RecentQuery) -> Result<RecentPage, StoreError> {
                (**self).recent(query).await
            }
            async fn purge_expired(&self) -> Result<u64, StoreError> {
                (**self).purge_expired().await
            }
        }
    )*};
}

forward_store!(Arc<S>, Box<S>, &S);
