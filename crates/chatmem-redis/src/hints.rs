//! [`WindowHints`]: the window start last seen per conversation, so that a load can read the
//! window with two plain commands in `MULTI`/`EXEC` instead of the load script.
//!
//! Why: a script's reply passes through Lua, and turning a window of messages into Lua
//! strings and back costs Redis about ten times the commands themselves (measured with
//! `INFO commandstats` on a 20-message window of 700-byte members: 35.6 µs per `EVALSHA`
//! against 2.5 µs for the same `ZRANGEBYSCORE` sent bare). The script needs no hint because
//! it reads the window start first; plain commands in one transaction cannot, so they read
//! from a start seen earlier and the store checks it.
//!
//! A hint is only ever a lower bound in effect: a conversation's window start never moves
//! back while it exists, so messages read from an older start are a superset of the window
//! (the extra ones are dropped). A conversation cleared and created again starts over below
//! its hint; the load sees the stored window start below the hint and runs the script.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use chatmem::ConversationId;

/// The most conversations remembered; past it the hints are forgotten at once (each
/// conversation's next load runs the script and records its hint again).
pub(crate) const MAX_HINTS: usize = 65_536;

/// Window starts by conversation, shared by a store's clones.
#[derive(Debug, Default)]
pub(crate) struct WindowHints {
    starts: Mutex<HashMap<ConversationId, u64>>,
}

impl WindowHints {
    fn lock(&self) -> MutexGuard<'_, HashMap<ConversationId, u64>> {
        // A map of hints is valid whatever a panicking thread left in it.
        self.starts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The window start last recorded for `id`.
    pub(crate) fn get(&self, id: &ConversationId) -> Option<u64> {
        self.lock().get(id).copied()
    }

    /// Records that `id`'s window starts at `start`.
    pub(crate) fn set(&self, id: &ConversationId, start: u64) {
        let mut starts = self.lock();
        if let Some(known) = starts.get_mut(id) {
            *known = start;
            return;
        }
        if starts.len() >= MAX_HINTS {
            starts.clear();
        }
        starts.insert(id.clone(), start);
    }

    /// Forgets `id` (it was cleared, or does not exist).
    pub(crate) fn forget(&self, id: &ConversationId) {
        self.lock().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_kept_updated_forgotten_and_bounded() {
        let hints = WindowHints::default();
        let a = ConversationId::new("a").unwrap();
        assert_eq!(hints.get(&a), None);
        hints.set(&a, 5);
        hints.set(&a, 9);
        assert_eq!(hints.get(&a), Some(9));
        hints.forget(&a);
        assert_eq!(hints.get(&a), None);
        for i in 0..MAX_HINTS {
            hints.set(&ConversationId::new(format!("c{i}")).unwrap(), 1);
        }
        assert_eq!(hints.lock().len(), MAX_HINTS);
        hints.set(&a, 3);
        assert_eq!(hints.lock().len(), 1, "a full map starts over");
        assert_eq!(hints.get(&a), Some(3));
    }
}
