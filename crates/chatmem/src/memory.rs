//! [`ChatMemory`]: a store plus a window policy, the type applications use.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::id::ConversationId;
use crate::memory_store::InMemoryStore;
use crate::message::Message;
use crate::store::{Commit, Page, Retention, Snapshot, Store, StoredMessage};
use crate::tokens::{Cl100k, TokenCounter};
use crate::window::{Selection, WindowPolicy, select};

/// How many times a commit that lost a version check is retried by default.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 64;

/// Conversation memory: a [`Store`] plus a [`WindowPolicy`].
///
/// Adding messages to a conversation processes them in order: a system message with the
/// same text as the current one is ignored, a different one replaces it; every other
/// message is appended; then the policy is applied and messages outside the window are
/// evicted (deleted under [`Retention::DropEvicted`], kept under
/// [`Retention::KeepHistory`]). See [`window`](crate::window) for the contract.
///
/// Every token count is computed once, when its message is added.
/// `ChatMemory` is `Send + Sync`; many tasks may use one at once. Commits are
/// version-checked and retried, so concurrent writers never lose each other's messages and
/// each batch stays contiguous.
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, WindowPolicy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = ChatMemory::builder(InMemoryStore::new())
///     .policy(WindowPolicy::messages(5)?)
///     .build();
/// let id = ConversationId::new("demo")?;
/// memory.add(&id, [
///     Message::system("old rules"),
///     Message::user("u1"), Message::assistant("a1"),
///     Message::user("u2"), Message::assistant("a2"),
///     Message::user("u3"), Message::assistant("a3"),
///     Message::system("new rules"),
/// ]).await?;
/// let texts: Vec<String> = memory.get(&id).await?.iter()
///     .map(|m| m.text().unwrap_or_default().into_owned()).collect();
/// assert_eq!(texts, ["new rules", "u2", "a2", "u3", "a3"]);
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ChatMemory<S = InMemoryStore> {
    store: S,
    policy: WindowPolicy,
    retention: Retention,
    ttl: Option<Duration>,
    counter: Arc<dyn TokenCounter>,
    max_attempts: u32,
}

/// Builds a [`ChatMemory`]; see [`ChatMemory::builder`].
#[derive(Debug)]
pub struct ChatMemoryBuilder<S> {
    inner: ChatMemory<S>,
}

impl<S: Store> ChatMemoryBuilder<S> {
    /// The window policy (default: 20 messages, starting on a user message).
    pub fn policy(mut self, policy: WindowPolicy) -> Self {
        self.inner.policy = policy;
        self
    }

    /// What happens to evicted messages (default [`Retention::DropEvicted`]).
    pub fn retention(mut self, retention: Retention) -> Self {
        self.inner.retention = retention;
        self
    }

    /// Expire a conversation this long after its last write (default: never).
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.inner.ttl = ttl;
        self
    }

    /// The token counter used for new messages (default [`Cl100k`]).
    pub fn counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.inner.counter = counter;
        self
    }

    /// How many times a commit that lost to a concurrent writer is tried (default
    /// [`DEFAULT_MAX_ATTEMPTS`], at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.inner.max_attempts = attempts.max(1);
        self
    }

    /// The memory.
    pub fn build(self) -> ChatMemory<S> {
        self.inner
    }
}

/// A loaded conversation: the snapshot read in one round trip and the window chosen from it.
///
/// Returned by [`ChatMemory::load`]; pass it back to [`ChatMemory::commit`] to write a turn
/// without loading again.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    snapshot: Snapshot,
    selection: Selection,
}

impl Window {
    fn new(snapshot: Snapshot, policy: &WindowPolicy) -> Self {
        let selection = select(&snapshot.messages, snapshot.system.as_ref().map(|s| s.tokens), policy);
        Self { snapshot, selection }
    }

    /// The system message, if any.
    pub fn system(&self) -> Option<&Message> {
        self.snapshot.system.as_ref().map(|s| &s.message)
    }

    /// The non-system messages in the window, oldest first.
    pub fn turns(&self) -> impl Iterator<Item = &Message> + '_ {
        self.selection
            .indices
            .iter()
            .map(|&i| &self.snapshot.messages[i].message)
    }

    /// What the model sees: the system message first, then the window.
    pub fn messages(&self) -> Vec<Message> {
        self.system().into_iter().chain(self.turns()).cloned().collect()
    }

    /// What the model sees, taking the messages out of the window (no copy).
    pub fn into_messages(self) -> Vec<Message> {
        let Snapshot { system, messages, .. } = self.snapshot;
        let mut slots: Vec<Option<StoredMessage>> = messages.into_iter().map(Some).collect();
        let turns = self
            .selection
            .indices
            .iter()
            .filter_map(|&i| slots.get_mut(i).and_then(Option::take));
        system.into_iter().chain(turns).map(|s| s.message).collect()
    }

    /// The number of messages in [`messages`](Window::messages).
    pub fn len(&self) -> usize {
        usize::from(self.snapshot.system.is_some()) + self.selection.indices.len()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The token count of the window by the cached counts, list overhead included.
    pub fn tokens(&self) -> u64 {
        let system = self.snapshot.system.as_ref().map_or(0, |s| u64::from(s.tokens));
        let turns: u64 = self
            .selection
            .indices
            .iter()
            .map(|&i| u64::from(self.snapshot.messages[i].tokens))
            .sum();
        crate::tokens::PER_LIST as u64 + system + turns
    }

    /// The store snapshot behind the window.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

impl ChatMemory<InMemoryStore> {
    /// A memory over a new, empty [`InMemoryStore`] with the default policy.
    pub fn in_memory() -> Self {
        Self::new(InMemoryStore::new())
    }
}

impl<S: Store> ChatMemory<S> {
    /// A memory over `store` with the default policy: 20 messages, start on a user message,
    /// evicted messages deleted, no TTL, `cl100k_base` token counts.
    pub fn new(store: S) -> Self {
        Self {
            store,
            policy: WindowPolicy::default(),
            retention: Retention::default(),
            ttl: None,
            counter: Arc::new(Cl100k),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// A builder starting from [`ChatMemory::new`]'s defaults.
    pub fn builder(store: S) -> ChatMemoryBuilder<S> {
        ChatMemoryBuilder {
            inner: Self::new(store),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The window policy.
    pub fn policy(&self) -> &WindowPolicy {
        &self.policy
    }

    /// The retention setting.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The token counter.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    /// What the model sees for conversation `id`: the system message first, then the
    /// window. Empty for an unknown conversation. One store round trip.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn get(&self, id: &ConversationId) -> Result<Vec<Message>> {
        Ok(self.load(id).await?.into_messages())
    }

    /// Loads conversation `id` in one round trip, for a caller that will
    /// [`commit`](ChatMemory::commit) a turn after calling a model.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn load(&self, id: &ConversationId) -> Result<Window> {
        let snapshot = self
            .store
            .load(id)
            .await
            .map_err(|source| Error::Store { id: id.clone(), source })?;
        Ok(Window::new(snapshot, &self.policy))
    }

    /// Adds `messages` to conversation `id` as one atomic batch, then applies the window.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::TooMuchContention`] when concurrent
    /// writers won every retry. Either way nothing of the batch was written.
    pub async fn add(&self, id: &ConversationId, messages: impl IntoIterator<Item = Message>) -> Result<()> {
        let prepared = self.count(messages);
        if prepared.is_empty() {
            return Ok(());
        }
        let loaded = self.load(id).await?;
        self.commit_counted(id, loaded, prepared, false).await.map(drop)
    }

    /// Commits `messages` (a whole turn) to conversation `id`, starting from `loaded`: one
    /// round trip unless another writer committed since `loaded` was read, in which case
    /// the conversation is reloaded and the window recomputed (the batch stays whole and
    /// contiguous). Returns the window after the commit.
    ///
    /// # Errors
    /// As [`add`](ChatMemory::add).
    pub async fn commit(
        &self,
        id: &ConversationId,
        loaded: Window,
        messages: impl IntoIterator<Item = Message>,
    ) -> Result<Window> {
        let prepared = self.count(messages);
        self.commit_counted(id, loaded, prepared, true).await
    }

    fn count(&self, messages: impl IntoIterator<Item = Message>) -> Vec<(Message, u32)> {
        messages
            .into_iter()
            .map(|m| {
                let tokens = u32::try_from(self.counter.count_message(&m)).unwrap_or(u32::MAX);
                (m, tokens)
            })
            .collect()
    }

    /// Commits, retrying on conflicts. Builds the window after the commit only when
    /// `want_window` (copying the window is most of a turn's cost for large windows).
    async fn commit_counted(
        &self,
        id: &ConversationId,
        mut loaded: Window,
        prepared: Vec<(Message, u32)>,
        want_window: bool,
    ) -> Result<Window> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Some(planned) = plan(&loaded.snapshot, &prepared, &self.policy, self.retention, self.ttl) else {
                return Ok(loaded);
            };
            let after = want_window.then(|| planned.snapshot_after(&loaded.snapshot));
            match self.store.commit(id, planned.commit).await {
                Ok(version) => {
                    let Some(mut snapshot) = after else {
                        return Ok(loaded);
                    };
                    snapshot.version = version;
                    return Ok(Window::new(snapshot, &self.policy));
                }
                Err(e) if e.is_conflict() && attempt < self.max_attempts => {
                    tracing::debug!(conversation = %id, attempt, "commit lost a version check; reloading");
                    backoff(attempt).await;
                    loaded = self.load(id).await?;
                }
                Err(e) if e.is_conflict() => {
                    return Err(Error::TooMuchContention {
                        id: id.clone(),
                        attempts: attempt,
                    });
                }
                Err(source) => return Err(Error::Store { id: id.clone(), source }),
            }
        }
    }

    /// Deletes conversation `id`; returns whether it existed.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn clear(&self, id: &ConversationId) -> Result<bool> {
        self.store
            .clear(id)
            .await
            .map_err(|source| Error::Store { id: id.clone(), source })
    }

    /// Everything stored for conversation `id`: the system message first, then every kept
    /// message in order. Under [`Retention::KeepHistory`] that is the whole transcript;
    /// under [`Retention::DropEvicted`] it is what has not been evicted yet.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn history(&self, id: &ConversationId) -> Result<Vec<Message>> {
        const PAGE: usize = 1000;
        let store_err = |source| Error::Store { id: id.clone(), source };
        let snapshot = self.store.load(id).await.map_err(store_err)?;
        let mut out: Vec<Message> = snapshot.system.into_iter().map(|s| s.message).collect();
        let mut after = 0;
        loop {
            let page = self.store.history(id, after, PAGE).await.map_err(store_err)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            let full = page.len() == PAGE;
            out.extend(page.into_iter().map(|m| m.message));
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// One page of conversation ids after `after`, ascending.
    ///
    /// # Errors
    /// [`Error::StoreGlobal`] when the store fails.
    pub async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page> {
        self.store.list(after, limit).await.map_err(Error::StoreGlobal)
    }

    /// Removes expired conversations now; returns how many.
    ///
    /// # Errors
    /// [`Error::StoreGlobal`] when the store fails.
    pub async fn purge_expired(&self) -> Result<u64> {
        self.store.purge_expired().await.map_err(Error::StoreGlobal)
    }
}

/// A commit and what is needed to describe the conversation after it.
struct Planned {
    commit: Commit,
    system: Option<StoredMessage>,
}

impl Planned {
    /// The snapshot after the commit (its version still the loaded one).
    fn snapshot_after(&self, loaded: &Snapshot) -> Snapshot {
        let start = self.commit.window_start;
        Snapshot {
            version: loaded.version,
            system: self.system.clone(),
            window_start: start,
            next_seq: self.commit.next_seq(loaded.next_seq),
            messages: loaded
                .messages
                .iter()
                .chain(&self.commit.append)
                .filter(|m| m.seq >= start)
                .cloned()
                .collect(),
        }
    }
}

/// Computes the commit for adding `prepared` to `snapshot`; `None` when nothing would
/// change (only repeated system messages).
fn plan(
    snapshot: &Snapshot,
    prepared: &[(Message, u32)],
    policy: &WindowPolicy,
    retention: Retention,
    ttl: Option<Duration>,
) -> Option<Planned> {
    let mut system = snapshot.system.clone();
    let mut new_system = None;
    let mut append = Vec::new();
    let mut seq = snapshot.next_seq;
    for (message, tokens) in prepared {
        if message.is_system() {
            if system.as_ref().is_some_and(|s| s.message.text() == message.text()) {
                continue;
            }
            let s = StoredMessage::new(seq, *tokens, message.clone());
            system = Some(s.clone());
            new_system = Some(s);
        } else {
            append.push(StoredMessage::new(seq, *tokens, message.clone()));
            seq += 1;
        }
    }
    if append.is_empty() && new_system.is_none() {
        return None;
    }
    let all: Vec<&StoredMessage> = snapshot.messages.iter().chain(&append).collect();
    let selection = select(&all, system.as_ref().map(|s| s.tokens), policy);
    let window_start = all.get(selection.start).map_or(seq, |m| m.seq);
    let commit = Commit {
        expected_version: snapshot.version,
        system: new_system,
        append,
        window_start,
        retention,
        ttl,
    };
    Some(Planned { commit, system })
}

/// Waits before retrying a lost commit: exponential with full jitter, capped at 50 ms, so
/// that writers that collided spread out. A runtime-independent timer: a tokio runtime built
/// without timers (or another executor) must not make a retry panic.
async fn backoff(attempt: u32) {
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    let ms = fastrand::u64(0..=cap_ms);
    futures_timer::Delay::new(Duration::from_millis(ms)).await;
}
