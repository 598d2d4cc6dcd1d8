//! Planning a turn: which system message holds, which messages are appended with which
//! sequences, and where the window starts — a pure function of the loaded snapshot, the
//! turn's messages with their token counts, and the policy.
//!
//! A [`Turn`](crate::Turn) asks for one [`Plan`] and keeps it: its prompt is the plan's
//! window, and its commit is the plan's [`CommitBuilder`], finished. The prompt and the commit
//! therefore come from one set of rules, run once.

use std::sync::Arc;
use std::time::Duration;

use super::loaded::{Chosen, select_loaded};
use crate::commit::Retention;
use crate::commit::{Commit, CommitBuilder};
use crate::counter::{CounterName, Memo, TokenCounter};
use crate::message::Message;
use crate::policy::{Budget, WindowPolicy};
use crate::snapshot::Snapshot;
use crate::window::system_slot;

/// How a planned commit is written beyond its messages: the memory's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings<'a> {
    pub(crate) policy: &'a WindowPolicy,
    pub(crate) retention: Retention,
    pub(crate) ttl: Option<Duration>,
    /// The name of the counter of the batch's token counts (shared: a plan runs every turn).
    pub(crate) counter: &'a CounterName,
    /// The counter of the placeholders of cleared tool results.
    pub(crate) tokens: Memo<'a>,
    /// Keep evicted messages until a summary covers them (a memory that summarizes).
    pub(crate) keep_unsummarized: bool,
    /// Index the appended messages for recall.
    pub(crate) index: bool,
    /// The tokens of the user's facts message the prompt sends after the system message (0:
    /// none). Under a token window the system slot takes them too, so the window leaves room
    /// for them; under a message count the facts message is not one of the window's messages
    /// (as the summary, inside the system message, and recall's message are not).
    pub(crate) facts_tokens: u32,
}

/// A batch planned on a snapshot.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The commit, its window start set; unbuilt, so that a summary can still join it.
    pub(crate) builder: CommitBuilder,
    /// The batch index of the system message that replaces the stored one, if one does.
    pub(crate) system_at: Option<usize>,
    /// The window: positions in the loaded messages followed by the appended ones.
    pub(crate) chosen: Chosen,
}

impl Plan {
    /// The commit as planned (unchecked until built).
    pub(crate) fn draft(&self) -> &Commit {
        self.builder.draft()
    }
}

/// Plans adding `batch` (messages with their token counts) to `snapshot`: a system message
/// replaces the one in effect (the turn has left out any that repeats it); every other
/// message is appended; the window start moves to where the policy's window begins.
pub(crate) fn plan(snapshot: &Snapshot, batch: &[(Arc<Message>, u32)], settings: &Settings<'_>) -> Plan {
    let mut builder = Commit::on(snapshot)
        .retention(settings.retention)
        .ttl(settings.ttl)
        .counted_by(settings.counter.clone())
        .index(settings.index);
    if settings.keep_unsummarized {
        builder = builder.keep_unsummarized();
    }
    let mut system_at = None;
    for (i, (message, tokens)) in batch.iter().enumerate() {
        if message.is_system() {
            builder.set_system(Arc::clone(message), *tokens);
            system_at = Some(i);
        } else {
            builder.push(Arc::clone(message), *tokens);
        }
    }
    let (chosen, window_start) = window_of(snapshot, builder.draft(), settings);
    Plan {
        builder: builder.window_start(window_start),
        system_at,
        chosen,
    }
}

/// The window over the loaded messages followed by the appended ones, and the sequence it
/// starts at.
fn window_of(snapshot: &Snapshot, draft: &Commit, settings: &Settings<'_>) -> (Chosen, u64) {
    let (policy, counter): (&WindowPolicy, &dyn TokenCounter) = (settings.policy, &settings.tokens);
    let system = draft.system().or(snapshot.system.as_ref());
    let mut slot = system_slot(system, snapshot.summary.as_ref());
    if settings.facts_tokens > 0 && matches!(policy.budget(), Budget::Tokens(_)) {
        slot = Some(slot.unwrap_or(0).saturating_add(settings.facts_tokens));
    }
    let appended = draft.appended();
    let chosen = select_loaded(
        &snapshot.messages,
        appended,
        slot,
        policy,
        counter,
        holds_no_turn(snapshot),
    );
    let loaded = &snapshot.messages[..];
    let window_start = match chosen.start().checked_sub(loaded.len()) {
        None => loaded[chosen.start()].seq,
        Some(i) => appended.get(i).map_or(draft.next_seq(), |m| m.seq),
    };
    (chosen, window_start)
}

/// Whether no message but a system message was ever stored in the conversation: it is new, or
/// it holds only its system message (which takes a sequence without moving `next_seq`). Its
/// next message is then its first.
fn holds_no_turn(snapshot: &Snapshot) -> bool {
    !snapshot.exists() || snapshot.next_seq == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::UNCOUNTED;
    use crate::stored_message::StoredMessage;

    fn batch(messages: impl IntoIterator<Item = Message>) -> Vec<(Arc<Message>, u32)> {
        messages.into_iter().map(|m| (Arc::new(m), 1)).collect()
    }

    static COUNTS: std::sync::LazyLock<crate::counter::TextCounts> = std::sync::LazyLock::new(Default::default);

    fn settings<'a>(policy: &'a WindowPolicy, counter: &'a CounterName) -> Settings<'a> {
        let counts = &*COUNTS;
        Settings {
            policy,
            retention: Retention::DropEvicted,
            ttl: None,
            counter,
            tokens: Memo {
                inner: &crate::Heuristic,
                counts,
            },
            keep_unsummarized: false,
            index: false,
            facts_tokens: 0,
        }
    }

    #[test]
    fn the_last_system_message_of_a_batch_replaces_the_stored_one() {
        let policy = WindowPolicy::messages(10);
        let counter = CounterName::from(UNCOUNTED);
        let mut snapshot = Snapshot::empty();
        snapshot.system = Some(StoredMessage::new(1, 1, Message::system("rules")));
        snapshot.next_seq = 2;
        assert!(
            plan(&snapshot, &[], &settings(&policy, &counter))
                .draft()
                .appended()
                .is_empty()
        );
        let new = plan(
            &snapshot,
            &batch([Message::system("other"), Message::user("u"), Message::system("new")]),
            &settings(&policy, &counter),
        );
        assert_eq!(new.system_at, Some(2));
        assert_eq!(
            new.draft().system().and_then(|s| s.message.text()).as_deref(),
            Some("new")
        );
        assert_eq!(new.draft().appended().len(), 1);
    }

    #[test]
    fn the_facts_message_takes_room_in_a_token_window_not_in_a_message_count() {
        let counter = CounterName::from(UNCOUNTED);
        let four = batch([
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
            Message::assistant("a2"),
        ]);
        let start = |policy: &WindowPolicy, facts_tokens: u32| {
            let settings = Settings {
                facts_tokens,
                ..settings(policy, &counter)
            };
            plan(&Snapshot::empty(), &four, &settings).draft().window_start()
        };
        // Each message is 1 token: 3 for the list and 4 messages fit in 7; with facts of 2
        // tokens the window starts a turn later.
        let tokens = WindowPolicy::tokens(7);
        assert_eq!((start(&tokens, 0), start(&tokens, 2)), (1, 3));
        // A message count leaves the facts message out of its count.
        let messages = WindowPolicy::messages(4);
        assert_eq!((start(&messages, 0), start(&messages, 2)), (1, 1));
    }

    #[test]
    fn the_window_start_is_where_the_policy_window_begins() {
        let policy = WindowPolicy::messages(2);
        let counter = CounterName::from(UNCOUNTED);
        let planned = plan(
            &Snapshot::empty(),
            &batch([
                Message::user("u1"),
                Message::assistant("a1"),
                Message::user("u2"),
                Message::assistant("a2"),
            ]),
            &settings(&policy, &counter),
        );
        // Sequences 1..=4; two slots: [u2, a2] from seq 3.
        assert_eq!(planned.draft().window_start(), 3);
        assert_eq!(planned.chosen.count(), 2);
        assert!(planned.builder.build().is_ok());
    }
}
