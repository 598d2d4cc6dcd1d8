//! [`LoadedWindow`]: a conversation as loaded from its store, with the window chosen from it.

use std::sync::{Arc, OnceLock};

use crate::counter::{Memo, TextCounts, TokenCounter};
use crate::message::Message;
use crate::policy::Budget;
use crate::policy::WindowPolicy;
use crate::shared_messages::SharedMessages;
use crate::snapshot::Snapshot;
use crate::stored_message::StoredMessage;
use crate::summary::{Summary, render_system};
use crate::window::system_slot;
use crate::window::{Cleared, Selection, is_plain, select_known, select_plain};

/// A loaded conversation: the [`Snapshot`] read in one round trip and the window the policy
/// chose from it (by the cached token counts alone).
///
/// Returned by [`ChatMemory::load`](crate::ChatMemory::load) to read a window; a
/// [`Turn`](crate::Turn) holds the one it was begun on.
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, Message, WindowPolicy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = ChatMemory::builder(chatmem::InMemoryStore::new()).policy(WindowPolicy::messages(3)).build()?;
/// let id = ConversationId::new("c1")?;
/// memory.add(&id, [Message::system("s"), Message::user("u1"), Message::assistant("a1"), Message::user("u2")]).await?;
/// let loaded = memory.load(&id).await?;
/// assert_eq!(loaded.len(), 2); // the system message and u2: [a1, u2] would start on an answer
/// assert_eq!(loaded.system().and_then(|s| s.text()).as_deref(), Some("s"));
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LoadedWindow {
    snapshot: Snapshot,
    policy: WindowPolicy,
    /// The counter of the placeholders of cleared tool results, and the counts it keeps.
    counter: Arc<dyn TokenCounter>,
    counts: Arc<TextCounts>,
    /// Chosen when first asked for: a turn plans its own window, so the advisor's path
    /// (load, turn, prompt, commit) never needs this one.
    selection: OnceLock<Chosen>,
}

/// Equal when the snapshots and policies are: the selection is a function of the two.
impl PartialEq for LoadedWindow {
    fn eq(&self, other: &Self) -> bool {
        self.snapshot == other.snapshot && self.policy == other.policy
    }
}

impl LoadedWindow {
    /// The window of `snapshot` under `policy`, by counts of `counter`. Under a token budget a
    /// message whose cached count does not [hold](StoredMessage::count_holds_for) for
    /// `counter` (counted by a counter of another name, or [not
    /// counted](crate::store::UNCOUNTED)) is recounted first, so the budget holds for the
    /// counter in use; a message whose counter is not recorded is taken as it is. A
    /// message-count window needs no counts.
    pub(crate) fn new(
        mut snapshot: Snapshot,
        policy: &WindowPolicy,
        counter: &Arc<dyn TokenCounter>,
        counts: &Arc<TextCounts>,
    ) -> Self {
        let name = counter.name();
        let stale = |m: &StoredMessage| !m.count_holds_for(name);
        let mut recounted = 0usize;
        // A message-count window needs no counts: nothing to look at.
        if policy.counts_tokens() {
            let mut recount = |m: &mut StoredMessage| {
                if stale(m) {
                    m.tokens = m.tokens_by(counter.as_ref());
                    m.counted_by = Some(name.into());
                    recounted += 1;
                }
            };
            snapshot.system.iter_mut().for_each(&mut recount);
            // Read first: the messages are shared with the store, and copied only to change.
            if !snapshot.messages.counted_only_by(name) && snapshot.messages.iter().any(stale) {
                snapshot.messages.update(recount);
            }
        }
        if let Some(summary) = &mut snapshot.summary {
            summary.recount_for(counter.as_ref());
        }
        if recounted > 0 {
            tracing::debug!(
                recounted,
                counter = name,
                "recounted messages counted by another tokenizer"
            );
        }
        Self {
            snapshot,
            policy: policy.clone(),
            counter: Arc::clone(counter),
            counts: Arc::clone(counts),
            selection: OnceLock::new(),
        }
    }

    fn selection(&self) -> &Chosen {
        self.selection
            .get_or_init(|| choose(&self.snapshot, &self.policy, &self.placeholders()))
    }

    /// The counter of placeholders: the memory's, keeping what it counts.
    fn placeholders(&self) -> Memo<'_> {
        Memo {
            inner: self.counter.as_ref(),
            counts: &self.counts,
        }
    }

    /// The stored system message, if any (without the summary: see
    /// [`messages`](LoadedWindow::messages) for what the model sees).
    pub fn system(&self) -> Option<&Message> {
        self.snapshot.system.as_ref().map(|s| &*s.message)
    }

    /// The conversation's summary of what left the window, if any.
    pub fn summary(&self) -> Option<&Summary> {
        self.snapshot.summary.as_ref()
    }

    /// The system message the model sees: the stored one with the summary after it.
    pub fn rendered_system(&self) -> Option<Message> {
        render_system(self.system(), self.summary())
    }

    /// The non-system messages in the window as the model is sent them, oldest first: a
    /// [cleared](crate::ClearToolResults) tool result as its placeholder.
    pub fn turns(&self) -> impl Iterator<Item = &Message> + '_ {
        self.entries().map(|(stored, sent)| sent.unwrap_or(&stored.message))
    }

    /// The stored messages in the window, oldest first, each with what the model is sent
    /// instead when that differs (a [cleared](crate::ClearToolResults) tool result, a call whose
    /// arguments were cleared).
    pub fn entries(&self) -> impl Iterator<Item = (&StoredMessage, Option<&Message>)> + '_ {
        let chosen = self.selection();
        chosen
            .indices()
            .map(move |i| (&self.snapshot.messages[i], chosen.replacement(i)))
    }

    /// What the window clears from the prompt (nothing without
    /// [clearing](crate::WindowPolicy::with_clearing)).
    pub fn cleared(&self) -> Cleared {
        self.selection().cleared()
    }

    /// The stored messages in the window, oldest first.
    pub(crate) fn selected(&self) -> impl Iterator<Item = &StoredMessage> + '_ {
        self.selection().indices().map(|i| &self.snapshot.messages[i])
    }

    /// What the model sees: the system message (with the summary) first, then the window.
    pub fn messages(&self) -> Vec<Message> {
        self.rendered_system()
            .into_iter()
            .chain(self.turns().cloned())
            .collect()
    }

    /// What the model sees, taking the messages out of the window (no copy).
    pub fn into_messages(mut self) -> Vec<Message> {
        let selection = self
            .selection
            .take()
            .unwrap_or_else(|| choose(&self.snapshot, &self.policy, &self.placeholders()));
        let Snapshot {
            system,
            messages,
            summary,
            ..
        } = self.snapshot;
        let system = render_system(system.as_ref().map(|s| &*s.message), summary.as_ref());
        let mut slots: Vec<Option<StoredMessage>> = messages.into_iter().map(Some).collect();
        let (indices, mut replaced) = match selection {
            Chosen::Picked(s) => (s.indices, s.replaced),
            run => (run.indices().collect(), Vec::new()),
        };
        // Ascending, as the indices are: taken from the front.
        replaced.reverse();
        let turns = indices.into_iter().filter_map(|i| {
            let stored = slots.get_mut(i).and_then(Option::take)?;
            match replaced.last() {
                Some((r, _)) if *r == i => replaced.pop().map(|(_, m)| m),
                _ => Some(stored.into_message()),
            }
        });
        system.into_iter().chain(turns).collect()
    }

    /// The number of messages in [`messages`](LoadedWindow::messages).
    pub fn len(&self) -> usize {
        let slot = system_slot(self.snapshot.system.as_ref(), self.snapshot.summary.as_ref());
        usize::from(slot.is_some()) + self.selection().count()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The token count of the window as sent by the cached counts, list overhead included (a
    /// cleared tool result costs its placeholder). Messages a message-count window stored
    /// [uncounted](crate::store::UNCOUNTED) add 0: count [`messages`](LoadedWindow::messages)
    /// with a [`TokenCounter`] for an exact figure.
    pub fn tokens(&self) -> u64 {
        let slot = system_slot(self.snapshot.system.as_ref(), self.snapshot.summary.as_ref());
        let system = u64::from(slot.unwrap_or(0));
        let turns: u64 = self.selected().map(|m| u64::from(m.tokens)).sum();
        (crate::tokens::PER_LIST as u64 + system + turns).saturating_sub(self.cleared().tokens_saved)
    }

    /// Lets go of the loaded messages, for a commit whose caller needs nothing back: a store
    /// that shares its messages with the snapshot then appends to them in place.
    pub(crate) fn release_messages(&mut self) {
        self.snapshot.messages = SharedMessages::new();
        self.selection = OnceLock::new();
    }

    /// The stored messages in the window (with their sequence numbers and cached token
    /// counts), oldest first: what [`turns`](LoadedWindow::turns) gives, as stored.
    pub fn stored_turns(&self) -> impl Iterator<Item = &StoredMessage> + '_ {
        self.selected()
    }

    /// Where the window stands under block eviction ([`WindowPolicy::evict_to`]): how much
    /// more it takes before its start next moves, and where it would start were it to move
    /// now (the window fitted within the low-water mark, on the policy's turn boundary; the
    /// messages that arrive before then move it further). `None` without block eviction.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use chatmem::{BlockEviction, ChatMemory, ConversationId, Message, WindowPolicy};
    /// let policy = WindowPolicy::messages(6).evict_to(3)?;
    /// let memory = ChatMemory::builder(chatmem::InMemoryStore::new()).policy(policy).build()?;
    /// let id = ConversationId::new("c1")?;
    /// memory.add(&id, [Message::user("u1"), Message::assistant("a1"), Message::user("u2"), Message::assistant("a2")]).await?;
    /// let loaded = memory.load(&id).await?;
    /// // 4 of 6 messages: 2 more before the start moves; moved now, it would start at u2 (seq 3).
    /// assert_eq!(loaded.block_eviction(), Some(BlockEviction { headroom: 2, next_start: Some(3) }));
    /// # Ok::<(), chatmem::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn block_eviction(&self) -> Option<BlockEviction> {
        let to_low = self.policy.at_low_water()?;
        let (budget, used) = match self.policy.budget() {
            Budget::Messages(n) => (n as u64, self.len() as u64),
            Budget::Tokens(n) => (n as u64, self.tokens()),
        };
        let slot = system_slot(self.snapshot.system.as_ref(), self.snapshot.summary.as_ref());
        let moved = select_loaded(&self.snapshot.messages, &[], slot, &to_low, &self.placeholders(), false);
        let next_start = moved.indices().next().map(|i| self.snapshot.messages[i].seq);
        Some(BlockEviction {
            headroom: budget.saturating_sub(used),
            next_start,
        })
    }

    /// The store snapshot behind the window.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

/// Where a window under block eviction stands: see [`LoadedWindow::block_eviction`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEviction {
    /// How much more (in the budget's unit: messages or tokens) the window takes before its
    /// start moves; until then every prompt begins as the last one did.
    pub headroom: u64,
    /// The sequence number the window would start at were it to move now; `None` when no
    /// message would stay.
    pub next_start: Option<u64>,
}

/// The window `policy` chooses from `snapshot`, by its cached counts.
fn choose(snapshot: &Snapshot, policy: &WindowPolicy, counter: &dyn TokenCounter) -> Chosen {
    let slot = system_slot(snapshot.system.as_ref(), snapshot.summary.as_ref());
    select_loaded(&snapshot.messages, &[], slot, policy, counter, false)
}

/// [`select`] over a loaded window followed by `appended` (a planned turn's new messages;
/// none for the window as loaded), read in place. When the loaded messages are plain, as their
/// log knows without reading them, the budget is fitted with the token sums the log keeps, so
/// the cost does not grow with the window; otherwise the general path. The run's first
/// message `opens` the conversation when it is the stored window start (the first loaded
/// message) or the conversation is new; after an empty window the stored start is past every
/// stored message, and the first appended one opens nothing.
pub(crate) fn select_loaded(
    loaded: &SharedMessages,
    appended: &[StoredMessage],
    system_tokens: Option<u32>,
    policy: &WindowPolicy,
    counter: &dyn TokenCounter,
    new_conversation: bool,
) -> Chosen {
    let opens = new_conversation || !loaded.is_empty();
    let n = loaded.len();
    if loaded.is_plain() && appended.iter().all(|m| is_plain(&m.message)) {
        let at = |i: usize| if i < n { &loaded[i] } else { &appended[i - n] };
        // The new messages are few: summed when asked.
        let new_from = |i: usize| appended.iter().skip(i).map(|m| u64::from(m.tokens)).sum::<u64>();
        let tail = |p: usize| match p.checked_sub(n) {
            None => loaded.tokens_from(p) + new_from(0),
            Some(i) => new_from(i),
        };
        let len = n + appended.len();
        let start = select_plain(len, at, tail, system_tokens, policy, opens);
        return Chosen::Run { start, len };
    }
    // Two slice extends, not a chained collect: that pushes one reference at a time.
    let mut all: Vec<&StoredMessage> = Vec::with_capacity(n + appended.len());
    all.extend(&loaded[..]);
    all.extend(appended);
    Chosen::Picked(select_known(&all, system_tokens, policy, counter, false, opens))
}

/// What [`select_loaded`] chose: the positions of the messages the model sees, in the run of
/// the loaded messages followed by the appended ones.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chosen {
    /// Every message from `start` to the run's end, `len` (none when `start == len`): a
    /// plain run, which repair leaves whole, so no list of positions is made (it would cost
    /// the length of the window every turn).
    Run { start: usize, len: usize },
    /// Chosen one by one (repair left some out).
    Picked(Selection),
}

impl Chosen {
    /// The position of the first message inside the window; the run's length when the
    /// window is empty.
    pub(crate) fn start(&self) -> usize {
        match self {
            Chosen::Run { start, .. } => *start,
            Chosen::Picked(s) => s.start,
        }
    }

    /// How many messages the model sees.
    pub(crate) fn count(&self) -> usize {
        match self {
            Chosen::Run { start, len } => len - start,
            Chosen::Picked(s) => s.indices.len(),
        }
    }

    /// What the model is sent instead of the message at position `i`, if that differs.
    pub(crate) fn replacement(&self, i: usize) -> Option<&Message> {
        match self {
            Chosen::Run { .. } => None,
            Chosen::Picked(s) => s.replacement(i),
        }
    }

    /// What the window clears.
    pub(crate) fn cleared(&self) -> Cleared {
        match self {
            Chosen::Run { .. } => Cleared::default(),
            Chosen::Picked(s) => s.cleared,
        }
    }

    /// The positions of the messages the model sees, in order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        let (run, picked) = match self {
            Chosen::Run { start, len } => (*start..*len, &[][..]),
            Chosen::Picked(s) => (0..0, &s.indices[..]),
        };
        run.chain(picked.iter().copied())
    }
}
