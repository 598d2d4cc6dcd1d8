//! The [`Store`] trait that durable backends implement, the records it moves, and everything
//! else a store implementer needs: [`Commit`] (built only by the core), a user's facts as
//! loaded and committed ([`StoredFacts`], [`FactsCommit`]) and as the JSON every store keeps
//! of them ([`fact_json`], [`read_fact`] and the rest), [`SharedMessages`],
//! [`StoreError`] and its kinds, the counter names stored with token counts,
//! [`redact_url`], the one way a store URL is printed, and [`split_ms_params`], the one way
//! chatmem's `chatmem_*_ms` URL parameters are read. An application needs only what the crate
//! root re-exports.
//!
//! What SQL stores share beyond this contract (their rows, columns, timeouts, schema
//! versions) lives in the `chatmem-sql` crate.
//!
//! A store keeps, per conversation: the current system message, an append-only log of the
//! other messages numbered by sequence, the sequence where the window starts, and a version
//! that every commit bumps. It never decides which messages stay:
//! [`ChatMemory`](crate::ChatMemory) computes the new window start from the loaded tail and the
//! new messages and hands the store a [`Commit`].

use std::sync::Arc;

pub use crate::commit::{Commit, CommitBuilder};
pub use crate::counter::{CounterName, UNCOUNTED};
pub use crate::error::{StoreError, StoreErrorKind};
pub use crate::recall::{
    IndexEntry, IndexTerms, IndexedMessage, LexicalHit, MessageVector, SearchQuery, SearchResult, Vector, VectorHit,
};
pub use crate::redact::{HIDDEN_URL, SecretUrl, redact_url};
pub use crate::shared_messages::SharedMessages;
pub use crate::snapshot::Snapshot;
pub use crate::stored_message::StoredMessage;
pub use facts::{FactsCommit, StoredFacts};
pub use facts_json::{change_json, fact_json, read_change, read_fact, read_fact_set};
pub use recent::{RecentConversation, RecentCursor, RecentPage, RecentQuery, now_micros, prefix_end, unix_micros};
pub use url_params::split_ms_params;

mod facts;
mod facts_json;
mod recent;
mod url_params;

use async_trait::async_trait;

use crate::facts::{FactChange, UserId};
use crate::id::ConversationId;
use crate::page::Page;
#[cfg(doc)]
use crate::{commit::Retention, summary::Summary};

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
/// - **Recall** (optional: [`searches`](Store::searches) says whether a store does it). A
///   store that searches writes a commit's [`Commit::index`] entries in the same atomic
///   commit as the messages, with the commit's time; [`search`](Store::search) then finds
///   them at once. It answers a [`SearchQuery`] with, over the conversation's indexed
///   messages, how many there are, their total length, each query term's document
///   frequency, and up to `limit` indexed messages with `seq < before` among each query term's
///   [`MAX_POSTINGS_PER_TERM`](crate::recall::MAX_POSTINGS_PER_TERM) most recent postings
///   before `before`, best first by [`bm25`](crate::recall::bm25) rounded to
///   [`SCORE_DECIMALS`](crate::recall::SCORE_DECIMALS) decimals, ties by `seq` descending,
///   each with its time, length and term frequencies ([`LexicalHit`]). Index entries go
///   wherever their messages go (cleared, expired, deleted below a start). Terms are
///   compared as exact strings: a store never parses them as a query language.
/// - **Vectors** (optional, for a store that searches: [`keeps_vectors`](Store::keeps_vectors)).
///   [`put_vectors`](Store::put_vectors) keeps one [`Vector`] per indexed message (a new one
///   replaces the old), written only where [`MessageVector::fits`] the message stored at its
///   seq, all in one atomic write; vectors go wherever their messages go. A
///   [`search`](Store::search) with a [`SearchQuery::vector`] also answers
///   [`SearchResult::vector_hits`]: the messages before `before` whose vector has the query
///   vector's model and dimension, ranked by
///   [`rank_by_similarity`](crate::recall::rank_by_similarity) of [`Vector::dot`].
///   [`unembedded`](Store::unembedded) pages through the indexed messages with `seq > after`
///   that have no vector of a model and dimension, oldest first (for re-embedding a store).
/// - **Facts** (optional: [`keeps_facts`](Store::keeps_facts)). Per [`UserId`], apart from
///   every conversation (clearing or expiring one leaves its user's facts), a store keeps a
///   [`StoredFacts`] (the current [`FactSet`](crate::facts::FactSet), its next id included,
///   and a version every facts commit bumps), the token of the last facts commit, and each
///   fact's history: its [`FactChange`]s in the order they were committed, kept after the fact
///   left the set (superseded or evicted). [`load_facts`](Store::load_facts) returns the
///   `StoredFacts` in one round trip; an unknown or forgotten user loads as
///   [`StoredFacts::default`] (version 0). [`commit_facts`](Store::commit_facts) applies a
///   [`FactsCommit`] **atomically and only if** the user is still at
///   [`FactsCommit::expected_version`]; otherwise it changes nothing and fails with
///   [`StoreError::facts_conflict`]. Applying means: replace the set with
///   [`FactsCommit::set`], drop the history of the facts in [`FactsCommit::dropped`], append
///   [`FactsCommit::history`] in its order, bump the version by one and return it, keep the
///   [`FactsCommit::token`] (a resent commit is answered as [`commit`](Store::commit)'s is). A
///   store does not re-check a facts commit: [`FactsCommit`] cannot be built invalid.
///   [`fact_history`](Store::fact_history) returns one fact's entries in order (none for a
///   fact never made or deleted); [`forget_user`](Store::forget_user) deletes the user's facts
///   and all their history and says whether there was anything. User ids are opaque: compared
///   as exact strings, never as patterns, so no two users ever see each other's facts.
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

    /// Whether the store indexes commits for recall and answers [`search`](Store::search).
    /// The default is `false`: a memory with recall refuses such a store when it is built.
    fn searches(&self) -> bool {
        false
    }

    /// The best indexed messages of the conversation for `query` (see the contract above).
    /// The default, for stores that do not search, fails with `InvalidInput`.
    async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
        let _ = (id, query);
        Err(StoreError::new(
            crate::error::StoreErrorKind::InvalidInput,
            "this store does not search (recall needs a store that does)",
        ))
    }

    /// Whether the store keeps vectors for recall ([`put_vectors`](Store::put_vectors), the
    /// vector half of [`search`](Store::search)). The default is `false`: a memory with
    /// embeddings refuses such a store when it is built.
    fn keeps_vectors(&self) -> bool {
        false
    }

    /// Keeps each of `vectors` on its message, where it [fits](MessageVector::fits) the message
    /// stored at its seq, in one atomic write; returns how many were kept. The default, for
    /// stores that keep no vectors, fails with `InvalidInput`.
    async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
        let _ = (id, vectors);
        Err(no_vectors())
    }

    /// Up to `limit` indexed messages with `seq > after` that have no vector of `model` with
    /// `dim` values, oldest first. The default, for stores that keep no vectors, fails with
    /// `InvalidInput`.
    async fn unembedded(
        &self,
        id: &ConversationId,
        model: &str,
        dim: usize,
        after: u64,
        limit: usize,
    ) -> Result<Vec<IndexedMessage>, StoreError> {
        let _ = (id, model, dim, after, limit);
        Err(no_vectors())
    }

    /// Whether the store keeps users' [facts](crate::facts) (the facts calls below). The
    /// default is `false`, and each facts call of such a store fails with `InvalidInput`, so
    /// that whatever needs facts can refuse the store up front instead of losing them.
    fn keeps_facts(&self) -> bool {
        false
    }

    /// The user's facts and their version, in one round trip: what a facts writer builds its
    /// [`FactsCommit`] on. An unknown or forgotten user is [`StoredFacts::default`].
    async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        let _ = user;
        Err(no_facts())
    }

    /// Applies `commit` atomically if the user's facts are still at
    /// [`expected_version`](FactsCommit::expected_version); returns the new version.
    ///
    /// Otherwise nothing changes and the error is [`StoreError::facts_conflict`]: the writer
    /// reloads and makes its change again on what it finds
    /// ([`apply_facts`](crate::facts::apply_facts) does), so a proposal made while another
    /// writer changed the facts never writes over newer facts. As for
    /// [`commit`](Store::commit), the token of the last facts commit is kept, and a commit
    /// that finds the version at `expected_version + 1` with its own token is answered with
    /// that version instead of being applied twice.
    async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
        let _ = (user, commit);
        Err(no_facts())
    }

    /// The history of the user's fact `fact`, in the order it was committed: what happened to
    /// it, when and why. Empty for a fact never made, deleted, or of a forgotten user.
    async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        let _ = (user, fact);
        Err(no_facts())
    }

    /// Deletes everything kept of the user's facts (the set, every fact's history, the
    /// version: the user loads as unknown after it); returns whether anything was kept (a
    /// facts commit applied since the user was last forgotten). Conversations are left as
    /// they are.
    async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
        let _ = user;
        Err(no_facts())
    }
}

fn no_vectors() -> StoreError {
    StoreError::new(
        crate::error::StoreErrorKind::InvalidInput,
        "this store keeps no vectors (embeddings need a store that does)",
    )
}

fn no_facts() -> StoreError {
    StoreError::new(
        crate::error::StoreErrorKind::InvalidInput,
        "this store keeps no facts (facts need a store that does)",
    )
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
            fn searches(&self) -> bool {
                (**self).searches()
            }
            async fn search(&self, id: &ConversationId, query: &SearchQuery) -> Result<SearchResult, StoreError> {
                (**self).search(id, query).await
            }
            fn keeps_vectors(&self) -> bool {
                (**self).keeps_vectors()
            }
            async fn put_vectors(&self, id: &ConversationId, vectors: &[MessageVector]) -> Result<usize, StoreError> {
                (**self).put_vectors(id, vectors).await
            }
            async fn unembedded(
                &self,
                id: &ConversationId,
                model: &str,
                dim: usize,
                after: u64,
                limit: usize,
            ) -> Result<Vec<IndexedMessage>, StoreError> {
                (**self).unembedded(id, model, dim, after, limit).await
            }
            fn keeps_facts(&self) -> bool {
                (**self).keeps_facts()
            }
            async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
                (**self).load_facts(user).await
            }
            async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
                (**self).commit_facts(user, commit).await
            }
            async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
                (**self).fact_history(user, fact).await
            }
            async fn forget_user(&self, user: &UserId) -> Result<bool, StoreError> {
                (**self).forget_user(user).await
            }
        }
    )*};
}

forward_store!(Arc<S>, Box<S>, &S);
