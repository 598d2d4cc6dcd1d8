//! Embeddings for recall, never on a turn's path: an [`Embedder`] (any embedding model)
//! embeds the messages a commit wrote after the commit returned, in the background, and the
//! vectors land in a later write of their own ([`Store::put_vectors`]), each kept with the
//! model's name and dimension. Until a message's vector exists it is found by its words.
//!
//! For a model call, the question is embedded within [`Embeddings::query_wait`]; an answer
//! later than that (or a failure) leaves that turn's recall to words alone. A failed or
//! garbled embedding of stored messages fails nothing: the messages are kept for the
//! conversation's next commit to try again (a few times), and `chatmem reindex` embeds
//! whatever is still missing.
//!
//! Two things make small models' vectors useful for chat (measured with multilingual e5,
//! where every short chat message scores 0.83 to 0.91 against every other and "那单能退吗？"
//! found the order message only third):
//! - **Exchanges.** A stored message is embedded with the other half of its exchange when
//!   the same commit wrote it (a user message with the answer after it, an answer with the
//!   question before it), each line with its role: `user: …\nassistant: …`.
//! - **Centering.** The mean embedding of a fixed set of generic chat exchanges
//!   (`embeddings/calibration.txt`, embedded once per process) is what all chat shares
//!   under the model; it is subtracted from every vector, stored or asked, before it is
//!   scaled to unit length, so cosine measures what a text says. With it the order's
//!   exchange ranks first for "那单能退吗？", and "hello" scores below 0 against everything.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::{Either, select};

use crate::id::ConversationId;
use crate::message::Message;
use crate::model::{ModelError, ModelErrorKind};
use crate::recall::{IndexedMessage, MessageVector, Vector, embedding_text};
use crate::store::Store;

/// What a text is to the model: some models (e5, Cohere, Voyage) embed a question and a
/// stored passage differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedKind {
    /// The question recall searches with.
    Query,
    /// A stored message.
    Passage,
}

/// An embedding model: OpenAI's `/v1/embeddings` and every endpoint that speaks it
/// (`chatmem_openai::OpenAiEmbedder`), or any other.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    /// The model's name, kept with every vector it makes: vectors of another name are never
    /// compared with its own.
    fn model(&self) -> &str;

    /// One embedding per text, in order.
    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// What became of an embedding, as an [`Embeddings::observe`] callback hears it (a server
/// counts these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmbeddingEvent {
    /// Stored messages were embedded and `kept` vectors written.
    Stored {
        /// How many vectors the store kept.
        kept: usize,
    },
    /// Embedding stored messages failed (the call, or an answer of the wrong shape:
    /// `Protocol`); they are tried again with the conversation's next commit.
    Failed(ModelErrorKind),
    /// The store refused the vectors (unreachable); tried again like a failed call.
    StoreFailed,
    /// A question was embedded within the wait.
    Query,
    /// A question's embedding came later than the wait or failed: that turn recalled by words.
    QueryMissed(ModelErrorKind),
}

/// Runs a background embedding: `|f| { tokio::spawn(f); }`.
type Spawn = Arc<dyn Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync>;

/// Reports each [`EmbeddingEvent`].
type Observe = Arc<dyn Fn(EmbeddingEvent) + Send + Sync>;

/// How long a turn waits for its question's embedding by default.
pub const DEFAULT_QUERY_WAIT: Duration = Duration::from_millis(300);
/// How long a background embedding call may take by default.
pub const DEFAULT_EMBED_TIMEOUT: Duration = Duration::from_secs(30);
/// How many texts one embedding call carries at most.
pub const EMBED_BATCH: usize = 64;
/// How many times a message whose embedding failed is tried again with later commits.
pub const EMBED_ATTEMPTS: u32 = 3;
/// At most this many messages wait, in one process, to be embedded again; past it the
/// newest failures are left to `chatmem reindex`.
const MAX_PENDING: usize = 10_000;

/// Generic chat exchanges, one a paragraph (`#` lines are comments): their mean embedding is
/// subtracted from every vector.
const CALIBRATION: &str = include_str!("embeddings/calibration.txt");

fn calibration_texts() -> Vec<String> {
    CALIBRATION
        .split("\n\n")
        .map(|p| p.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n"))
        .filter(|p| !p.trim().is_empty())
        .collect()
}

/// A message waiting to be embedded.
#[derive(Debug, Clone)]
struct Pending {
    seq: u64,
    message: Arc<Message>,
    /// What is embedded: the message in its exchange ([`exchange_texts`]).
    text: String,
    attempts: u32,
}

/// Embeddings for recall: the [`Embedder`], the spawner that runs it off the turn, and the
/// waits. Given to [`ChatMemoryBuilder::embeddings`](crate::ChatMemoryBuilder::embeddings).
///
/// ```
/// use std::time::Duration;
/// use async_trait::async_trait;
/// use chatmem::{EmbedKind, Embedder, Embeddings, ModelError};
///
/// #[derive(Debug)]
/// struct Lengths;
/// #[async_trait]
/// impl Embedder for Lengths {
///     fn model(&self) -> &str { "lengths" }
///     async fn embed(&self, texts: &[String], _: EmbedKind) -> Result<Vec<Vec<f32>>, ModelError> {
///         Ok(texts.iter().map(|t| vec![1.0, t.len() as f32]).collect())
///     }
/// }
///
/// let embeddings = Embeddings::new(Lengths, drop).query_wait(Duration::from_millis(50));
/// assert_eq!(embeddings.model(), "lengths");
/// ```
#[derive(Clone)]
pub struct Embeddings {
    embedder: Arc<dyn Embedder>,
    spawn: Spawn,
    query_wait: Duration,
    timeout: Duration,
    observe: Option<Observe>,
    pending: Arc<Mutex<HashMap<ConversationId, Vec<Pending>>>>,
    /// The mean of the calibration exchanges' unit vectors, once embedded.
    center: Arc<Mutex<Option<Arc<[f32]>>>>,
    /// Background embeddings started and not yet finished.
    running: Arc<std::sync::atomic::AtomicUsize>,
}

impl fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Embeddings")
            .field("embedder", &self.embedder)
            .field("query_wait", &self.query_wait)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Embeddings {
    /// Embeddings by `embedder`, the background calls run by `spawn` (on tokio:
    /// `|f| { tokio::spawn(f); }`): a spawner is required, since embedding stored messages
    /// is never done on a turn's path.
    pub fn new(
        embedder: impl Embedder + 'static,
        spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
    ) -> Self {
        Self::shared(Arc::new(embedder), spawn)
    }

    /// [`new`](Embeddings::new) with an embedder already shared.
    pub fn shared(
        embedder: Arc<dyn Embedder>,
        spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
    ) -> Self {
        Self {
            embedder,
            spawn: Arc::new(spawn),
            query_wait: DEFAULT_QUERY_WAIT,
            timeout: DEFAULT_EMBED_TIMEOUT,
            observe: None,
            pending: Arc::default(),
            center: Arc::default(),
            running: Arc::default(),
        }
    }

    /// How long a turn waits for its question's embedding (default [`DEFAULT_QUERY_WAIT`]);
    /// past it the turn recalls by words alone.
    pub fn query_wait(mut self, wait: Duration) -> Self {
        self.query_wait = wait;
        self
    }

    /// How long a background embedding call may take (default [`DEFAULT_EMBED_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Calls `observe` with each [`EmbeddingEvent`]: to count them.
    pub fn observe(mut self, observe: impl Fn(EmbeddingEvent) + Send + Sync + 'static) -> Self {
        self.observe = Some(Arc::new(observe));
        self
    }

    /// The embedding model's name.
    pub fn model(&self) -> &str {
        self.embedder.model()
    }

    /// The embedder.
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// The wait set by [`query_wait`](Embeddings::query_wait).
    pub fn query_wait_value(&self) -> Duration {
        self.query_wait
    }

    fn report(&self, event: EmbeddingEvent) {
        if let Some(observe) = &self.observe {
            observe(event);
        }
    }

    /// The mean embedding of the calibration exchanges, embedded on first use (within
    /// `wait`) and kept.
    async fn center(&self, wait: Duration) -> Result<Arc<[f32]>, ModelError> {
        if let Some(center) = self.center.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            return Ok(center);
        }
        let texts = calibration_texts();
        let values = match within(wait, self.embedder.embed(&texts, EmbedKind::Passage)).await {
            Some(Ok(values)) => values,
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ModelError::new(
                    ModelErrorKind::Timeout,
                    "no calibration embedding in time",
                ));
            }
        };
        if values.len() != texts.len() {
            return Err(wrong_count(texts.len(), values.len()));
        }
        let mut sum: Vec<f64> = Vec::new();
        for values in values {
            let unit = Vector::new(self.embedder.model(), values).map_err(garbage)?;
            if sum.is_empty() {
                sum = vec![0.0; unit.dim()];
            } else if sum.len() != unit.dim() {
                return Err(mixed_dimensions());
            }
            for (s, v) in sum.iter_mut().zip(unit.values()) {
                *s += f64::from(*v);
            }
        }
        let n = texts.len() as f64;
        let center: Arc<[f32]> = sum.into_iter().map(|s| (s / n) as f32).collect();
        *self.center.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&center));
        Ok(center)
    }

    /// Embeds the calibration exchanges now (one call), so that the first question does not
    /// wait for them: for a host to call at start. Without it they are embedded with the
    /// first background embedding, and questions until then are recalled by words.
    ///
    /// # Errors
    /// The model's error; nothing is kept and the next use tries again.
    pub async fn calibrate(&self) -> Result<(), ModelError> {
        self.center(self.timeout).await.map(drop)
    }

    /// `values` as stored and searched: scaled to unit length, less the center, scaled again.
    fn centered(&self, center: &[f32], values: Vec<f32>) -> Result<Vector, ModelError> {
        let unit = Vector::new(self.embedder.model(), values).map_err(garbage)?;
        if unit.dim() != center.len() {
            return Err(mixed_dimensions());
        }
        let moved = unit.values().iter().zip(center).map(|(v, c)| v - c).collect();
        Vector::new(self.embedder.model(), moved).map_err(garbage)
    }

    /// The question's vector, if the model answers within the wait.
    pub(crate) async fn query(&self, text: &str) -> Option<Vector> {
        let ready = self.center.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let answer = match ready {
            Some(center) => {
                let texts = [text.to_owned()];
                let call = self.embedder.embed(&texts, EmbedKind::Query);
                match within(self.query_wait, call).await {
                    Some(Ok(mut vectors)) if vectors.len() == 1 => self.centered(&center, vectors.remove(0)),
                    Some(Ok(vectors)) => Err(wrong_count(1, vectors.len())),
                    Some(Err(e)) => Err(e),
                    None => Err(ModelError::new(
                        ModelErrorKind::Timeout,
                        "no embedding within the query wait",
                    )),
                }
            }
            None => {
                // Not calibrated yet: calibrated off the turn, and this question by words.
                let this = self.clone();
                (self.spawn)(Box::pin(async move {
                    let _ = this.calibrate().await;
                }));
                Err(ModelError::new(
                    ModelErrorKind::Timeout,
                    "the embedding model is not calibrated yet",
                ))
            }
        };
        match answer {
            Ok(v) => {
                self.report(EmbeddingEvent::Query);
                Some(v)
            }
            Err(e) => {
                tracing::debug!(kind = ?e.kind(), "question not embedded in time; recall by words");
                self.report(EmbeddingEvent::QueryMissed(e.kind()));
                None
            }
        }
    }

    /// After a commit of `id` returned: embeds `written` (and what earlier commits of `id`
    /// left pending) in the background and writes the vectors to `store`.
    pub(crate) fn after_commit(&self, store: Arc<dyn Store>, id: &ConversationId, written: Vec<(u64, Arc<Message>)>) {
        let texts = exchange_texts(&written);
        let mut batch: Vec<Pending> = written
            .into_iter()
            .zip(texts)
            .filter_map(|((seq, message), text)| {
                Some(Pending {
                    seq,
                    message,
                    text: text?,
                    attempts: 0,
                })
            })
            .collect();
        if let Some(earlier) = self.lock_pending().remove(id) {
            batch.extend(earlier);
        }
        if batch.is_empty() {
            return;
        }
        let this = self.clone();
        let id = id.clone();
        let running = Running::start(&self.running);
        (self.spawn)(Box::pin(async move {
            let _running = running;
            for chunk in batch.chunks(EMBED_BATCH) {
                let messages: Vec<(u64, Arc<Message>, String)> = chunk
                    .iter()
                    .map(|p| (p.seq, Arc::clone(&p.message), p.text.clone()))
                    .collect();
                match this.embed_and_store(store.as_ref(), &id, &messages).await {
                    Ok(kept) => this.report(EmbeddingEvent::Stored { kept }),
                    Err(failure) => {
                        this.report(failure.event());
                        this.keep_for_later(&id, chunk);
                    }
                }
            }
        }));
    }

    /// Embeds `messages` of `id` now and writes their vectors; returns how many the store
    /// kept. For re-embedding a store (`chatmem reindex`) as for the background.
    ///
    /// # Errors
    /// [`EmbedFailure`]: the model failed or answered garbage, or the store failed.
    pub async fn embed_indexed(
        &self,
        store: &dyn Store,
        id: &ConversationId,
        messages: &[IndexedMessage],
    ) -> Result<usize, EmbedFailure> {
        let written: Vec<(u64, Arc<Message>)> = messages
            .iter()
            .map(|m| (m.message.seq, Arc::clone(&m.message.message)))
            .collect();
        let texts = exchange_texts(&written);
        let messages: Vec<(u64, Arc<Message>, String)> = written
            .into_iter()
            .zip(texts)
            .filter_map(|((seq, m), text)| Some((seq, m, text?)))
            .collect();
        let mut kept = 0;
        for chunk in messages.chunks(EMBED_BATCH) {
            kept += self.embed_and_store(store, id, chunk).await?;
        }
        Ok(kept)
    }

    async fn embed_and_store(
        &self,
        store: &dyn Store,
        id: &ConversationId,
        messages: &[(u64, Arc<Message>, String)],
    ) -> Result<usize, EmbedFailure> {
        let texts: Vec<String> = messages.iter().map(|(_, _, t)| t.clone()).collect();
        if texts.is_empty() {
            return Ok(0);
        }
        let center = self.center(self.timeout).await.map_err(EmbedFailure::Model)?;
        let values = match within(self.timeout, self.embedder.embed(&texts, EmbedKind::Passage)).await {
            Some(Ok(values)) => values,
            Some(Err(e)) => return Err(EmbedFailure::Model(e)),
            None => {
                return Err(EmbedFailure::Model(ModelError::new(
                    ModelErrorKind::Timeout,
                    format!("no embedding within {:?}", self.timeout),
                )));
            }
        };
        if values.len() != texts.len() {
            return Err(EmbedFailure::Model(wrong_count(texts.len(), values.len())));
        }
        let mut vectors = Vec::with_capacity(values.len());
        for ((seq, message, _), values) in messages.iter().zip(values) {
            let vector = self.centered(&center, values).map_err(EmbedFailure::Model)?;
            vectors.push(MessageVector::new(*seq, message, vector));
        }
        store.put_vectors(id, &vectors).await.map_err(EmbedFailure::Store)
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationId, Vec<Pending>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `failed` for the conversation's next commit, each until it has failed
    /// [`EMBED_ATTEMPTS`] times, within [`MAX_PENDING`] in all.
    fn keep_for_later(&self, id: &ConversationId, failed: &[Pending]) {
        let mut pending = self.lock_pending();
        let mut room = MAX_PENDING.saturating_sub(pending.values().map(Vec::len).sum());
        let retry: Vec<Pending> = failed
            .iter()
            .filter(|p| p.attempts + 1 < EMBED_ATTEMPTS)
            .take_while(|_| {
                let fits = room > 0;
                room = room.saturating_sub(1);
                fits
            })
            .map(|p| Pending {
                attempts: p.attempts + 1,
                ..p.clone()
            })
            .collect();
        if !retry.is_empty() {
            pending.entry(id.clone()).or_default().extend(retry);
        }
    }

    /// Waits until the background embeddings started so far have finished, at most `within`;
    /// returns whether they did. For a command that exits after its commit: without it the
    /// process would end before the vectors land (they are then left to `chatmem reindex`).
    pub async fn settle(&self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while self.running.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            futures_timer::Delay::new(Duration::from_millis(5)).await;
        }
        true
    }

    /// The dimension of the model's vectors, once it has answered
    /// ([`calibrate`](Embeddings::calibrate)).
    pub fn dimension(&self) -> Option<usize> {
        self.center
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|c| c.len())
    }

    /// How many messages wait to be embedded again (in this process).
    pub fn pending(&self) -> usize {
        self.lock_pending().values().map(Vec::len).sum()
    }
}

/// One background embedding, counted while it runs (also when its task is dropped).
struct Running(Arc<std::sync::atomic::AtomicUsize>);

impl Running {
    fn start(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Why embedding messages failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedFailure {
    /// The model failed, timed out or answered something that is not one finite vector per
    /// text of one dimension.
    #[error("embedding failed: {0}")]
    Model(ModelError),
    /// The store did not take the vectors.
    #[error("storing vectors failed: {0}")]
    Store(crate::error::StoreError),
}

impl EmbedFailure {
    fn event(&self) -> EmbeddingEvent {
        match self {
            EmbedFailure::Model(e) => EmbeddingEvent::Failed(e.kind()),
            EmbedFailure::Store(_) => EmbeddingEvent::StoreFailed,
        }
    }
}

/// What each of `written` (one commit's messages, in order) is embedded as: who said it (its
/// participant's name, else its role) and its text, with the other half of its exchange when
/// it is among them (a user message and the assistant message right after it, an assistant
/// message and the user message right before it), oldest first; `None` for a message that says
/// nothing. The speaker matters to a small model: a question about Caroline otherwise ranks a
/// turn addressed to her ("Wow, Caroline!") over what she said (bench/results/rc/README.md).
fn exchange_texts(written: &[(u64, Arc<Message>)]) -> Vec<Option<String>> {
    use crate::message::Role;
    let said = |i: usize| {
        let m = &written[i].1;
        let speaker = m.name.as_deref().unwrap_or(m.role().as_str());
        embedding_text(m).map(|t| format!("{speaker}: {t}"))
    };
    let role = |i: usize| written.get(i).map(|(_, m)| m.role());
    (0..written.len())
        .map(|i| {
            let own = said(i)?;
            let pair = match role(i) {
                Some(Role::User) if role(i + 1) == Some(Role::Assistant) => said(i + 1).map(|a| format!("{own}\n{a}")),
                Some(Role::Assistant) if i > 0 && role(i - 1) == Some(Role::User) => {
                    said(i - 1).map(|u| format!("{u}\n{own}"))
                }
                _ => None,
            };
            Some(pair.unwrap_or(own))
        })
        .collect()
}

fn garbage(e: crate::recall::InvalidVector) -> ModelError {
    ModelError::new(ModelErrorKind::Protocol, format!("the embedding model answered {e}"))
}

fn mixed_dimensions() -> ModelError {
    ModelError::new(
        ModelErrorKind::Protocol,
        "the embedding model answered vectors of different dimensions",
    )
}

fn wrong_count(asked: usize, got: usize) -> ModelError {
    ModelError::new(
        ModelErrorKind::Protocol,
        format!("the embedding model answered {got} vectors for {asked} texts"),
    )
}

/// `future`'s output if it is ready within `wait` (a runtime-free timer).
async fn within<F: Future>(wait: Duration, future: F) -> Option<F::Output> {
    let future = std::pin::pin!(future);
    match select(future, futures_timer::Delay::new(wait)).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_is_embedded_with_its_speakers() {
        let written: Vec<(u64, Arc<Message>)> = [
            Message::system("Be brief."),
            Message::user("I adopted a dog.").with_name("Caroline"),
            Message::assistant("Congratulations!"),
            Message::user("Thanks."),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i as u64, Arc::new(m)))
        .collect();
        let texts = exchange_texts(&written);
        assert_eq!(
            texts,
            [
                Some("system: Be brief.".to_owned()),
                Some("Caroline: I adopted a dog.\nassistant: Congratulations!".to_owned()),
                Some("Caroline: I adopted a dog.\nassistant: Congratulations!".to_owned()),
                Some("user: Thanks.".to_owned()),
            ]
        );
    }
}
