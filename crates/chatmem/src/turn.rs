//! [`Turn`]: one turn of one conversation — begun for its id, planned once, committed by
//! itself. The only way anything is written through [`ChatMemory`].
//!
//! A turn holds the window it was begun on and its new messages, each counted once when it
//! joins. Its [`Plan`] (which system message holds, the window, the commit) is made when the
//! prompt or the commit first needs it and kept until a message joins; a commit that loses a
//! version check reloads and plans again. Nothing else re-plans.

use std::fmt;
#[cfg(test)]
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::facts::{Facts, Job, RenderedFacts, UserId, render};
use crate::id::ConversationId;
use crate::in_memory_store::InMemoryStore;
use crate::memory::ChatMemory;
use crate::message::{Message, Role};
use crate::recall::{Recall, Recalled, SearchQuery, SearchResult};
use crate::snapshot::Snapshot;
use crate::store::{Store, StoredFacts};
use crate::stored_message::StoredMessage;
use crate::summarizer::pending_summary;
use crate::summary::{render_system, shown};
use crate::window::{Chosen, LoadedWindow};
use crate::window::{Plan, plan};

/// A turn of one conversation: begun by [`ChatMemory::begin`] for an id, given its new
/// messages ([`push`](Turn::push)), asked for what the model is sent ([`prompt`](Turn::prompt)),
/// given what the model produced (tool calls, tool results, the answer), and committed by
/// itself ([`commit`](Turn::commit)), as one atomic batch, to the conversation it was begun
/// for. Each message is counted once, when it joins the turn, never again (not for the
/// prompt, not for a retried commit).
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, Message, WindowPolicy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = ChatMemory::builder(chatmem::InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
/// let id = ConversationId::new("app-user-42-aftersale")?;
/// let mut turn = memory.begin(&id).await?;
/// turn.extend([Message::system("你是邻里仓售后。"), Message::user("我的订单是 LC202610060018。")]);
/// assert_eq!(turn.prompt().len(), 2); // system, window, new messages
/// turn.push(Message::assistant("收到。")); // the model's answer
/// turn.commit().await?;
/// assert_eq!(memory.get(&id).await?.len(), 3);
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
///
/// A turn commits to the conversation it was begun for and to no other: there is no way to
/// hand it another id.
///
/// ```compile_fail
/// # use chatmem::{ChatMemory, ConversationId, Message};
/// # async fn f() -> chatmem::Result<()> {
/// let memory = ChatMemory::in_memory();
/// let (a, b) = (ConversationId::new("a")?, ConversationId::new("b")?);
/// let mut turn = memory.begin(&a).await?;
/// turn.push(Message::user("hi"));
/// turn.commit(&b).await?; // does not compile: `commit` takes no id
/// # Ok(()) }
/// ```
pub struct Turn<'m, S = InMemoryStore> {
    memory: &'m ChatMemory<S>,
    id: ConversationId,
    loaded: LoadedWindow,
    new: Vec<(Arc<Message>, u32)>,
    /// The plan for the loaded window plus `new`, made when first needed, dropped when a
    /// message joins or the window is reloaded.
    plan: OnceLock<Plan>,
    /// How many plans this turn made: what the unit tests hold to once per prompt, answer
    /// and lost version check.
    #[cfg(test)]
    plans: AtomicU32,
    /// The system message with the summary after it, made when a prompt first needs it
    /// (the prompt borrows it); cleared when a system message joins the turn.
    rendered: OnceLock<Option<Message>>,
    /// What [`recall`](Turn::recall) found for the turn's user message; dropped when another
    /// user message joins.
    recalled: Option<Recalled>,
    /// Whose turn it is, and their facts ([`ChatMemory::begin_as`]); `None` for a turn begun
    /// without a user.
    user: Option<UserTurn>,
}

/// A turn's user and, with [`Facts`] configured, their facts as loaded and as sent.
#[derive(Debug)]
struct UserTurn {
    user: UserId,
    facts: Option<TurnFacts>,
}

/// A user's facts in a turn: rendered once, when the turn begins, within the budget the
/// window leaves then; rendered again only if that budget changes (under a tight token
/// window, as the turn's messages join or the conversation is reloaded), so the facts message
/// is a function of the facts and the budget alone.
#[derive(Debug)]
struct TurnFacts {
    loaded: StoredFacts,
    /// [`Facts::token_budget`].
    max_tokens: usize,
    /// The budget `rendered` was rendered within.
    within: usize,
    rendered: Option<RenderedFacts>,
    /// The facts rendered within another budget (with it), made when first needed; cleared
    /// when the budget may change.
    refit: OnceLock<(usize, Option<RenderedFacts>)>,
}

impl<S> fmt::Debug for Turn<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn")
            .field("id", &self.id)
            .field("user", &self.user.as_ref().map(|u| &u.user))
            .field("version", &self.loaded.snapshot().version)
            .field("new", &self.new.len())
            .finish_non_exhaustive()
    }
}

/// What a [`Turn::commit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Committed {
    /// The conversation's version after the commit; `None` when the turn changed nothing
    /// (it held only a system message equal to the stored one, or nothing), and nothing was
    /// written.
    pub version: Option<u64>,
}

/// How a [`Turn`] writes: what its commit carries and what it keeps for after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// The final commit ([`Turn::commit`]): with the summary of what it evicts, letting go of
    /// the loaded messages before the store appends (nothing is needed back).
    Final,
    /// The final commit, keeping it to return the window after it ([`Turn::commit_window`]).
    FinalReturningWindow,
    /// What the turn holds so far, without a summary, keeping the commit for the turn to go on
    /// from the window after it ([`Turn::checkpoint`]).
    Checkpoint,
}

impl Write {
    /// Whether the commit carries the summary of what it evicts.
    fn summarizes(self) -> bool {
        matches!(self, Write::Final | Write::FinalReturningWindow)
    }

    /// Whether the commit is kept, for the window after it.
    fn keeps_commit(self) -> bool {
        matches!(self, Write::FinalReturningWindow | Write::Checkpoint)
    }
}

impl<'m, S: Store> Turn<'m, S> {
    pub(crate) fn new(memory: &'m ChatMemory<S>, id: ConversationId, loaded: LoadedWindow) -> Self {
        Self {
            memory,
            id,
            loaded,
            new: Vec::new(),
            plan: OnceLock::new(),
            #[cfg(test)]
            plans: AtomicU32::new(0),
            rendered: OnceLock::new(),
            recalled: None,
            user: None,
        }
    }

    /// The turn for `user`, with their facts and the settings they are sent by (`None`: no
    /// facts are sent).
    pub(crate) fn for_user(mut self, user: UserId, facts: Option<(StoredFacts, Facts)>) -> Self {
        let facts = facts.map(|(loaded, settings)| {
            let max_tokens = settings.token_budget();
            let within = self.facts_budget(max_tokens);
            let rendered = render(&loaded.set, within, self.memory.counter().as_ref());
            TurnFacts {
                loaded,
                max_tokens,
                within,
                rendered,
                refit: OnceLock::new(),
            }
        });
        self.user = Some(UserTurn { user, facts });
        self
    }

    /// The user the turn was begun for ([`ChatMemory::begin_as`]), if one was.
    pub fn user(&self) -> Option<&UserId> {
        self.user.as_ref().map(|u| &u.user)
    }

    /// The user's facts as the turn loaded them, when the memory sends facts
    /// ([`ChatMemoryBuilder::facts`](crate::ChatMemoryBuilder::facts)) and the turn was begun
    /// for a user.
    pub fn loaded_facts(&self) -> Option<&StoredFacts> {
        self.turn_facts().map(|f| &f.loaded)
    }

    /// The user's facts as the [`prompt`](Turn::prompt) sends them: one user message under
    /// [`FACTS_HEADING`](crate::facts::FACTS_HEADING), right after the system message (and the
    /// summary in it), before the window; `None` when there is nothing to send (no facts, none
    /// fits, no user, facts off).
    ///
    /// Written by [`render`] within [`Facts::token_budget`] and, under a token window, within
    /// what the window's budget leaves after the system message, the summary and the turn's
    /// own messages; the window then leaves room for it, so the facts never make the prompt
    /// pass the budget. The same facts are the same bytes every turn while that room is at
    /// least the facts' budget (a window of thousands of tokens and the default budget of
    /// 1,000), so a provider's cached prefix survives until a fact changes. Never stored: the
    /// commit writes the turn's messages only.
    pub fn facts(&self) -> Option<&RenderedFacts> {
        let facts = self.turn_facts()?;
        let within = self.facts_budget(facts.max_tokens);
        if within == facts.within {
            return facts.rendered.as_ref();
        }
        let (made_within, refit) = facts.refit.get_or_init(|| {
            (
                within,
                render(&facts.loaded.set, within, self.memory.counter().as_ref()),
            )
        });
        debug_assert_eq!(*made_within, within, "the refit is cleared when the budget may change");
        refit.as_ref()
    }

    fn turn_facts(&self) -> Option<&TurnFacts> {
        self.user.as_ref().and_then(|u| u.facts.as_ref())
    }

    /// The budget the facts message is rendered within: `max_tokens`, and under a token window
    /// at most what the budget leaves after the list's priming, the system message in effect,
    /// the summary and the turn's own messages (which the prompt always sends): the facts
    /// never take the room the turn needs.
    fn facts_budget(&self, max_tokens: usize) -> usize {
        let crate::policy::Budget::Tokens(max) = self.memory.policy().budget() else {
            return max_tokens;
        };
        let snapshot = self.loaded.snapshot();
        let system = self
            .new
            .iter()
            .rev()
            .find(|(m, _)| m.is_system())
            .map(|(_, tokens)| *tokens)
            .or_else(|| snapshot.system.as_ref().map(|s| s.tokens));
        let summary = shown(snapshot.summary.as_ref()).map_or(0, |s| s.tokens);
        let turn: u64 = self
            .new
            .iter()
            .filter(|(m, _)| !m.is_system())
            .map(|(_, tokens)| u64::from(*tokens))
            .sum();
        let taken = crate::tokens::PER_LIST as u64 + u64::from(system.unwrap_or(0)) + u64::from(summary) + turn;
        let left = usize::try_from((max as u64).saturating_sub(taken)).unwrap_or(usize::MAX);
        left.min(max_tokens)
    }

    /// Drops the facts rendered within another budget: the budget may have changed.
    fn refit_facts(&mut self) {
        if let Some(facts) = self.user.as_mut().and_then(|u| u.facts.as_mut()) {
            facts.refit = OnceLock::new();
        }
    }

    /// Whether `m` is the facts message the prompt sends.
    fn is_facts(&self, m: &Message) -> bool {
        self.facts().is_some_and(|f| std::ptr::eq(&f.message, m))
    }

    /// The conversation the turn belongs to.
    pub fn id(&self) -> &ConversationId {
        &self.id
    }

    /// Adds a message to the turn, counting its tokens when the window is a token budget (the
    /// only time they are counted; a message-count window stores it [uncounted](crate::store::UNCOUNTED)).
    ///
    /// The system message rule is applied here, once: a system (or developer, see
    /// [`Message::is_system`]) message with the role and text of the one in effect (the
    /// turn's latest, else the stored one) is ignored — neither counted nor written; a
    /// different one replaces it.
    pub fn push(&mut self, message: Message) {
        if message.is_system()
            && self
                .system_in_effect()
                .is_some_and(|s| s.role() == message.role() && s.text() == message.text())
        {
            return;
        }
        let tokens = if self.memory.policy().counts_tokens() {
            u32::try_from(self.memory.counter().count_message(&message)).unwrap_or(u32::MAX)
        } else {
            0
        };
        if message.is_system() {
            self.rendered = OnceLock::new();
        }
        self.refit_facts();
        if message.role() == Role::User {
            self.recalled = None;
        }
        self.plan = OnceLock::new();
        self.new.push((Arc::new(message), tokens));
    }

    /// The system message in effect: the turn's latest, else the stored one.
    fn system_in_effect(&self) -> Option<&Message> {
        let stored = || self.loaded.snapshot().system.as_ref().map(|s| &*s.message);
        self.new
            .iter()
            .rev()
            .map(|(m, _)| &**m)
            .find(|m| m.is_system())
            .or_else(stored)
    }

    /// Adds a request's messages, leaving out what memory already holds: a leading system
    /// message goes to the system message rule (the same text is ignored, another replaces
    /// the stored one); of the others, those up to and including the last one that is said
    /// as memory's last message are memory sent again (a client that resends its whole
    /// conversation, or a message being retried after an eager write), not new. Returns how
    /// many were left out.
    ///
    /// The rule, exactly: let `last` be the last message of the loaded window (none: every
    /// message is new). The request's messages after its leading system message are
    /// searched, from the end, for the last one said as `last` is: the same role, name,
    /// content (text or parts; an assistant's empty text is no text), tool calls (ids, names,
    /// arguments) and `tool_call_id`; `metadata`, `reasoning_content` and `is_error`, which
    /// are never sent to a model, do not count. That message and all before it are memory's;
    /// only those after it join the turn. The ones before it are not compared: a client that
    /// edited an older message does not rewrite memory (memory keeps what was said, and the
    /// model is sent memory's window). A request without such a message (a client that
    /// sends only its new messages, or one that changed memory's last message) is all new.
    ///
    /// ```
    /// use chatmem::{ChatMemory, ConversationId, Message};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::in_memory();
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::user("u1"), Message::assistant("a1")]).await?;
    /// let mut turn = memory.begin(&id).await?;
    /// assert_eq!(turn.push_unstored(vec![Message::user("u1"), Message::assistant("a1"), Message::user("u2")]), 2);
    /// assert_eq!(turn.messages().count(), 1);
    /// # Ok::<(), chatmem::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn push_unstored(&mut self, mut messages: Vec<Message>) -> usize {
        let system = match messages.first() {
            Some(m) if m.is_system() => Some(messages.remove(0)),
            _ => None,
        };
        let skip = already_stored(&self.loaded.snapshot().messages, &messages);
        self.extend(system.into_iter().chain(messages.into_iter().skip(skip)));
        skip
    }

    /// The window the turn started from (after a [`checkpoint`](Turn::checkpoint), the
    /// window as committed).
    pub fn loaded(&self) -> &LoadedWindow {
        &self.loaded
    }

    /// The turn's messages so far, in order.
    pub fn messages(&self) -> impl Iterator<Item = &Message> + '_ {
        self.new.iter().map(|(m, _)| &**m)
    }

    /// Whether the turn has no messages (a repeated system message is none: it was ignored).
    pub fn is_empty(&self) -> bool {
        self.new.is_empty()
    }

    /// What the model is sent: the system message (the turn's, if it replaces the stored
    /// one, with the summary after it), then the user's facts when the turn has them
    /// ([`facts`](Turn::facts)), then the part of the loaded window that memory will
    /// still hold once the turn's messages are added (so the model never sees more than the
    /// policy allows), then the turn's messages other than a system message.
    ///
    /// The prompt borrows the messages from the loaded window and the turn: building it
    /// copies no message and takes no reference count per window message, and
    /// [`ChatRequest::new`](crate::ChatRequest::new) takes it as it is. Asked again with no
    /// message added (each round of a tool loop), it reuses the turn's plan.
    pub fn prompt(&self) -> Vec<&Message> {
        let snapshot = self.loaded.snapshot();
        let old = snapshot.messages.len();
        let plan = self.plan();
        let system = match plan.system_at {
            Some(i) => Some(&*self.new[i].0),
            None => snapshot.system.as_ref().map(|s| &*s.message),
        };
        let system = match shown(snapshot.summary.as_ref()) {
            Some(summary) => self
                .rendered
                .get_or_init(|| render_system(system, Some(summary)))
                .as_ref(),
            None => system,
        };
        let facts = self.facts().map(|f| &f.message);
        // Sized once: the prompt can be the whole window, and growing it step by step copies it.
        let mut prompt = Vec::with_capacity(3 + plan.chosen.count());
        prompt.extend(system);
        // The facts right after the system message: the same in every turn of the user, they
        // belong to the prompt's fixed prefix, before the window that moves.
        prompt.extend(facts);
        let head = prompt.len();
        match &plan.chosen {
            // A run: the loaded messages from its start on, a slice (extended in one go).
            Chosen::Run { start, .. } => {
                prompt.extend(snapshot.messages[(*start).min(old)..].iter().map(|m| &*m.message));
                prompt.extend(self.new.iter().filter(|(m, _)| !m.is_system()).map(|(m, _)| &**m));
            }
            // The positions ascend, so the loaded messages' are a prefix; a cleared message is
            // sent as its replacement.
            Chosen::Picked(s) => {
                let loaded = &s.indices[..s.indices.partition_point(|&i| i < old)];
                fn sent<'a>(s: &'a crate::window::Selection, i: usize, stored: &'a Message) -> &'a Message {
                    s.replacement(i).unwrap_or(stored)
                }
                prompt.extend(loaded.iter().map(|&i| sent(s, i, &snapshot.messages[i].message)));
                // The appended messages are numbered after the loaded ones, in the batch's
                // order, its system message left out.
                let appended = self.new.iter().filter(|(m, _)| !m.is_system()).map(|(m, _)| &**m);
                prompt.extend(appended.enumerate().map(|(k, m)| sent(s, old + k, m)));
            }
        }
        // Recalled messages go just before the user message they answer: after the system
        // message, the summary and the window, whose place is unchanged.
        if let Some(recalled) = self.recalled.as_ref().and_then(|r| r.message.as_ref())
            && let Some(at) = prompt[head..].iter().rposition(|m| m.role() == Role::User)
        {
            prompt.insert(head + at, recalled);
        }
        prompt
    }

    /// Searches what left the window for the turn's last user message (the one the model is
    /// about to answer) and keeps what is relevant for [`prompt`](Turn::prompt), which sends
    /// it, under [`RECALL_HEADING`](crate::recall::RECALL_HEADING), just before that message.
    /// One store round trip; nothing without [recall](crate::ChatMemoryBuilder::recall) or
    /// without a user message. Call it once the turn's messages are in (a user message that
    /// joins later drops what was recalled); recalling changes nothing that is stored.
    ///
    /// Under a token window the recalled messages fit in what the prompt leaves of the
    /// budget (and in the recall's own token budget), so the prompt never passes it.
    ///
    /// # Errors
    /// [`Error::Store`] when the search fails.
    pub async fn recall(&mut self) -> Result<&Recalled> {
        let found = match self.memory.recall_settings() {
            Some(recall) => {
                let recall = *recall;
                match self.search(&recall).await? {
                    Some((found, budget)) => {
                        crate::recall::choose(&found, &recall, budget, self.memory.counter().as_ref())
                    }
                    None => Recalled::default(),
                }
            }
            None => Recalled::default(),
        };
        Ok(self.recalled.insert(found))
    }

    /// What [`recall`](Turn::recall) found, if it ran since the last user message joined.
    pub fn recalled(&self) -> Option<&Recalled> {
        self.recalled.as_ref()
    }

    /// The store's hits for the last user message of the prompt, before the window the turn
    /// plans, and the tokens they may take; `None` when there is nothing to search for.
    async fn search(&self, recall: &Recall) -> Result<Option<(SearchResult, usize)>> {
        let prompt = self.prompt_without_recall();
        let Some(text) = prompt
            .iter()
            .rev()
            .find(|m| m.role() == Role::User && !self.is_facts(m))
            .and_then(|m| m.text())
        else {
            return Ok(None);
        };
        let terms = crate::recall::query_terms(&text);
        let vector = match self.memory.embeddings() {
            Some(embeddings) => embeddings.query(&text).await,
            None => None,
        };
        if terms.is_empty() && vector.is_none() {
            return Ok(None);
        }
        let before = self.plan().draft().window_start();
        let mut query = SearchQuery::new(terms, before, crate::recall::search_limit(recall.k()));
        if let Some(vector) = vector {
            query = query.with_vector(vector);
        }
        let found = self
            .memory
            .store()
            .search(&self.id, &query)
            .await
            .map_err(|source| Error::Store {
                id: self.id.clone(),
                source,
            })?;
        let budget = match self.memory.policy().budget() {
            crate::policy::Budget::Tokens(max) => {
                usize::try_from((max as u64).saturating_sub(self.planned_tokens())).unwrap_or(usize::MAX)
            }
            crate::policy::Budget::Messages(_) => usize::MAX,
        };
        Ok(Some((found, budget)))
    }

    /// The prompt as it is without recalled messages.
    fn prompt_without_recall(&self) -> Vec<&Message> {
        let mut prompt = self.prompt();
        if let Some(recalled) = self.recalled.as_ref().and_then(|r| r.message.as_ref()) {
            prompt.retain(|m| !std::ptr::eq(*m, recalled));
        }
        prompt
    }

    /// The tokens of the planned prompt (before recall), from the counts made when the
    /// messages joined.
    fn planned_tokens(&self) -> u64 {
        let snapshot = self.loaded.snapshot();
        let plan = self.plan();
        let old = snapshot.messages.len();
        let appended: Vec<u32> = self
            .new
            .iter()
            .filter(|(m, _)| !m.is_system())
            .map(|(_, t)| *t)
            .collect();
        let turns: u64 = plan
            .chosen
            .indices()
            .map(|i| match i.checked_sub(old) {
                None => u64::from(snapshot.messages[i].tokens),
                Some(k) => appended.get(k).copied().map_or(0, u64::from),
            })
            .sum();
        let system = match plan.system_at {
            Some(i) => Some(self.new[i].1),
            None => snapshot.system.as_ref().map(|s| s.tokens),
        };
        let summary = shown(snapshot.summary.as_ref()).map_or(0, |s| u64::from(s.tokens));
        let facts = self.facts().map_or(0, |f| f.tokens as u64);
        (crate::tokens::PER_LIST as u64 + u64::from(system.unwrap_or(0)) + summary + facts + turns)
            .saturating_sub(plan.chosen.cleared().tokens_saved)
    }

    /// What [`prompt`](Turn::prompt) clears (nothing without
    /// [clearing](crate::WindowPolicy::with_clearing)).
    pub fn cleared(&self) -> crate::Cleared {
        self.plan().chosen.cleared()
    }

    /// Commits the turn to its conversation as one atomic batch: one round trip unless
    /// another writer committed since the turn's window was loaded, in which case the
    /// conversation is reloaded and the turn planned again from the counts already made (the
    /// batch stays whole and contiguous). With a [`Summarizer`](crate::Summarizer), what the
    /// turn evicts is summarized first and the summary rides in the same commit.
    ///
    /// # Errors
    /// [`Error::BatchTooLarge`] before anything is sent; [`Error::Store`] when the store
    /// fails; [`Error::TooMuchContention`] when concurrent writers won every retry. Whatever
    /// the error, nothing of the turn was written.
    pub async fn commit(mut self) -> Result<Committed> {
        let written = self.write(Write::Final).await?;
        Ok(Committed {
            version: written.map(|(_, version)| version),
        })
    }

    /// [`commit`](Turn::commit), and how many plans the turn made.
    #[cfg(test)]
    async fn commit_counting_plans(mut self) -> Result<(Committed, u32)> {
        let written = self.write(Write::Final).await?;
        let committed = Committed {
            version: written.map(|(_, version)| version),
        };
        Ok((committed, self.plans.load(Ordering::Relaxed)))
    }

    /// Commits as [`commit`](Turn::commit) does and returns the window after the commit, as
    /// memory now holds it (made from the turn, not reloaded): for a caller that answers
    /// with the window (the server's `POST …/messages`). It keeps the loaded messages until
    /// the store has answered, so prefer `commit` when the window is not needed.
    ///
    /// # Errors
    /// As [`commit`](Turn::commit).
    pub async fn commit_window(mut self) -> Result<LoadedWindow> {
        let written = self.write(Write::FinalReturningWindow).await?;
        Ok(self.window_after(written))
    }

    /// Commits what the turn holds so far and goes on, empty, from the committed window: for
    /// storing the user message before the model answers (the advisor's eager mode). Its
    /// [`prompt`](Turn::prompt) is then the window after the commit. No summary is made
    /// until the turn's final commit.
    ///
    /// # Errors
    /// As [`commit`](Turn::commit); on an error the turn keeps its messages.
    pub async fn checkpoint(&mut self) -> Result<()> {
        let written = self.write(Write::Checkpoint).await?;
        self.loaded = self.window_after(written);
        self.new.clear();
        self.plan = OnceLock::new();
        self.rendered = OnceLock::new();
        self.refit_facts();
        Ok(())
    }

    /// The turn's plan, made now if no plan holds.
    fn plan(&self) -> &Plan {
        self.plan.get_or_init(|| self.make_plan())
    }

    /// A new plan of the loaded window plus the turn's messages, counted.
    fn make_plan(&self) -> Plan {
        #[cfg(test)]
        self.plans.fetch_add(1, Ordering::Relaxed);
        let mut settings = self.memory.settings();
        settings.facts_tokens = self.facts().map_or(0, |f| u32::try_from(f.tokens).unwrap_or(u32::MAX));
        plan(self.loaded.snapshot(), &self.new, &settings)
    }

    /// Writes the turn as `how` says: the plan's commit (with a summary when `how`
    /// [summarizes](Write::summarizes) and the memory has a summarizer), retried on lost
    /// version checks. Returns the commit (when `how` [keeps it](Write::keeps_commit), for the
    /// window after it) and the new version; `None` when nothing needed writing.
    async fn write(&mut self, how: Write) -> Result<Option<(Option<Commit>, u64)>> {
        let keep = how.keeps_commit();
        if self.new.is_empty() {
            return Ok(None);
        }
        let memory = self.memory;
        memory.limits_check(self.new.iter().map(|(m, _)| &**m))?;
        let store_err = |id: &ConversationId, source| Error::Store { id: id.clone(), source };
        let summary = match memory.summarizer().filter(|_| how.summarizes()) {
            Some(summarizer) => {
                let (store, counter, id) = (memory.store(), memory.counter(), &self.id);
                let (snapshot, planned) = (self.loaded.snapshot(), self.plan().draft());
                let history = |after, limit| store.history(id, after, limit);
                pending_summary(history, id, summarizer, counter, snapshot, planned).await
            }
            None => None,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let plan = self.plan.take().unwrap_or_else(|| self.make_plan());
            let mut builder = plan.builder;
            if let Some((summary, extends)) = &summary {
                builder = builder.summary(summary.clone(), *extends);
            }
            let commit = builder.build().map_err(|e| store_err(&self.id, e))?;
            let kept = keep.then(|| commit.clone());
            // What the facts model reads once the commit returned (nothing without an
            // extractor, or for a turn without a user).
            let turn_ends = how.summarizes();
            let to_extract = match (memory.extraction_on(), memory.facts_settings(), &self.user) {
                (Some(on), Some(facts), Some(_)) => {
                    let every = facts.extract_every_value();
                    on.extractor
                        .to_show(&self.id, self.loaded.snapshot(), &commit, every, turn_ends)
                }
                _ => Vec::new(),
            };
            if !keep {
                // Planned: the snapshot is no longer needed, and a store that shares its
                // messages with it (the in-memory one) appends in place once it is let go.
                self.loaded.release_messages();
            }
            // What the background embeds once the commit returned (nothing without embeddings).
            let to_embed: Vec<(u64, std::sync::Arc<Message>)> = match memory.embeddings_on() {
                Some(_) if !commit.index().is_empty() => commit
                    .appended()
                    .iter()
                    .map(|m| (m.seq, std::sync::Arc::clone(&m.message)))
                    .collect(),
                _ => Vec::new(),
            };
            match memory.store().commit(&self.id, commit).await {
                Ok(version) => {
                    if let Some(on) = memory.embeddings_on()
                        && !to_embed.is_empty()
                    {
                        on.settings
                            .after_commit(std::sync::Arc::clone(&on.store), &self.id, to_embed);
                    }
                    if let (Some(on), Some(user)) = (memory.extraction_on(), &self.user) {
                        let job = Job {
                            store: std::sync::Arc::clone(&on.store),
                            user: user.user.clone(),
                            conversation: self.id.clone(),
                            messages: to_extract,
                            limits: memory.fact_limits(),
                            counter: std::sync::Arc::clone(memory.counter()),
                        };
                        on.extractor.after_commit(job, turn_ends);
                    }
                    return Ok(Some((kept, version)));
                }
                Err(e) if e.is_conflict() && attempt < memory.max_attempts() => {
                    tracing::debug!(attempt, "commit lost a version check; reloading");
                    backoff(attempt).await;
                    self.loaded = memory.load(&self.id).await?;
                    self.refit_facts();
                }
                Err(e) if e.is_conflict() => {
                    return Err(Error::TooMuchContention {
                        id: self.id.clone(),
                        attempts: attempt,
                    });
                }
                Err(source) => return Err(store_err(&self.id, source)),
            }
        }
    }

    /// The window after a [`write`](Turn::write) that kept its commit, without reloading.
    fn window_after(&self, written: Option<(Option<Commit>, u64)>) -> LoadedWindow {
        let Some((Some(commit), version)) = written else {
            return self.loaded.clone();
        };
        let loaded = self.loaded.snapshot();
        let start = commit.window_start();
        let next_seq = commit.next_seq();
        let summary = commit.summary().or(loaded.summary.as_ref()).cloned();
        let (system, appended) = commit.into_messages();
        let snapshot = Snapshot {
            version,
            system: system.or_else(|| loaded.system.clone()),
            window_start: start,
            next_seq,
            messages: loaded
                .messages
                .iter()
                .cloned()
                .chain(appended)
                .filter(|m| m.seq >= start)
                .collect(),
            summary,
        };
        self.memory.window(snapshot)
    }
}

impl<S: Store> Extend<Message> for Turn<'_, S> {
    /// Adds each message as [`push`](Turn::push) does.
    fn extend<I: IntoIterator<Item = Message>>(&mut self, messages: I) {
        for m in messages {
            self.push(m);
        }
    }
}

/// How many leading messages of `new` memory already holds: up to and including the last
/// one said as memory's last message (see [`Turn::push_unstored`] for the rule).
fn already_stored(stored: &[StoredMessage], new: &[Message]) -> usize {
    let Some(last) = stored.last() else {
        return 0;
    };
    new.iter()
        .rposition(|m| said_alike(m, &last.message))
        .map_or(0, |i| i + 1)
}

/// Whether `a` and `b` say the same to a model: role, name, content, tool calls and
/// `tool_call_id`; not `metadata`, `reasoning_content` or `is_error`, which a model is never
/// sent (and so a client never sends back).
fn said_alike(a: &Message, b: &Message) -> bool {
    use crate::message::{Body, Content, ContentPart};
    /// Content a model is sent: `""` and `[]` are none.
    fn said(c: Option<&Content>) -> Option<&Content> {
        c.filter(|c| match c {
            Content::Text(t) => !t.is_empty(),
            Content::Parts(p) => !p.is_empty(),
        })
    }
    /// Equal, or text both ways (a client may send back as parts what it was given as text).
    fn alike(a: Option<&Content>, b: Option<&Content>) -> bool {
        let only_text = |c: &Content| {
            c.parts()
                .is_none_or(|p| p.iter().all(|p| matches!(p, ContentPart::Text(_))))
        };
        match (said(a), said(b)) {
            (None, None) => true,
            (Some(a), Some(b)) => a == b || (only_text(a) && only_text(b) && a.text() == b.text()),
            _ => false,
        }
    }
    a.name == b.name
        && match (&a.body, &b.body) {
            (
                Body::Assistant {
                    content: c1,
                    tool_calls: t1,
                    ..
                },
                Body::Assistant {
                    content: c2,
                    tool_calls: t2,
                    ..
                },
            ) => alike(c1.as_ref(), c2.as_ref()) && calls_alike(t1, t2),
            (
                Body::Tool {
                    tool_call_id: i1,
                    content: c1,
                    ..
                },
                Body::Tool {
                    tool_call_id: i2,
                    content: c2,
                    ..
                },
            ) => i1 == i2 && alike(Some(c1), Some(c2)),
            // System, developer and user messages carry their content only.
            _ => a.role() == b.role() && alike(a.content(), b.content()),
        }
}

/// Whether two lists of tool calls are the same calls: ids and names equal, arguments equal
/// as text or, where both parse, as JSON values (clients re-serialize the arguments they send
/// back: LangChain writes `{"order_id": "LC1"}` for the model's `{"order_id":"LC1"}`).
fn calls_alike(a: &[crate::message::ToolCall], b: &[crate::message::ToolCall]) -> bool {
    let arguments_alike = |x: &str, y: &str| {
        x == y
            || matches!(
                (serde_json::from_str::<serde_json::Value>(x), serde_json::from_str::<serde_json::Value>(y)),
                (Ok(x), Ok(y)) if x == y
            )
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.id == y.id && x.name == y.name && arguments_alike(&x.arguments, &y.arguments))
}

/// Checks a request's messages as a turn takes them: a system (or developer) message only
/// first, and at least one other message. The one check of a chat request, for every caller
/// that turns a request into a [`Turn`] (the advisor, the server's chat completions).
///
/// ```
/// use chatmem::{Message, check_request};
/// assert!(check_request(&[Message::system("rules"), Message::user("hi")]).is_ok());
/// let e = check_request(&[Message::user("hi"), Message::developer("rules")]).unwrap_err();
/// assert_eq!(e.to_string(), "invalid message at [1]: a developer message may only be the first message");
/// assert!(check_request(&[Message::system("rules")]).is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidMessages`] naming the message.
pub fn check_request(messages: &[Message]) -> Result<()> {
    let leading_system = usize::from(messages.first().is_some_and(Message::is_system));
    if let Some(i) = messages.iter().skip(leading_system).position(Message::is_system) {
        let at = i + leading_system;
        return Err(Error::InvalidMessages {
            path: format!("[{at}]"),
            reason: format!("a {} message may only be the first message", messages[at].role()),
        });
    }
    if messages.len() == leading_system {
        return Err(Error::InvalidMessages {
            path: "input".into(),
            reason: "a turn needs at least one message that is not a system message".into(),
        });
    }
    Ok(())
}

/// Waits before retrying a lost commit: exponential with full jitter, capped at 50 ms, so
/// that writers that collided spread out. A runtime-independent timer: a tokio runtime built
/// without timers (or another executor) must not make a retry panic. A facts commit that lost
/// waits the same way ([`apply_facts`](crate::facts::apply_facts)).
pub(crate) async fn backoff(attempt: u32) {
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    let ms = fastrand::u64(0..=cap_ms);
    futures_timer::Delay::new(Duration::from_millis(ms)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Heuristic;
    use crate::policy::WindowPolicy;
    use crate::summary::Summary;

    fn texts(prompt: &[&Message]) -> Vec<String> {
        prompt
            .iter()
            .map(|m| m.text().unwrap_or_default().into_owned())
            .collect()
    }

    /// A conversation with a system message, a summary and two turns in its window.
    fn loaded(policy: &WindowPolicy) -> LoadedWindow {
        let snapshot = Snapshot {
            version: 3,
            system: Some(StoredMessage::new(1, 5, Message::system("rules"))),
            window_start: 4,
            next_seq: 6,
            messages: vec![
                StoredMessage::new(4, 5, Message::user("u2")),
                StoredMessage::new(5, 5, Message::assistant("a2")),
            ]
            .into(),
            summary: Some(Summary::new("Order LC1.", 3, &Heuristic)),
        };
        LoadedWindow::new(
            snapshot,
            policy,
            &(Arc::new(Heuristic) as Arc<dyn crate::TokenCounter>),
            &Arc::default(),
        )
    }

    fn memory(policy: WindowPolicy) -> ChatMemory {
        ChatMemory::builder(InMemoryStore::new())
            .policy(policy)
            .counter(Heuristic)
            .build()
            .unwrap()
    }

    fn id() -> ConversationId {
        ConversationId::new("c").unwrap()
    }

    #[test]
    fn the_prompt_renders_the_system_message_in_effect_with_the_summary() {
        let policy = WindowPolicy::messages(10);
        let memory = memory(policy.clone());
        let mut turn = Turn::new(&memory, id(), loaded(&policy));
        turn.push(Message::user("u3"));
        let first = texts(&turn.prompt());
        assert_eq!(first[1..], ["u2", "a2", "u3"]);
        assert!(
            first[0].starts_with("rules") && first[0].contains("Order LC1."),
            "{first:?}"
        );
        // The same text again changes nothing; a different one replaces the rendered one.
        turn.push(Message::system("rules"));
        assert_eq!(texts(&turn.prompt()), first);
        turn.push(Message::system("new rules"));
        let replaced = texts(&turn.prompt());
        assert!(
            replaced[0].starts_with("new rules") && replaced[0].contains("Order LC1."),
            "{replaced:?}"
        );
        assert_eq!(replaced[1..], ["u2", "a2", "u3"]);
    }

    #[test]
    fn the_prompt_borrows_the_stored_system_message_without_a_summary() {
        let policy = WindowPolicy::messages(2);
        let mut window = loaded(&policy);
        let mut snapshot = window.snapshot().clone();
        snapshot.summary = None;
        window = LoadedWindow::new(
            snapshot,
            &policy,
            &(Arc::new(Heuristic) as Arc<dyn crate::TokenCounter>),
            &Arc::default(),
        );
        let memory = memory(policy);
        let mut turn = Turn::new(&memory, id(), window);
        turn.push(Message::user("u3"));
        let prompt = turn.prompt();
        let stored = turn.loaded().snapshot().system.as_ref().map(|s| &*s.message);
        assert!(std::ptr::eq(prompt[0], stored.unwrap()));
        // Two slots: the window keeps only the new user message.
        assert_eq!(texts(&prompt), ["rules", "u3"]);
    }

    #[test]
    fn already_stored_drops_only_a_prefix_equal_to_the_end_of_memory() {
        let stored = |ms: &[Message]| -> Vec<StoredMessage> {
            ms.iter()
                .enumerate()
                .map(|(i, m)| StoredMessage::new(i as u64 + 1, 1, m.clone()))
                .collect()
        };
        let mem = stored(&[Message::user("u1"), Message::assistant("a1"), Message::user("u2")]);
        assert_eq!(already_stored(&mem, &[Message::user("u2")]), 1);
        assert_eq!(already_stored(&mem, &[Message::user("u2"), Message::user("u3")]), 1);
        assert_eq!(
            already_stored(
                &mem,
                &[Message::assistant("a1"), Message::user("u2"), Message::user("u3")]
            ),
            2
        );
        assert_eq!(already_stored(&mem, &[Message::user("u1")]), 0);
        assert_eq!(already_stored(&[], &[Message::user("u1")]), 0);
        let answered = stored(&[Message::user("hi"), Message::assistant("hello")]);
        assert_eq!(already_stored(&answered, &[Message::user("hi")]), 0);
    }

    #[test]
    fn a_whole_conversation_sent_again_is_memory_up_to_its_last_message() {
        let stored = |ms: &[Message]| -> Vec<StoredMessage> {
            ms.iter()
                .enumerate()
                .map(|(i, m)| StoredMessage::new(i as u64 + 1, 1, m.clone()))
                .collect()
        };
        // The window holds the last two of five messages said; the client resends all five
        // and one new message.
        let window = stored(&[Message::user("u3"), Message::assistant("a3")]);
        let client = [
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
            Message::user("u3"),
            Message::assistant("a3"),
            Message::user("u4"),
        ];
        assert_eq!(already_stored(&window, &client), 6);
        // An edited older message is not memory's to rewrite: still only u4 is new.
        let mut edited = client.clone();
        edited[1] = Message::assistant("a1, edited");
        assert_eq!(already_stored(&window, &edited), 6);
        // The answer memory stored with reasoning and metadata, sent back without them;
        // an assistant's empty text is no text.
        let mut answer = Message::assistant_tool_calls(vec![crate::ToolCall::new("c1", "f", "{}")]);
        if let crate::Body::Assistant { reasoning_content, .. } = &mut answer.body {
            *reasoning_content = Some("thinking".into());
        }
        let window = stored(&[Message::user("q"), answer.with_metadata(crate::Metadata::new())]);
        let resent = crate::Message {
            body: crate::Body::Assistant {
                content: Some(String::new().into()),
                reasoning_content: None,
                tool_calls: vec![crate::ToolCall::new("c1", "f", "{}")],
            },
            name: None,
            metadata: None,
        };
        let client = [Message::user("q"), resent.clone(), Message::tool_result("c1", "ok")];
        assert_eq!(already_stored(&window, &client), 2);
        // Another call id is another message.
        let other = Message::assistant_tool_calls(vec![crate::ToolCall::new("c2", "f", "{}")]);
        assert_eq!(already_stored(&window, &[other, Message::tool_result("c2", "ok")]), 0);
        // Arguments sent back re-serialized (LangChain's `json.dumps`) are the same call;
        // other arguments are not.
        let call = |args: &str| Message::assistant_tool_calls(vec![crate::ToolCall::new("c1", "f", args)]);
        let window = stored(&[Message::user("q"), call(r#"{"order_id":"LC1","n":1}"#)]);
        let resent = [
            Message::user("q"),
            call(r#"{"n": 1, "order_id": "LC1"}"#),
            Message::tool_result("c1", "ok"),
        ];
        assert_eq!(already_stored(&window, &resent), 2);
        let changed = [
            Message::user("q"),
            call(r#"{"order_id": "LC2", "n": 1}"#),
            Message::tool_result("c1", "ok"),
        ];
        assert_eq!(already_stored(&window, &changed), 0);
    }

    #[test]
    fn a_developer_message_holds_the_system_slot_and_keeps_its_role() {
        let policy = WindowPolicy::messages(10);
        let memory = memory(policy.clone());
        let mut turn = Turn::new(&memory, id(), loaded(&policy));
        // Same text, another role: it replaces the stored system message.
        turn.push(Message::developer("rules"));
        turn.push(Message::user("u3"));
        let prompt = turn.prompt();
        assert_eq!(prompt[0].role(), crate::Role::Developer);
        assert_eq!(prompt.iter().filter(|m| m.is_system()).count(), 1);
        assert_eq!(texts(&prompt)[1..], ["u2", "a2", "u3"]);
        // The same developer message again changes nothing.
        let before = turn.messages().count();
        turn.push(Message::developer("rules"));
        assert_eq!(turn.messages().count(), before);
    }

    /// Answers every summary request with one fixed line.
    #[derive(Debug)]
    struct FixedSummary;

    #[async_trait::async_trait]
    impl crate::ChatModel for FixedSummary {
        async fn complete(&self, _: crate::ChatRequest<'_>) -> Result<crate::ChatResponse, crate::ModelError> {
            Ok(crate::ChatResponse {
                message: Message::assistant(format!("the order is {ORDER}")),
                usage: None,
                finish_reason: None,
            })
        }
    }

    const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
    const TURN1: &str = "我的订单是 LC202610060018，还没发货。";
    const TURN2: &str = "那单能退吗？";
    const ORDER: &str = "LC202610060018";

    fn all_texts(ms: &[Message]) -> Vec<String> {
        ms.iter().map(|m| m.text().unwrap_or_default().into_owned()).collect()
    }

    #[tokio::test]
    async fn a_turn_plans_its_window_once() {
        let m = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(10))
            .build()
            .expect("valid memory settings");
        let c = ConversationId::new("plans").unwrap();
        // A batch written without a prompt (the REST API's write): one plan, for the commit.
        let mut turn = m.begin(&c).await.unwrap();
        turn.extend([Message::system(SYSTEM), Message::user(TURN1), Message::assistant("ok")]);
        assert_eq!(turn.commit_counting_plans().await.unwrap().1, 1);

        // The advisor's turn: the prompt is planned once however often a tool round asks for it;
        // the answer joining makes the commit plan once more.
        let mut turn = m.begin(&c).await.unwrap();
        turn.push(Message::user(TURN2));
        let first: Vec<Message> = turn.prompt().into_iter().cloned().collect();
        for _ in 0..3 {
            assert_eq!(turn.prompt().into_iter().cloned().collect::<Vec<_>>(), first);
        }
        turn.push(Message::assistant("可以退。"));
        let (committed, plans) = turn.commit_counting_plans().await.unwrap();
        assert_eq!((plans, committed.version), (2, Some(2)));

        // A lost version check plans again, once.
        let mut turn = m.begin(&c).await.unwrap();
        turn.push(Message::user("u3"));
        let _ = turn.prompt();
        turn.push(Message::assistant("a3"));
        m.add(&c, [Message::user("other"), Message::assistant("writer")])
            .await
            .unwrap();
        let (committed, plans) = turn.commit_counting_plans().await.unwrap();
        assert_eq!((plans, committed.version), (3, Some(4)));
        assert_eq!(
            all_texts(&m.get(&c).await.unwrap())[5..],
            ["other", "writer", "u3", "a3"]
        );

        // A summarizer reads the commit's plan: no extra plan for what the turn evicts.
        let m = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(3))
            .summarizer(crate::Summarizer::new(FixedSummary))
            .build()
            .unwrap();
        m.add(&c, [Message::user(TURN1), Message::assistant("ok")])
            .await
            .unwrap();
        let mut turn = m.begin(&c).await.unwrap();
        turn.push(Message::user(TURN2));
        let _ = turn.prompt();
        turn.push(Message::assistant("可以退。"));
        assert_eq!(turn.commit_counting_plans().await.unwrap().1, 2);
        let seen = m.get(&c).await.unwrap();
        assert!(
            seen[0].text().unwrap().contains(ORDER),
            "the summary is committed with the turn"
        );
    }
}
