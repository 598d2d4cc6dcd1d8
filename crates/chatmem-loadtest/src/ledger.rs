//! [`Ledger`]: what the generator knows it committed, per conversation.

use std::sync::{Mutex, PoisonError};

/// Per conversation: the next turn number, the turns the server acknowledged (200), and the
/// turns whose outcome is unknown (an error or a timeout: they may or may not have landed).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    conversations: Vec<Mutex<Entry>>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Entry {
    pub(crate) next_turn: u32,
    pub(crate) acked: Vec<u32>,
    pub(crate) uncertain: Vec<u32>,
}

impl Ledger {
    pub(crate) fn new(conversations: usize) -> Self {
        Self {
            conversations: (0..conversations).map(|_| Mutex::default()).collect(),
        }
    }

    fn entry(&self, conversation: usize) -> std::sync::MutexGuard<'_, Entry> {
        // A panic elsewhere cannot leave an entry half-written: every update is one push.
        self.conversations[conversation]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh turn number for `conversation`.
    pub(crate) fn next_turn(&self, conversation: usize) -> u32 {
        let mut e = self.entry(conversation);
        let turn = e.next_turn;
        e.next_turn += 1;
        turn
    }

    /// Records the outcome of committing `turn`: acknowledged or unknown.
    pub(crate) fn record(&self, conversation: usize, turn: u32, acked: bool) {
        let mut e = self.entry(conversation);
        if acked {
            e.acked.push(turn);
        } else {
            e.uncertain.push(turn);
        }
    }

    /// A copy of what is known about `conversation`.
    pub(crate) fn get(&self, conversation: usize) -> Entry {
        self.entry(conversation).clone()
    }
}
