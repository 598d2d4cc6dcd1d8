//! [`Turn`]: one turn planned once — the new messages counted once, the prompt the model
//! gets, and the [`Commit`] that stores the turn.
//!
//! Planning is pure: given the loaded snapshot, the turn's messages with their token counts
//! and the policy, [`plan_with`] decides which system message holds, which messages are
//! appended with which sequences, and where the window starts. The prompt asks only for the
//! window ([`plan_window`]); both run the same two steps (`add_batch`, the system message rule,
//! and `window_of`), so the prompt and the commit come from one set of rules.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::commit::{Commit, CommitBuilder};
use crate::error::StoreError;
use crate::loaded_window::LoadedWindow;
use crate::message::Message;
use crate::store::{Retention, Snapshot, StoredMessage};
use crate::summary::{Summary, render_system, shown, system_slot};
use crate::tokens::{CounterName, TokenCounter};
use crate::window::{Chosen, WindowPolicy, select_loaded};

/// A turn being prepared on a [`LoadedWindow`]: the turn's new messages, each counted once
/// when it joins the turn, never again (not for the prompt, not for a retried commit).
///
/// Made by [`ChatMemory::turn`](crate::ChatMemory::turn); committed by
/// [`ChatMemory::commit_turn`](crate::ChatMemory::commit_turn). In between,
/// [`prompt`](Turn::prompt) gives what the model is sent and [`push`](Turn::push) adds what
/// the model produced (tool calls, tool results, the answer).
///
/// ```
/// use chatmem::{ChatMemory, ConversationId, Message, WindowPolicy};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let memory = ChatMemory::builder(chatmem::InMemoryStore::new()).policy(WindowPolicy::messages(6)).build()?;
/// let id = ConversationId::new("app-user-42-aftersale")?;
/// let loaded = memory.load(&id).await?;
/// let mut turn = memory.turn(loaded, [Message::system("你是邻里仓售后。"), Message::user("我的订单是 LC202610060018。")]);
/// let prompt = turn.prompt(); // system, window, new messages
/// assert_eq!(prompt.len(), 2);
/// turn.push(Message::assistant("收到。")); // the model's answer
/// memory.commit_turn(&id, turn).await?;
/// assert_eq!(memory.get(&id).await?.len(), 3);
/// # Ok::<(), chatmem::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Turn {
    loaded: LoadedWindow,
    new: Vec<(Arc<Message>, u32)>,
    counter: Arc<dyn TokenCounter>,
    policy: WindowPolicy,
    /// The system message with the summary after it, made when a prompt first needs it
    /// (the prompt borrows it); cleared when a system message joins the turn.
    rendered: OnceLock<Option<Message>>,
}

impl Turn {
    pub(crate) fn new(loaded: LoadedWindow, counter: Arc<dyn TokenCounter>, policy: WindowPolicy) -> Self {
        Self {
            loaded,
            new: Vec::new(),
            counter,
            policy,
            rendered: OnceLock::new(),
        }
    }

    /// Adds a message to the turn, counting its tokens when the window is a token budget (the
    /// only time they are counted; a message-count window stores it [uncounted](crate::UNCOUNTED)).
    pub fn push(&mut self, message: Message) {
        let tokens = if self.policy.counts_tokens() {
            u32::try_from(self.counter.count_message(&message)).unwrap_or(u32::MAX)
        } else {
            0
        };
        if message.is_system() {
            self.rendered = OnceLock::new();
        }
        self.new.push((Arc::new(message), tokens));
    }

    /// The window the turn started from.
    pub fn loaded(&self) -> &LoadedWindow {
        &self.loaded
    }

    /// The turn's messages so far, in order.
    pub fn messages(&self) -> impl Iterator<Item = &Message> + '_ {
        self.new.iter().map(|(m, _)| &**m)
    }

    /// Whether the turn has no messages.
    pub fn is_empty(&self) -> bool {
        self.new.is_empty()
    }

    /// What the model is sent: the system message (the turn's, if it replaces the stored
    /// one, with the summary after it), then the part of the loaded window that memory will
    /// still hold once the turn's messages are added (so the model never sees more than the
    /// policy allows), then the turn's messages other than a system message.
    ///
    /// The prompt borrows the messages from the loaded window and the turn: building it
    /// copies no message and takes no reference count per window message, and
    /// [`ChatRequest::new`](crate::ChatRequest::new) takes it as it is.
    pub fn prompt(&self) -> Vec<&Message> {
        let snapshot = self.loaded.snapshot();
        let old = snapshot.messages.len();
        let (replaced_by, selection) = plan_window(snapshot, &self.new, &self.policy);
        let system = match replaced_by {
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
        let new = self.new.iter().filter(|(m, _)| !m.is_system()).map(|(m, _)| &**m);
        // Sized once: the prompt can be the whole window, and growing it step by step copies it.
        let mut prompt = Vec::with_capacity(1 + selection.count());
        prompt.extend(system);
        match &selection {
            // A run: the loaded messages from its start on, a slice (extended in one go).
            Chosen::Run { start, .. } => {
                prompt.extend(snapshot.messages[(*start).min(old)..].iter().map(|m| &*m.message));
            }
            // The positions ascend, so the loaded messages' are a prefix.
            Chosen::Picked(s) => {
                let loaded = &s.indices[..s.indices.partition_point(|&i| i < old)];
                prompt.extend(loaded.iter().map(|&i| &*snapshot.messages[i].message));
            }
        }
        prompt.extend(new);
        prompt
    }

    pub(crate) fn into_parts(self) -> (LoadedWindow, Vec<(Arc<Message>, u32)>) {
        (self.loaded, self.new)
    }
}

/// The outcome of planning a batch on a snapshot.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The system message after the batch.
    pub(crate) system: Option<StoredMessage>,
    /// The commit; `None` when nothing would change (only repeated system messages).
    pub(crate) commit: Option<Commit>,
}

/// How a planned commit is written beyond its messages.
#[derive(Debug, Default)]
pub(crate) struct CommitOptions<'a> {
    pub(crate) retention: Retention,
    pub(crate) ttl: Option<Duration>,
    /// The name of the counter of the batch's token counts (shared: a plan runs every turn).
    pub(crate) counter: Option<&'a CounterName>,
    /// Keep evicted messages until a summary covers them (a memory that summarizes).
    pub(crate) keep_unsummarized: bool,
    /// A new summary to commit with the batch, and the `upto` of the summary it extends.
    pub(crate) summary: Option<(&'a Summary, u64)>,
}

/// Plans adding `batch` (messages with their token counts) to `snapshot`: a system message
/// with the current text is ignored and a different one replaces it; every other message is
/// appended; the window start moves to where the policy's window begins.
///
/// # Errors
/// Only when the snapshot itself is inconsistent (a message below its window start), which
/// a store's corrupt data can cause: [`StoreErrorKind::InvalidInput`](crate::StoreErrorKind).
pub(crate) fn plan_with(
    snapshot: &Snapshot,
    batch: &[(Arc<Message>, u32)],
    policy: &WindowPolicy,
    options: &CommitOptions<'_>,
) -> Result<Plan, StoreError> {
    let mut builder = Commit::on(snapshot).retention(options.retention).ttl(options.ttl);
    if let Some(counter) = options.counter {
        builder = builder.counted_by(counter.clone());
    }
    if options.keep_unsummarized {
        builder = builder.keep_unsummarized();
    }
    let changed = add_batch(&mut builder, snapshot, batch).changed;
    let (system, _, window_start) = window_of(snapshot, builder.draft(), policy);
    let system = system.cloned();
    let commit = if changed {
        if let Some((summary, extends)) = options.summary {
            builder = builder.summary(summary.clone(), extends);
        }
        Some(builder.window_start(window_start).build()?)
    } else {
        None
    };
    Ok(Plan { system, commit })
}

/// The window [`plan_with`] would give, without the commit: what the prompt needs before the
/// model answers. Also which message of `batch` replaces the stored system message, if one
/// does (the prompt borrows it from the batch).
pub(crate) fn plan_window(
    snapshot: &Snapshot,
    batch: &[(Arc<Message>, u32)],
    policy: &WindowPolicy,
) -> (Option<usize>, Chosen) {
    let mut builder = Commit::on(snapshot);
    let added = add_batch(&mut builder, snapshot, batch);
    let (_, selection, _) = window_of(snapshot, builder.draft(), policy);
    (added.system, selection)
}

/// What [`add_batch`] did.
struct Added {
    /// Whether anything changed.
    changed: bool,
    /// The batch index of the system message that replaces the stored one, if any.
    system: Option<usize>,
}

/// Adds `batch` to `builder` by the system message rule: a system message with the current
/// text is ignored, a different one replaces it; every other message is appended.
fn add_batch(builder: &mut CommitBuilder, snapshot: &Snapshot, batch: &[(Arc<Message>, u32)]) -> Added {
    let mut added = Added {
        changed: false,
        system: None,
    };
    for (i, (message, tokens)) in batch.iter().enumerate() {
        if message.is_system() {
            let current = builder.draft().system().or(snapshot.system.as_ref());
            if current.is_some_and(|s| s.message.text() == message.text()) {
                continue;
            }
            builder.set_system(Arc::clone(message), *tokens);
            added.system = Some(i);
        } else {
            builder.push(Arc::clone(message), *tokens);
        }
        added.changed = true;
    }
    added
}

/// The system message after `draft`, the window over the loaded messages followed by the
/// appended ones, and the sequence the window starts at.
fn window_of<'a>(
    snapshot: &'a Snapshot,
    draft: &'a Commit,
    policy: &WindowPolicy,
) -> (Option<&'a StoredMessage>, Chosen, u64) {
    let system = draft.system().or(snapshot.system.as_ref());
    let slot = system_slot(system, snapshot.summary.as_ref());
    let appended = draft.appended();
    let selection = select_loaded(&snapshot.messages, appended, slot, policy);
    let loaded = &snapshot.messages[..];
    let window_start = match selection.start().checked_sub(loaded.len()) {
        None => loaded[selection.start()].seq,
        Some(i) => appended.get(i).map_or(draft.next_seq(), |m| m.seq),
    };
    (system, selection, window_start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Heuristic;

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
        LoadedWindow::new(snapshot, policy, &Heuristic)
    }

    #[test]
    fn the_prompt_renders_the_system_message_in_effect_with_the_summary() {
        let policy = WindowPolicy::messages(10);
        let mut turn = Turn::new(loaded(&policy), Arc::new(Heuristic), policy);
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
        window = LoadedWindow::new(snapshot, &policy, &Heuristic);
        let mut turn = Turn::new(window, Arc::new(Heuristic), policy);
        turn.push(Message::user("u3"));
        let prompt = turn.prompt();
        let stored = turn.loaded().snapshot().system.as_ref().map(|s| &*s.message);
        assert!(std::ptr::eq(prompt[0], stored.unwrap()));
        // Two slots: the window keeps only the new user message.
        assert_eq!(texts(&prompt), ["rules", "u3"]);
    }
}
