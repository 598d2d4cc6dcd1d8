//! [`FactExtractor`]: what reads a user's messages for facts with a chat model, off the turn's
//! path. After a turn begun for a user ([`ChatMemory::begin_as`](crate::ChatMemory::begin_as))
//! commits, the messages it evicted from the window (or, every
//! [`Facts::extract_every`](super::Facts::extract_every) turns without an eviction, the
//! window's messages not shown yet) go to the model in the background, with the user's current
//! facts; its answer is checked whole ([`parse_proposal`]), merged by chatmem's rules
//! ([`merge`], then [`enforce`]) and committed through [`apply_facts`], so a change another
//! writer made in between is kept. The turn never waits for any of it, and nothing that goes
//! wrong there fails a turn: it is counted ([`ExtractionStats`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::commit::Commit;
use crate::counter::TokenCounter;
use crate::id::ConversationId;
use crate::message::Message;
use crate::model::{ChatModel, ChatRequest, ModelError, ModelErrorKind};
use crate::snapshot::Snapshot;
use crate::store::{FactsCommit, Store, now_micros};
use crate::stored_message::StoredMessage;
use crate::summarizer::with_timeout;

use super::apply::apply_facts;
use super::bounds::{FactLimits, enforce};
use super::change::{Cause, ChangeKind};
use super::fact::FactSet;
use super::merge::merge;
use super::proposal::{Shown, parse_proposal};
use super::render::{line, render_order};
use super::user_id::UserId;

/// The instructions the facts model gets: the system message of every extraction call.
pub const FACTS_EXTRACTION_PROMPT: &str = "You keep the facts an assistant knows about its user, across the user's conversations. \
You get the facts already known about the user, then messages of one conversation, each with its number (#12). \
Extract the standalone, durable facts about the user that these messages state: only facts stated by the user or about the user, \
each understandable without the conversation (names, places, addresses, preferences, allergies, accounts, lasting plans); \
not passing remarks, not what the assistant says about itself, not facts already known unless the messages say them again. \
Give a fact that has one value at a time (a home city, a default address, a name) a key: words of lowercase letters, digits, \
_ and - joined by dots, such as \"home.city\" or \"address.default\"; reuse the key of the known fact it replaces, so that the \
new value supersedes the old. Give every other fact the key null. Never delete a fact: a known fact you leave out is kept. \
Answer with JSON exactly of this shape and nothing else: \
{\"facts\": [{\"text\": \"...\", \"key\": \"dotted.key\" or null, \"sources\": [the numbers of the messages that state it]}]}. \
Answer {\"facts\": []} when the messages state no such fact.";

/// How long one extraction call may take by default (as long as a summary call).
pub const DEFAULT_EXTRACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The most tokens the facts model may answer by default.
pub const DEFAULT_EXTRACTION_MAX_TOKENS: u32 = 1_000;

/// The most messages one extraction call is shown: of more (an eviction of a very long
/// window), the newest.
pub const MAX_SHOWN_MESSAGES: usize = 200;

/// The most bytes of message text one extraction call is shown: past it the oldest messages
/// are left out (and a single longer message is cut).
pub const MAX_SHOWN_BYTES: usize = 64 * 1024;

/// At most this many conversations' progress (turns since their last extraction) is kept in
/// one process; past it the count starts again.
const MAX_PROGRESS: usize = 4_096;

/// Runs an extraction off the turn: `|f| { tokio::spawn(f); }`.
type Spawn = Arc<dyn Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync>;

/// Reads facts with a chat model: opt in with
/// [`ChatMemoryBuilder::fact_extractor`](crate::ChatMemoryBuilder::fact_extractor) (which
/// needs [`Facts`](super::Facts) configured). The model is any [`ChatModel`], as the
/// [`Summarizer`](crate::Summarizer)'s is; the spawner runs each extraction in the background
/// (required: an extraction never runs on a turn's path).
///
/// ```
/// # use chatmem::{ChatModel, ChatRequest, ChatResponse, ModelError};
/// # #[derive(Debug)] struct Cheap;
/// # #[async_trait::async_trait] impl ChatModel for Cheap {
/// #     async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> { unimplemented!() }
/// # }
/// use std::time::Duration;
/// use chatmem::facts::FactExtractor;
/// let extractor = FactExtractor::new(Cheap, drop).timeout(Duration::from_secs(20));
/// assert_eq!(extractor.timeout_value(), Duration::from_secs(20));
/// assert_eq!(extractor.stats().calls, 0);
/// ```
#[derive(Clone)]
pub struct FactExtractor {
    model: Arc<dyn ChatModel>,
    spawn: Spawn,
    timeout: Duration,
    max_tokens: u32,
    /// Shared by the clones: the counters of this extractor's memory.
    counters: Arc<Counters>,
    /// Turns since each conversation's last extraction, and the last message it showed.
    progress: Arc<Mutex<HashMap<ConversationId, Progress>>>,
    /// Extractions started and not yet finished.
    running: Arc<AtomicUsize>,
}

impl fmt::Debug for FactExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactExtractor")
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

/// What is known of a conversation between extractions.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Final commits since the last extraction.
    turns: u32,
    /// The newest message an extraction was shown.
    last_shown: u64,
}

/// The counters, shared and updated from the background.
#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    failures: AtomicU64,
    store_failures: AtomicU64,
    discarded: Mutex<BTreeMap<&'static str, u64>>,
    added: AtomicU64,
    superseded: AtomicU64,
    confirmed: AtomicU64,
    evicted: AtomicU64,
}

/// What an extractor has done since its memory was built, for a host to export (a server's
/// `/metrics`): read with [`FactExtractor::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtractionStats {
    /// Extraction calls made to the model.
    pub calls: u64,
    /// Calls that failed or timed out (nothing applied).
    pub failures: u64,
    /// Extractions whose facts could not be loaded or committed (the store failed, or other
    /// writers kept winning; nothing applied).
    pub store_failures: u64,
    /// Answers discarded whole, by [`InvalidProposal::code`](super::InvalidProposal::code)
    /// (`shape`, `too_large`, `source_not_shown`, ...); codes never seen are absent.
    pub discarded: BTreeMap<&'static str, u64>,
    /// Facts added (a new fact, or the new value of a key).
    pub added: u64,
    /// Facts superseded by a new value of their key.
    pub superseded: u64,
    /// Facts said again.
    pub confirmed: u64,
    /// Facts evicted to keep a user's facts within their bounds after an extraction.
    pub evicted: u64,
    /// Extractions started and not finished yet (a gauge, not a count): 0 when every
    /// extraction so far has landed or given up.
    pub running: u64,
}

impl ExtractionStats {
    /// All discarded answers, whatever the code.
    pub fn discarded_total(&self) -> u64 {
        self.discarded.values().sum()
    }
}

impl FactExtractor {
    /// An extractor calling `model` (often a cheaper one than the conversation's), each call
    /// run by `spawn` (on tokio: `|f| { tokio::spawn(f); }`), with a
    /// [`DEFAULT_EXTRACTION_TIMEOUT`] and answers of at most [`DEFAULT_EXTRACTION_MAX_TOKENS`].
    pub fn new(
        model: impl ChatModel + 'static,
        spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
    ) -> Self {
        Self::from_arc(Arc::new(model), spawn)
    }

    /// [`new`](FactExtractor::new) for a model already shared.
    pub fn from_arc(
        model: Arc<dyn ChatModel>,
        spawn: impl Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
    ) -> Self {
        Self {
            model,
            spawn: Arc::new(spawn),
            timeout: DEFAULT_EXTRACTION_TIMEOUT,
            max_tokens: DEFAULT_EXTRACTION_MAX_TOKENS,
            counters: Arc::default(),
            progress: Arc::default(),
            running: Arc::default(),
        }
    }

    /// How long one extraction call may take; past it the call is dropped and counted as a
    /// failure.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The timeout set by [`timeout`](FactExtractor::timeout).
    pub fn timeout_value(&self) -> Duration {
        self.timeout
    }

    /// The most tokens the model is asked to answer with (its answer is bounded in bytes too,
    /// by [`FactLimits::max_proposal_bytes`]).
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// What this extractor has done so far.
    pub fn stats(&self) -> ExtractionStats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ExtractionStats {
            calls: load(&c.calls),
            failures: load(&c.failures),
            store_failures: load(&c.store_failures),
            discarded: c.discarded.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            added: load(&c.added),
            superseded: load(&c.superseded),
            confirmed: load(&c.confirmed),
            evicted: load(&c.evicted),
            running: self.running.load(Ordering::SeqCst) as u64,
        }
    }

    /// Waits until the extractions started so far have finished, at most `within`; returns
    /// whether they did. For tests, and for a host shutting down (an extraction cut short
    /// leaves the facts as they were).
    pub async fn settle(&self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while self.running.load(Ordering::SeqCst) > 0 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            futures_timer::Delay::new(Duration::from_millis(5)).await;
        }
        true
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_tokens == 0 {
            return Err("facts extraction max_tokens must be at least 1".into());
        }
        if self.timeout.is_zero() {
            return Err("facts extraction timeout must be longer than zero".into());
        }
        Ok(())
    }

    fn progress(&self, id: &ConversationId) -> Progress {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied()
            .unwrap_or_default()
    }

    /// What the commit `commit`, planned on `snapshot`, shows the model once written: the
    /// messages it evicts from the window, but those an earlier extraction of this process
    /// was shown (read every `every` turns while still in the window: each message is read
    /// once); else, when `turn_ends` and this is the `every`th turn since the conversation's
    /// last extraction, the window's messages not shown yet; else none. Within
    /// [`MAX_SHOWN_MESSAGES`] and [`MAX_SHOWN_BYTES`].
    pub(crate) fn to_show(
        &self,
        id: &ConversationId,
        snapshot: &Snapshot,
        commit: &Commit,
        every: u32,
        turn_ends: bool,
    ) -> Vec<StoredMessage> {
        let new_start = commit.window_start();
        let all = || snapshot.messages.iter().chain(commit.appended());
        let progress = self.progress(id);
        if new_start > snapshot.window_start {
            let evicted: Vec<StoredMessage> = all()
                .filter(|m| m.seq >= snapshot.window_start && m.seq < new_start && m.seq > progress.last_shown)
                .cloned()
                .collect();
            return newest_within(evicted);
        }
        if !turn_ends || progress.turns.saturating_add(1) < every {
            return Vec::new();
        }
        let recent = all()
            .filter(|m| m.seq >= new_start && m.seq > progress.last_shown)
            .cloned()
            .collect();
        newest_within(recent)
    }

    /// After a commit of `id` for `user` was written: counts the turn (when `turn_ends`) and,
    /// when it showed messages ([`to_show`](Self::to_show)), starts their extraction in the
    /// background.
    pub(crate) fn after_commit(&self, job: Job, turn_ends: bool) {
        {
            let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            if progress.len() >= MAX_PROGRESS && !progress.contains_key(&job.conversation) {
                progress.clear();
            }
            let entry = progress.entry(job.conversation.clone()).or_default();
            match job.messages.last() {
                Some(last) => {
                    entry.turns = 0;
                    entry.last_shown = entry.last_shown.max(last.seq);
                }
                None if turn_ends => entry.turns = entry.turns.saturating_add(1),
                None => {}
            }
        }
        if job.messages.is_empty() {
            return;
        }
        let this = self.clone();
        let running = Running::start(&self.running);
        (self.spawn)(Box::pin(async move {
            let _running = running;
            this.extract(job).await;
        }));
    }

    /// The messages of the request: the instructions, then the known facts and the messages
    /// shown, numbered.
    pub(crate) fn request_messages(known: &FactSet, shown: &[StoredMessage]) -> [Message; 2] {
        let mut input = String::from("Known facts about the user:\n");
        let facts = render_order(known);
        if facts.is_empty() {
            input.push_str("(none)\n");
        }
        for fact in facts {
            input.push_str(&line(fact));
            if let Some(key) = &fact.key {
                let _ = write!(input, " (key: {key})");
            }
            input.push('\n');
        }
        input.push_str("\nMessages:\n");
        let mut left = MAX_SHOWN_BYTES;
        for m in shown {
            let written = numbered_line(m);
            let cut = cut_at(&written, left);
            left -= cut.len();
            input.push_str(cut);
            if !cut.ends_with('\n') {
                input.push('\n');
            }
        }
        [
            Message::system(FACTS_EXTRACTION_PROMPT),
            Message::user(input.trim_end().to_owned()),
        ]
    }

    /// One extraction: the facts loaded, the model asked, its answer checked, merged and
    /// committed; every outcome counted.
    async fn extract(&self, job: Job) {
        let c = &self.counters;
        let store = job.store.as_ref();
        let known = match store.load_facts(&job.user).await {
            Ok(known) => known,
            Err(e) => {
                c.store_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = ?e.kind(), "could not load the user's facts to extract more");
                return;
            }
        };
        let shown = Shown::new(job.conversation.clone(), job.messages.iter().map(|m| m.seq));
        let messages = Self::request_messages(&known.set, &job.messages);
        drop(job.messages);
        let mut request = ChatRequest::new(&messages);
        request.options.max_tokens = Some(self.max_tokens);
        request.options.json_object = true;
        c.calls.fetch_add(1, Ordering::Relaxed);
        let answer = with_timeout(self.model.complete(request), self.timeout)
            .await
            .unwrap_or_else(|| {
                Err(ModelError::new(
                    ModelErrorKind::Timeout,
                    "the facts extraction call timed out",
                ))
            });
        let answer = match answer {
            Ok(response) => response.message.text().unwrap_or_default().into_owned(),
            Err(e) => {
                c.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = ?e.kind(), "facts extraction failed; nothing applied");
                tracing::trace!(conversation = %job.conversation, error = %e, "the extraction call that failed");
                return;
            }
        };
        let proposal = match parse_proposal(answer.trim(), &shown, &job.limits) {
            Ok(proposal) => proposal,
            Err(e) => {
                *c.discarded
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(e.code())
                    .or_default() += 1;
                tracing::warn!(code = e.code(), "the facts model's answer was discarded whole");
                tracing::trace!(error = %e, "the discarded answer's fault");
                return;
            }
        };
        if proposal.is_empty() {
            return;
        }
        let cause = Cause::Extraction {
            conversation: job.conversation.clone(),
        };
        let counter = job.counter.as_ref();
        let applied = apply_facts(store, &job.user, |loaded| {
            let now = now_micros();
            let merged = merge(&loaded.set, &proposal, &cause, now);
            let bounded = enforce(&merged.set, &job.limits, counter, &cause, now);
            FactsCommit::new(loaded, merged.then(bounded))
        })
        .await;
        match applied {
            Ok(applied) => {
                for change in &applied.history {
                    let counted = match change.kind {
                        ChangeKind::Added { .. } => &c.added,
                        ChangeKind::Superseded { .. } => &c.superseded,
                        ChangeKind::Confirmed { .. } => &c.confirmed,
                        ChangeKind::Evicted { .. } => &c.evicted,
                        _ => continue,
                    };
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                c.store_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = ?e.kind(), "could not commit the extracted facts");
            }
        }
    }
}

/// One extraction to run: whose facts, the messages shown and what it needs to apply them.
pub(crate) struct Job {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) user: UserId,
    pub(crate) conversation: ConversationId,
    pub(crate) messages: Vec<StoredMessage>,
    pub(crate) limits: FactLimits,
    pub(crate) counter: Arc<dyn TokenCounter>,
}

/// The newest of `messages` (oldest first) within [`MAX_SHOWN_MESSAGES`] and
/// [`MAX_SHOWN_BYTES`] of text (at least one).
fn newest_within(mut messages: Vec<StoredMessage>) -> Vec<StoredMessage> {
    let mut bytes = 0usize;
    let mut keep = 0;
    for m in messages.iter().rev().take(MAX_SHOWN_MESSAGES) {
        bytes = bytes.saturating_add(numbered_line(m).len());
        if keep > 0 && bytes > MAX_SHOWN_BYTES {
            break;
        }
        keep += 1;
    }
    messages.drain(..messages.len() - keep);
    messages
}

/// A message as the model reads it: `#12 user: text`, tool calls by name, one line per part.
fn numbered_line(m: &StoredMessage) -> String {
    let message = &m.message;
    let role = message.role().as_str();
    let mut out = String::new();
    if let Some(text) = message.text().filter(|t| !t.is_empty()) {
        let _ = writeln!(out, "#{} {role}: {text}", m.seq);
    }
    for call in message.tool_calls() {
        let _ = writeln!(out, "#{} {role} calls {}({})", m.seq, call.name, call.arguments);
    }
    out
}

/// The longest prefix of `text` of at most `max` bytes, at a character boundary.
fn cut_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// One extraction, counted while it runs (also when its task is dropped).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::add;

    #[test]
    fn the_request_numbers_the_messages_and_lists_the_facts_with_their_keys() {
        let set = add(&FactSet::default(), "Allergic to nuts", None, &FactLimits::default(), 1)
            .unwrap()
            .0
            .set;
        let key = crate::facts::FactKey::new("home.city").unwrap();
        let set = add(&set, "Lives in Berlin", Some(key), &FactLimits::default(), 2)
            .unwrap()
            .0
            .set;
        let shown = [
            StoredMessage::new(12, 3, Message::user("I moved to Hamburg.")),
            StoredMessage::new(13, 2, Message::assistant("Noted.")),
        ];
        let [system, user] = FactExtractor::request_messages(&set, &shown);
        assert_eq!(system.text().unwrap(), FACTS_EXTRACTION_PROMPT);
        assert_eq!(
            user.text().unwrap(),
            "Known facts about the user:\n- Lives in Berlin (key: home.city)\n- Allergic to nuts\n\n\
             Messages:\n#12 user: I moved to Hamburg.\n#13 assistant: Noted."
        );
        let [_, user] = FactExtractor::request_messages(&FactSet::default(), &shown[..1]);
        assert!(
            user.text()
                .unwrap()
                .starts_with("Known facts about the user:\n(none)\n\nMessages:\n#12 user:")
        );
    }

    #[test]
    fn the_prompt_is_documented_word_for_word() {
        let docs = include_str!("../../../../docs/facts.md");
        assert!(
            docs.contains(FACTS_EXTRACTION_PROMPT),
            "docs/facts.md quotes FACTS_EXTRACTION_PROMPT"
        );
    }

    #[test]
    fn what_is_shown_is_bounded_keeping_the_newest() {
        let many: Vec<StoredMessage> = (1..=300)
            .map(|i| StoredMessage::new(i, 1, Message::user(format!("m{i}"))))
            .collect();
        let kept = newest_within(many);
        assert_eq!(kept.len(), MAX_SHOWN_MESSAGES);
        assert_eq!((kept[0].seq, kept[kept.len() - 1].seq), (101, 300));
        let long = "x".repeat(MAX_SHOWN_BYTES / 2);
        let big: Vec<StoredMessage> = (1..=3)
            .map(|i| StoredMessage::new(i, 1, Message::user(long.clone())))
            .collect();
        assert_eq!(newest_within(big).iter().map(|m| m.seq).collect::<Vec<_>>(), [3]);
        let huge = [StoredMessage::new(7, 1, Message::user("é".repeat(MAX_SHOWN_BYTES)))];
        assert_eq!(newest_within(huge.to_vec()).len(), 1);
        let [_, user] = FactExtractor::request_messages(&FactSet::default(), &huge);
        assert!(user.text().unwrap().len() <= MAX_SHOWN_BYTES + 100);
    }
}
