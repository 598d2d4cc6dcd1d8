//! [`ChatMemory`]: a store plus a window policy, the type applications use.

mod facts;

use std::sync::Arc;
use std::time::Duration;

use crate::commit::Retention;
use crate::counter::{Cl100k, CounterName, Memo, TextCounts, TokenCounter};
use crate::embeddings::Embeddings;
use crate::error::{Error, Result};
use crate::facts::{FactExtractor, Facts, UserId};
use crate::id::ConversationId;
use crate::in_memory_store::InMemoryStore;
use crate::limits::BatchLimits;
use crate::message::Message;
use crate::page::Page;
use crate::policy::WindowPolicy;
use crate::recall::Recall;
use crate::store::{RecentCursor, RecentPage, RecentQuery, Store};
use crate::stored_message::StoredMessage;
use crate::summarizer::Summarizer;
use crate::turn::Turn;
use crate::window::LoadedWindow;
use crate::window::Settings;

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
    /// What prompts count again every turn (the placeholders of cleared tool results), kept.
    text_counts: Arc<TextCounts>,
    /// The counter name stored with new messages, made once (see [`counted_by`]).
    counted_by: CounterName,
    max_attempts: u32,
    max_batch: BatchLimits,
    summarizer: Option<Summarizer>,
    recall: Option<Recall>,
    embeddings: Option<EmbeddingsOn>,
    facts: Option<Facts>,
    extraction: Option<ExtractionOn>,
}

/// A facts extractor and the store its background commits go to (the memory's, shared).
#[derive(Clone)]
pub(crate) struct ExtractionOn {
    pub(crate) extractor: FactExtractor,
    pub(crate) store: Arc<dyn Store>,
}

impl std::fmt::Debug for ExtractionOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.extractor.fmt(f)
    }
}

/// Embeddings and the store they write vectors to (the memory's, shared).
#[derive(Clone)]
pub(crate) struct EmbeddingsOn {
    pub(crate) settings: Embeddings,
    pub(crate) store: Arc<dyn Store>,
}

impl std::fmt::Debug for EmbeddingsOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.settings.fmt(f)
    }
}

/// The counter name stored with messages added under `policy`: the counter's, or
/// [`UNCOUNTED`](crate::store::UNCOUNTED) when the window counts messages and nothing is tokenized.
fn counted_by(policy: &WindowPolicy, counter: &dyn TokenCounter) -> CounterName {
    CounterName::from(if policy.counts_tokens() {
        counter.name()
    } else {
        crate::counter::UNCOUNTED
    })
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
    /// (default [`DEFAULT_MAX_BATCH_MESSAGES`](crate::DEFAULT_MAX_BATCH_MESSAGES) and
    /// [`DEFAULT_MAX_BATCH_BYTES`](crate::DEFAULT_MAX_BATCH_BYTES)); a larger batch fails with
    /// [`Error::BatchTooLarge`] before anything is sent to the store.
    pub fn max_batch(mut self, messages: usize, bytes: usize) -> Self {
        self.inner.max_batch = BatchLimits {
            messages,
            bytes,
            ..BatchLimits::default()
        };
        self
    }

    /// Summarizes what leaves the window with `summarizer` (default: no summaries). Messages
    /// that leave the window are then kept, even under [`Retention::DropEvicted`], until a
    /// summary covers them; the model sees the summary after the system message. See
    /// [`Summary`](crate::Summary) for how and when.
    ///
    /// ```
    /// # use chatmem::{ChatModel, ChatRequest, ChatResponse, Message, ModelError};
    /// # #[derive(Debug)] struct Cheap;
    /// # #[async_trait::async_trait] impl ChatModel for Cheap {
    /// #     async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
    /// #         Ok(ChatResponse { message: Message::assistant("The order is LC202610060018."), usage: None, finish_reason: None })
    /// #     }
    /// # }
    /// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Summarizer, WindowPolicy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::builder(InMemoryStore::new())
    ///     .policy(WindowPolicy::messages(3)) // the summary takes the system message's slot
    ///     .summarizer(Summarizer::new(Cheap))
    ///     .build()?;
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::user("My order is LC202610060018."), Message::assistant("Noted.")]).await?;
    /// memory.add(&id, [Message::user("Can it be refunded?"), Message::assistant("Yes.")]).await?;
    /// let seen = memory.get(&id).await?;
    /// assert!(seen[0].text().unwrap().contains("LC202610060018")); // the summary, as a system message
    /// assert_eq!(seen.len(), 3);
    /// # Ok::<(), chatmem::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn summarizer(mut self, summarizer: Summarizer) -> Self {
        self.inner.summarizer = Some(summarizer);
        self
    }

    /// Recalls messages that left the window when a turn's new user message needs them (see
    /// [`recall`](crate::recall)); default: no recall. Recall searches the evicted messages,
    /// so it keeps them: the retention becomes [`Retention::KeepHistory`] (a later
    /// [`retention`](ChatMemoryBuilder::retention) of `DropEvicted` makes
    /// [`build`](ChatMemoryBuilder::build) fail), and every commit indexes what it writes.
    ///
    /// ```
    /// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, Recall, Retention, WindowPolicy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::builder(InMemoryStore::new())
    ///     .policy(WindowPolicy::messages(2))
    ///     .recall(Recall::new(3)?)
    ///     .build()?;
    /// assert_eq!(memory.retention(), Retention::KeepHistory);
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::user("我的订单是 LC202610060018，还没发货。"), Message::assistant("已为您催促发货。")]).await?;
    /// memory.add(&id, [Message::user("谢谢"), Message::assistant("不客气")]).await?;
    /// let mut turn = memory.begin(&id).await?;
    /// turn.push(Message::user("LC202610060018 能退吗？"));
    /// turn.recall().await?;
    /// let prompt = turn.prompt();
    /// assert!(prompt[prompt.len() - 2].text().unwrap().contains("#1 user"));
    /// # Ok::<(), chatmem::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn recall(mut self, recall: Recall) -> Self {
        self.inner.recall = Some(recall);
        self.inner.retention = Retention::KeepHistory;
        self
    }

    /// Sends each user's [facts](crate::facts) with every turn of that user (default: no
    /// facts): a turn begun with [`ChatMemory::begin_as`] loads them with the conversation,
    /// at once, and its prompt carries them in one message right after the system message,
    /// within [`Facts::token_budget`]. Needs a store that
    /// [keeps facts](Store::keeps_facts) (checked by [`build`](ChatMemoryBuilder::build)).
    ///
    /// ```
    /// use chatmem::facts::{FACTS_HEADING, Facts};
    /// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, UserId};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::builder(InMemoryStore::new()).facts(Facts::new()).build()?;
    /// let user = UserId::new("app-user-42")?;
    /// memory.add_fact(&user, "Allergic to nuts", None).await?;
    /// let mut turn = memory.begin_as(&ConversationId::new("c1")?, &user).await?;
    /// turn.extend([Message::system("Be brief."), Message::user("Dessert ideas?")]);
    /// let prompt = turn.prompt();
    /// assert_eq!(prompt[1].text().unwrap(), format!("{FACTS_HEADING}\n- Allergic to nuts"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn facts(mut self, facts: Facts) -> Self {
        self.inner.facts = Some(facts);
        self
    }

    /// The memory.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the setting when `max_attempts` or `max_batch` is 0, the
    /// TTL is zero, the summarizer's bounds are zero, recall is asked of a memory that drops
    /// evicted messages or of a store that does not [search](Store::searches), or facts of a
    /// store that does not [keep them](Store::keeps_facts).
    pub fn build(self) -> Result<ChatMemory<S>> {
        if self.inner.facts.is_some() && !self.inner.store.keeps_facts() {
            return Err(Error::InvalidConfig(
                "facts need a store that keeps them; this store does not".into(),
            ));
        }
        if self.inner.recall.is_some() {
            if self.inner.retention == Retention::DropEvicted {
                return Err(Error::InvalidConfig(
                    "recall searches the messages that left the window, so it keeps them: it cannot be combined with dropping evicted messages".into(),
                ));
            }
            if !self.inner.store.searches() {
                return Err(Error::InvalidConfig(
                    "recall needs a store that indexes and searches its messages; this store does not".into(),
                ));
            }
        }
        if self.inner.embeddings.is_some() {
            if self.inner.recall.is_none() {
                return Err(Error::InvalidConfig(
                    "embeddings serve recall: turn recall on to use them".into(),
                ));
            }
            if !self.inner.store.keeps_vectors() {
                return Err(Error::InvalidConfig(
                    "embeddings need a store that keeps vectors; this store does not".into(),
                ));
            }
        }
        if let Some(summarizer) = &self.inner.summarizer {
            summarizer.validate().map_err(Error::InvalidConfig)?;
        }
        if let Some(on) = &self.inner.extraction {
            if self.inner.facts.is_none() {
                return Err(Error::InvalidConfig(
                    "a facts extractor adds to users' facts: turn facts on to use it".into(),
                ));
            }
            on.extractor.validate().map_err(Error::InvalidConfig)?;
        }
        if self.inner.max_attempts == 0 {
            return Err(Error::InvalidConfig("max_attempts must be at least 1".into()));
        }
        if self.inner.max_batch.messages == 0 || self.inner.max_batch.bytes == 0 {
            return Err(Error::InvalidConfig(
                "max_batch must allow at least 1 message and 1 byte".into(),
            ));
        }
        if self.inner.ttl.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidConfig("ttl must be longer than zero".into()));
        }
        let mut memory = self.inner;
        memory.counted_by = counted_by(&memory.policy, memory.counter.as_ref());
        Ok(memory)
    }
}

impl<S: Store + Clone + 'static> ChatMemoryBuilder<S> {
    /// Embeds what recall searches with `embeddings` (default: none, recall by words): the
    /// messages a commit wrote are embedded after it returns, in the background, and their
    /// vectors written to this store; a turn's question is embedded within the embeddings'
    /// query wait. Needs [`recall`](ChatMemoryBuilder::recall) and a store that
    /// [keeps vectors](Store::keeps_vectors) (checked by [`build`](ChatMemoryBuilder::build)).
    /// The store is cloned for the background writes (wrap one that is not cheap to clone
    /// in an `Arc`).
    pub fn embeddings(mut self, embeddings: Embeddings) -> Self {
        self.inner = self.inner.with_embeddings(Some(embeddings));
        self
    }

    /// Reads users' messages for facts with `extractor` (default: none, facts change only by
    /// hand): after a turn begun for a user ([`ChatMemory::begin_as`]) commits, the messages it
    /// evicted from the window (or, every [`Facts::extract_every`] turns, the recent ones) go
    /// to the extractor's model in the background, and what it finds joins the user's facts
    /// by the facts' rules. The turn never waits for it. Needs
    /// [`facts`](ChatMemoryBuilder::facts) (checked by [`build`](ChatMemoryBuilder::build));
    /// the store is cloned for the background commits, as for embeddings.
    pub fn fact_extractor(mut self, extractor: FactExtractor) -> Self {
        self.inner = self.inner.with_fact_extractor(Some(extractor));
        self
    }
}

impl<S: Store + Clone + 'static> ChatMemory<S> {
    /// The same memory with another facts extractor (`None`: facts change only by hand). It
    /// has effect only with [`Facts`] configured.
    pub fn with_fact_extractor(mut self, extractor: Option<FactExtractor>) -> Self {
        self.extraction = extractor.map(|extractor| ExtractionOn {
            extractor,
            store: Arc::new(self.store.clone()),
        });
        self
    }

    /// The same memory with other embeddings (`None`: recall by words alone).
    pub fn with_embeddings(mut self, embeddings: Option<Embeddings>) -> Self {
        self.embeddings = embeddings.map(|settings| EmbeddingsOn {
            settings,
            store: Arc::new(self.store.clone()),
        });
        self
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
        let policy = WindowPolicy::default();
        Self {
            store,
            counted_by: counted_by(&policy, &Cl100k),
            policy,
            retention: Retention::default(),
            ttl: None,
            counter: Arc::new(Cl100k),
            text_counts: Arc::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_batch: BatchLimits::default(),
            summarizer: None,
            recall: None,
            embeddings: None,
            facts: None,
            extraction: None,
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

    /// How much one commit may carry (see [`ChatMemoryBuilder::max_batch`]): what a caller
    /// writing a large history splits it by.
    ///
    /// ```
    /// let memory = chatmem::ChatMemory::in_memory();
    /// assert_eq!(memory.max_batch(), chatmem::BatchLimits::default());
    /// assert_eq!(memory.max_batch().messages, chatmem::DEFAULT_MAX_BATCH_MESSAGES);
    /// ```
    pub fn max_batch(&self) -> BatchLimits {
        self.max_batch
    }

    /// The token counter.
    pub fn counter(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    /// The same memory with another window policy and token counter, every other setting
    /// kept: for one request that asks for its own window (the server's per-request policy).
    /// A [`WindowPolicy`] is valid by construction, so this cannot fail.
    ///
    /// ```
    /// use chatmem::{ChatMemory, Tokenizer, WindowPolicy};
    /// let memory = ChatMemory::in_memory();
    /// let small = memory.with_policy(WindowPolicy::try_tokens(500)?, Tokenizer::O200k.counter());
    /// assert_eq!(small.policy(), &WindowPolicy::tokens(500));
    /// assert_eq!(small.counter().name(), "o200k_base");
    /// # Ok::<(), chatmem::Error>(())
    /// ```
    pub fn with_policy(mut self, policy: WindowPolicy, counter: Arc<dyn TokenCounter>) -> Self {
        self.counted_by = counted_by(&policy, counter.as_ref());
        self.policy = policy;
        self.counter = counter;
        self
    }

    /// The same memory over another store, every setting kept: for wrapping the configured
    /// store (to count its calls, say) without knowing how the memory was built.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
    /// let memory = ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
    /// let shared: ChatMemory<Arc<dyn Store>> = memory.with_store(Arc::new(InMemoryStore::new()));
    /// assert_eq!(shared.policy(), &WindowPolicy::messages(6));
    /// # Ok::<(), chatmem::Error>(())
    /// ```
    pub fn with_store<T: Store>(self, store: T) -> ChatMemory<T> {
        ChatMemory {
            store,
            policy: self.policy,
            retention: self.retention,
            ttl: self.ttl,
            counter: self.counter,
            text_counts: self.text_counts,
            counted_by: self.counted_by,
            max_attempts: self.max_attempts,
            max_batch: self.max_batch,
            summarizer: self.summarizer,
            recall: self.recall,
            // The vectors' store was the old one: embeddings are set again on the new.
            embeddings: None,
            facts: self.facts,
            // Its commits went to the old store too: set again on the new.
            extraction: None,
        }
    }

    /// The same memory with its summarizer changed by `change` (nothing without one): for a
    /// host that gives it a spawner and an observer ([`Summarizer::spawn_with`],
    /// [`Summarizer::observe`]) without knowing how the memory was built.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the changed summarizer's bounds are zero.
    pub fn map_summarizer(mut self, change: impl FnOnce(Summarizer) -> Summarizer) -> Result<Self> {
        if let Some(summarizer) = self.summarizer.take() {
            let changed = change(summarizer);
            changed.validate().map_err(Error::InvalidConfig)?;
            self.summarizer = Some(changed);
        }
        Ok(self)
    }

    /// The summarizer, if this memory summarizes.
    pub fn summarizer(&self) -> Option<&Summarizer> {
        self.summarizer.as_ref()
    }

    /// The embeddings, if this memory embeds what recall searches.
    pub fn embeddings(&self) -> Option<&Embeddings> {
        self.embeddings.as_ref().map(|e| &e.settings)
    }

    pub(crate) fn embeddings_on(&self) -> Option<&EmbeddingsOn> {
        self.embeddings.as_ref()
    }

    /// The facts extractor, if this memory reads its users' messages for facts: its
    /// [`stats`](FactExtractor::stats) and [`settle`](FactExtractor::settle).
    pub fn fact_extractor(&self) -> Option<&FactExtractor> {
        self.extraction.as_ref().map(|e| &e.extractor)
    }

    pub(crate) fn extraction_on(&self) -> Option<&ExtractionOn> {
        self.extraction.as_ref()
    }

    /// The facts settings, if this memory sends its users' facts with their turns.
    pub fn facts_settings(&self) -> Option<&Facts> {
        self.facts.as_ref()
    }

    /// The recall settings, if this memory recalls.
    pub fn recall_settings(&self) -> Option<&Recall> {
        self.recall.as_ref()
    }

    /// What recall finds for `query` among the messages that left conversation `id`'s window,
    /// ranked, with what a turn would do with each (the floor and token budget of this
    /// memory's recall settings, or the defaults, with `k` as given): for a person or a tool
    /// asking why something was or was not recalled. `None` when the conversation does not
    /// exist. Two store round trips (a load for the window start, the search).
    ///
    /// ```
    /// use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, Recall, WindowPolicy};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::builder(InMemoryStore::new()).policy(WindowPolicy::messages(2)).recall(Recall::new(3)?).build()?;
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::user("我的订单是 LC202610060018"), Message::assistant("收到")]).await?;
    /// memory.add(&id, [Message::user("谢谢"), Message::assistant("不客气")]).await?;
    /// let found = memory.recall(&id, "订单", 5).await?.expect("the conversation exists");
    /// assert_eq!(found.considered[0].seq, 1);
    /// assert!(memory.recall(&ConversationId::new("nobody")?, "订单", 5).await?.is_none());
    /// # Ok::<(), chatmem::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `k` is outside 1 to [`MAX_RECALL_K`](crate::recall::MAX_RECALL_K);
    /// [`Error::Store`] when the store fails.
    pub async fn recall(&self, id: &ConversationId, query: &str, k: usize) -> Result<Option<crate::recall::Recalled>> {
        let settings = match self.recall {
            Some(r) => r.with_k(k)?,
            None => Recall::new(k)?,
        };
        let store_err = |source| Error::Store { id: id.clone(), source };
        let snapshot = self.store.load(id).await.map_err(store_err)?;
        if !snapshot.exists() {
            return Ok(None);
        }
        let terms = crate::recall::query_terms(query);
        let vector = match &self.embeddings {
            Some(e) => e.settings.query(query).await,
            None => None,
        };
        if terms.is_empty() && vector.is_none() {
            return Ok(Some(crate::recall::Recalled::default()));
        }
        let mut search = crate::recall::SearchQuery::new(terms, snapshot.window_start, crate::recall::search_limit(k));
        if let Some(v) = vector {
            search = search.with_vector(v);
        }
        let found = self.store.search(id, &search).await.map_err(store_err)?;
        Ok(Some(crate::recall::choose(
            &found,
            &settings,
            usize::MAX,
            self.counter.as_ref(),
        )))
    }

    /// The same memory with other facts settings (`None`: no facts sent), every other setting
    /// kept: for a command that learns only later whether its turns are for a user.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`], as [`build`](ChatMemoryBuilder::build), for facts over a store
    /// that does not [keep them](Store::keeps_facts).
    pub fn with_facts(mut self, facts: Option<Facts>) -> Result<Self> {
        if facts.is_some() && !self.store.keeps_facts() {
            return Err(Error::InvalidConfig(
                "facts need a store that keeps them; this store does not".into(),
            ));
        }
        self.facts = facts;
        Ok(self)
    }

    /// The same memory with other recall settings (`None`: no recall), every other setting
    /// kept: for one request that asks for its own `k`. Recall on a memory built without it
    /// searches only what was committed with recall on.
    pub fn with_recall(mut self, recall: Option<Recall>) -> Self {
        self.recall = recall;
        self
    }

    /// What the model sees for conversation `id`: the system message first, then the
    /// window. Empty for an unknown conversation. One store round trip.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn get(&self, id: &ConversationId) -> Result<Vec<Message>> {
        Ok(self.load(id).await?.into_messages())
    }

    /// Loads conversation `id` in one round trip, to read its window (a write begins a
    /// [`Turn`] with [`begin`](ChatMemory::begin), which loads).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn load(&self, id: &ConversationId) -> Result<LoadedWindow> {
        let snapshot = self
            .store
            .load(id)
            .await
            .map_err(|source| Error::Store { id: id.clone(), source })?;
        Ok(self.window(snapshot))
    }

    /// Loads conversation `id` (one store round trip) and begins a [`Turn`] on it: the one
    /// way to write. The turn commits to `id` and to no other conversation.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn begin(&self, id: &ConversationId) -> Result<Turn<'_, S>> {
        let loaded = self.load(id).await?;
        Ok(Turn::new(self, id.clone(), loaded))
    }

    /// Begins a [`Turn`] on conversation `id` for `user`, as [`begin`](ChatMemory::begin)
    /// does, with the user's [facts](crate::facts): with [`Facts`] configured
    /// ([`ChatMemoryBuilder::facts`]) the conversation and the user's facts are loaded at
    /// once (two store calls awaited together, so facts add no round trip to wait for), and
    /// the turn's [`prompt`](Turn::prompt) sends them right after the system message (see
    /// [`Turn::facts`]). Without facts configured nothing more is loaded and the prompt is
    /// [`begin`](ChatMemory::begin)'s. Either way the turn knows its [`user`](Turn::user),
    /// and commits to `id` only: facts are never stored with the conversation.
    ///
    /// # Errors
    /// [`Error::Store`] when the conversation's load fails; [`Error::Facts`] when the facts'
    /// load does.
    pub async fn begin_as(&self, id: &ConversationId, user: &UserId) -> Result<Turn<'_, S>> {
        let Some(settings) = self.facts else {
            let turn = self.begin(id).await?;
            return Ok(turn.for_user(user.clone(), None));
        };
        let (snapshot, facts) = futures_util::future::join(self.store.load(id), self.store.load_facts(user)).await;
        let snapshot = snapshot.map_err(|source| Error::Store { id: id.clone(), source })?;
        let facts = facts.map_err(|source| Error::Facts {
            user: user.clone(),
            source,
        })?;
        let turn = Turn::new(self, id.clone(), self.window(snapshot));
        Ok(turn.for_user(user.clone(), Some((facts, settings))))
    }

    /// Adds `messages` to conversation `id` as one atomic batch, then applies the window: a
    /// [`Turn`] begun, given the messages and committed.
    ///
    /// # Errors
    /// As [`Turn::commit`]: whatever the error, nothing of the batch was written.
    pub async fn add(&self, id: &ConversationId, messages: impl IntoIterator<Item = Message>) -> Result<()> {
        let mut messages = messages.into_iter().peekable();
        if messages.peek().is_none() {
            return Ok(());
        }
        let mut turn = self.begin(id).await?;
        turn.extend(messages);
        turn.commit().await.map(drop)
    }

    /// The window of `snapshot` under this memory's policy and counter.
    pub(crate) fn window(&self, snapshot: crate::snapshot::Snapshot) -> LoadedWindow {
        LoadedWindow::new(snapshot, &self.policy, &self.counter, &self.text_counts)
    }

    /// The settings a turn's plan writes with.
    pub(crate) fn settings(&self) -> Settings<'_> {
        Settings {
            policy: &self.policy,
            retention: self.retention,
            ttl: self.ttl,
            counter: &self.counted_by,
            tokens: Memo {
                inner: self.counter.as_ref(),
                counts: &self.text_counts,
            },
            keep_unsummarized: self.summarizer.is_some(),
            index: self.recall.is_some(),
            facts_tokens: 0,
        }
    }

    /// How many times a commit that lost a version check is tried.
    pub(crate) fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Checks a batch against [`max_batch`](ChatMemory::max_batch).
    ///
    /// # Errors
    /// [`Error::BatchTooLarge`] naming both sizes and both limits.
    pub(crate) fn limits_check<'a>(&self, batch: impl ExactSizeIterator<Item = &'a Message> + Clone) -> Result<()> {
        let limits = self.max_batch;
        limits.check(batch.clone()).map_err(|_| Error::BatchTooLarge {
            messages: batch.len(),
            bytes: batch.map(Message::payload_len).sum(),
            max_messages: limits.messages,
            max_bytes: limits.bytes,
        })
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
        let mut page = self.history_page(id, 0, PAGE).await?;
        let mut out: Vec<Message> = page.system.take().into_iter().collect();
        loop {
            let next = page.next();
            out.extend(page.messages.into_iter().map(StoredMessage::into_message));
            let Some(after) = next else { break };
            page = self.history_page(id, after, PAGE).await?;
        }
        Ok(out)
    }

    /// One page of what [`history`](ChatMemory::history) returns: at most `limit` messages
    /// with a sequence number above `after` (`0`: from the start, the system message first),
    /// for a reader that must not hold a long transcript at once (the server's `/history`).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use chatmem::{ChatMemory, ConversationId, Message};
    /// let memory = ChatMemory::in_memory();
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::system("Be brief."), Message::user("u1"), Message::assistant("a1")]).await?;
    /// let first = memory.history_page(&id, 0, 1).await?;
    /// assert_eq!(first.system, Some(Message::system("Be brief.")));
    /// assert_eq!(first.messages.len(), 1);
    /// let rest = memory.history_page(&id, first.next().expect("more"), 1).await?;
    /// assert_eq!((rest.messages.len(), rest.next()), (1, None));
    /// # Ok::<(), chatmem::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::InvalidConfig`] for a `limit` of 0.
    pub async fn history_page(&self, id: &ConversationId, after: u64, limit: usize) -> Result<HistoryPage> {
        if limit == 0 {
            return Err(Error::InvalidConfig("a history page holds at least 1 message".into()));
        }
        let store_err = |source| Error::Store { id: id.clone(), source };
        let system = match after {
            0 => self.store.load(id).await.map_err(store_err)?.system,
            _ => None,
        };
        // One more than asked for tells whether more follow.
        let mut messages = self
            .store
            .history(id, after, limit.saturating_add(1))
            .await
            .map_err(store_err)?;
        let more = messages.len() > limit;
        messages.truncate(limit);
        Ok(HistoryPage {
            system: system.map(StoredMessage::into_message),
            messages,
            more,
        })
    }

    /// One page of conversation ids after `after`, ascending.
    ///
    /// # Errors
    /// [`Error::StoreGlobal`] when the store fails.
    pub async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page> {
        self.store.list(after, limit).await.map_err(Error::StoreGlobal)
    }

    /// One page of the conversations whose id starts with `prefix`, the most recently written
    /// first, after `before` ([`Store::recent`]).
    ///
    /// # Errors
    /// [`Error::StoreGlobal`] when the store fails.
    pub async fn recent(&self, prefix: &str, before: Option<&RecentCursor>, limit: usize) -> Result<RecentPage> {
        self.store
            .recent(&RecentQuery::new(prefix, before, limit))
            .await
            .map_err(Error::StoreGlobal)
    }

    /// Removes expired conversations now; returns how many.
    ///
    /// # Errors
    /// [`Error::StoreGlobal`] when the store fails.
    pub async fn purge_expired(&self) -> Result<u64> {
        self.store.purge_expired().await.map_err(Error::StoreGlobal)
    }
}

/// One page of a conversation's history, from [`ChatMemory::history_page`].
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// The system message, on the first page (`after` 0) only.
    pub system: Option<Message>,
    /// The page's messages in order, each with its sequence number.
    pub messages: Vec<StoredMessage>,
    /// Whether messages follow this page.
    pub more: bool,
}

impl HistoryPage {
    /// The `after` of the next page (the last message's sequence number); `None` on the last
    /// page.
    pub fn next(&self) -> Option<u64> {
        self.messages.last().filter(|_| self.more).map(|m| m.seq)
    }
}
