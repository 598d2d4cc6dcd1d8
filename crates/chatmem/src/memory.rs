//! [`ChatMemory`]: a store plus a window policy, the type applications use.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::id::ConversationId;
use crate::in_memory_store::InMemoryStore;
use crate::loaded_window::LoadedWindow;
use crate::message::Message;
use crate::store::{Page, Retention, Snapshot, Store};
use crate::tokens::{Cl100k, TokenCounter};
use crate::turn::{Plan, Turn, plan_with};
use crate::window::WindowPolicy;

/// The most messages one commit carries by default: a store applies a commit in one
/// statement or script, and a huge one would hold locks (or block Redis) for seconds.
pub const DEFAULT_MAX_BATCH_MESSAGES: usize = 10_000;

/// The most bytes of text one commit carries by default (16 MiB).
pub const DEFAULT_MAX_BATCH_BYTES: usize = 16 << 20;

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
///     .policy(WindowPolicy::messages(5))
///     .build()?;
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
    max_batch: (usize, usize),
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

    /// Expire a conversation this long after its last write (default: never). Must be
    /// positive; a TTL too long for a store to represent never expires.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.inner.ttl = Some(ttl);
        self
    }

    /// The token counter used for new messages (default [`Cl100k`]).
    pub fn counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.inner.counter = Arc::new(counter);
        self
    }

    /// How many times a commit that lost to a concurrent writer is tried (default
    /// [`DEFAULT_MAX_ATTEMPTS`]; at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.inner.max_attempts = attempts;
        self
    }

    /// The most messages and bytes of text ([`Message::payload_len`]) one commit may carry
    /// (default [`DEFAULT_MAX_BATCH_MESSAGES`] and [`DEFAULT_MAX_BATCH_BYTES`]); a larger
    /// batch fails with [`Error::BatchTooLarge`] before anything is sent to the store.
    pub fn max_batch(mut self, messages: usize, bytes: usize) -> Self {
        self.inner.max_batch = (messages, bytes);
        self
    }

    /// The memory.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the setting when `max_attempts` or `max_batch` is 0 or the
    /// TTL is zero.
    pub fn build(self) -> Result<ChatMemory<S>> {
        if self.inner.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts must be at least 1".into()));
        }
        if self.inner.max_batch.0 == 0 || self.inner.max_batch.1 == 0 {
            return Err(Error::InvalidConfig(
                "max_batch must allow at least 1 message and 1 byte".into(),
            ));
        }
        if self.inner.ttl.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidConfig("ttl must be longer than zero".into()));
        }
        Ok(self.inner)
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
            max_batch: (DEFAULT_MAX_BATCH_MESSAGES, DEFAULT_MAX_BATCH_BYTES),
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

    /// The most messages and bytes of text one commit may carry (see
    /// [`ChatMemoryBuilder::max_batch`]): what a caller writing a large history splits it by.
    ///
    /// ```
    /// let memory = chatmem::ChatMemory::in_memory();
    /// assert_eq!(memory.max_batch(), (chatmem::DEFAULT_MAX_BATCH_MESSAGES, chatmem::DEFAULT_MAX_BATCH_BYTES));
    /// ```
    pub fn max_batch(&self) -> (usize, usize) {
        self.max_batch
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

    /// Loads conversation `id` in one round trip, for a caller that will start a
    /// [`turn`](ChatMemory::turn) (or [`commit`](ChatMemory::commit)) after calling a model.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn load(&self, id: &ConversationId) -> Result<LoadedWindow> {
        let snapshot = self
            .store
            .load(id)
            .await
            .map_err(|source| Error::Store { id: id.clone(), source })?;
        Ok(LoadedWindow::new(snapshot, &self.policy, self.counter.as_ref()))
    }

    /// Starts a turn on `loaded` with `messages` (usually the user message, optionally
    /// preceded by a system message), counting each message's tokens once.
    pub fn turn(&self, loaded: LoadedWindow, messages: impl IntoIterator<Item = Message>) -> Turn {
        let mut turn = Turn::new(loaded, Arc::clone(&self.counter), self.policy);
        for m in messages {
            turn.push(m);
        }
        turn
    }

    /// Adds `messages` to conversation `id` as one atomic batch, then applies the window.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::TooMuchContention`] when concurrent
    /// writers won every retry. Either way nothing of the batch was written.
    pub async fn add(&self, id: &ConversationId, messages: impl IntoIterator<Item = Message>) -> Result<()> {
        let mut messages = messages.into_iter().peekable();
        if messages.peek().is_none() {
            return Ok(());
        }
        let loaded = self.load(id).await?;
        self.commit_turn(id, self.turn(loaded, messages)).await
    }

    /// Commits `turn` to conversation `id` as one atomic batch: one round trip unless
    /// another writer committed since the turn's window was loaded, in which case the
    /// conversation is reloaded and the window recomputed from the counts already made (the
    /// batch stays whole and contiguous).
    ///
    /// # Errors
    /// As [`add`](ChatMemory::add).
    pub async fn commit_turn(&self, id: &ConversationId, turn: Turn) -> Result<()> {
        let (loaded, batch) = turn.into_parts();
        self.commit_batch(id, loaded, &batch, false).await.map(drop)
    }

    /// Commits what `turn` holds so far and returns the turn, empty, on top of the committed
    /// state: for storing the user message before the model answers (the advisor's eager
    /// mode). Its [`prompt`](Turn::prompt) is then the window after the commit.
    ///
    /// # Errors
    /// As [`add`](ChatMemory::add).
    pub async fn checkpoint(&self, id: &ConversationId, turn: Turn) -> Result<Turn> {
        let (loaded, batch) = turn.into_parts();
        let committed = self.commit_batch(id, loaded, &batch, true).await?;
        Ok(Turn::new(
            committed.window_after(&self.policy, self.counter.as_ref()),
            Arc::clone(&self.counter),
            self.policy,
        ))
    }

    /// Commits `messages` (a whole turn) to conversation `id`, starting from `loaded`, as
    /// [`commit_turn`](ChatMemory::commit_turn) does, and returns the window after the
    /// commit (a copy of the window: use `commit_turn` when it is not needed).
    ///
    /// # Errors
    /// As [`add`](ChatMemory::add).
    pub async fn commit(
        &self,
        id: &ConversationId,
        loaded: LoadedWindow,
        messages: impl IntoIterator<Item = Message>,
    ) -> Result<LoadedWindow> {
        let (loaded, batch) = self.turn(loaded, messages).into_parts();
        Ok(self
            .commit_batch(id, loaded, &batch, true)
            .await?
            .window_after(&self.policy, self.counter.as_ref()))
    }

    /// Commits `batch` on `loaded`, reloading and re-planning (never recounting) when a
    /// concurrent writer won the version check.
    /// `keep` keeps a copy of the commit for [`Committed::window_after`].
    async fn commit_batch(
        &self,
        id: &ConversationId,
        mut loaded: LoadedWindow,
        batch: &[(Message, u32)],
        keep: bool,
    ) -> Result<Committed> {
        let store_err = |source| Error::Store { id: id.clone(), source };
        let (max_messages, max_bytes) = self.max_batch;
        let bytes: usize = batch.iter().map(|(m, _)| m.payload_len()).sum();
        if batch.len() > max_messages || bytes > max_bytes {
            return Err(Error::BatchTooLarge {
                messages: batch.len(),
                bytes,
                max_messages,
                max_bytes,
            });
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut planned = plan_with(
                loaded.snapshot(),
                batch,
                &self.policy,
                self.retention,
                self.ttl,
                self.counter.name(),
            )
            .map_err(store_err)?;
            let commit = if keep {
                planned.commit.clone()
            } else {
                planned.commit.take()
            };
            let Some(commit) = commit else {
                return Ok(Committed {
                    loaded,
                    planned,
                    version: None,
                });
            };
            match self.store.commit(id, commit).await {
                Ok(version) => {
                    return Ok(Committed {
                        loaded,
                        planned,
                        version: Some(version),
                    });
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
                Err(source) => return Err(store_err(source)),
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

/// A committed batch: the snapshot it was planned on, the plan, and the new version
/// (`None` when nothing needed writing).
struct Committed {
    loaded: LoadedWindow,
    planned: Plan,
    version: Option<u64>,
}

impl Committed {
    /// The window after the commit, without reloading.
    fn window_after(self, policy: &WindowPolicy, counter: &dyn TokenCounter) -> LoadedWindow {
        let Some((commit, version)) = self.planned.commit.zip(self.version) else {
            return self.loaded;
        };
        let loaded = self.loaded.snapshot();
        let start = commit.window_start();
        let next_seq = commit.next_seq();
        let (_, appended) = commit.into_messages();
        let snapshot = Snapshot {
            version,
            system: self.planned.system,
            window_start: start,
            next_seq,
            messages: loaded
                .messages
                .iter()
                .cloned()
                .chain(appended)
                .filter(|m| m.seq >= start)
                .collect(),
        };
        LoadedWindow::new(snapshot, policy, counter)
    }
}

/// Waits before retrying a lost commit: exponential with full jitter, capped at 50 ms, so
/// that writers that collided spread out. A runtime-independent timer: a tokio runtime built
/// without timers (or another executor) must not make a retry panic.
async fn backoff(attempt: u32) {
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    let ms = fastrand::u64(0..=cap_ms);
    futures_timer::Delay::new(Duration::from_millis(ms)).await;
}
