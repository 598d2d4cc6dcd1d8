//! [`WindowCache`]: what a store last saw of each conversation's window, so that a load
//! reads only what changed since, with two plain commands in `MULTI`/`EXEC` instead of the
//! load script.
//!
//! Why plain commands: a script's reply passes through Lua, and turning a window of
//! messages into Lua strings and back costs Redis about ten times the commands themselves
//! (measured with `INFO commandstats` on a 20-message window of 700-byte members: 35.6 µs
//! per `EVALSHA` against 2.5 µs for the same `ZRANGEBYSCORE` sent bare). The script needs
//! nothing cached because it reads the window start first; plain commands in one
//! transaction cannot, so they read from a start seen earlier and the store checks it.
//!
//! Why the messages too: under load, a turn's cost is mostly moving and decoding the same
//! window again (a 20-message window of the bench's text is 16 KB per load, for two new
//! messages). A message, once stored at a seq, never changes while its conversation
//! exists, so a window seen before only needs the messages from its `next_seq` on.
//!
//! What keeps it right when other stores (other processes) write the same conversation:
//! - the window start never moves back while a conversation exists, so a cached start is a
//!   lower bound, and cached messages below the stored start are dropped;
//! - every conversation gets a random creation marker (`created` in its meta hash, the
//!   creating commit's token), so one cleared (or expired) and created again is told apart
//!   from the one cached, even when its seqs reach past the cached ones: the load sees
//!   another marker and runs the script;
//! - a conversation created before chatmem stored the marker has none: only its window
//!   start is cached, and its messages are read from there, as before.
//!
//! Bounded twice: by [`MAX_ENTRIES`] conversations and by a byte budget
//! ([`RedisStoreBuilder::window_cache_bytes`](crate::RedisStoreBuilder::window_cache_bytes),
//! counted as the stored members' sizes); past either, the least recently used
//! conversations are forgotten (their next load runs the script again).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chatmem::{Commit, ConversationId, Snapshot, StoredMessage};
use hashlink::LruCache;

/// The most conversations cached.
pub(crate) const MAX_ENTRIES: usize = 65_536;

/// A cached message and the size of its stored member, which the budget counts.
#[derive(Debug, Clone)]
pub(crate) struct CachedMessage {
    pub(crate) message: StoredMessage,
    pub(crate) size: usize,
}

/// One conversation as last seen (loaded or committed) by this store.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entry {
    /// The conversation's creation marker; `None` for one created before chatmem stored
    /// it, whose messages are then not cached.
    pub(crate) created: Option<u64>,
    pub(crate) version: u64,
    pub(crate) window_start: u64,
    pub(crate) next_seq: u64,
    /// Every message with `window_start <= seq < next_seq`, oldest first (empty unless
    /// `created` is known).
    pub(crate) messages: Vec<CachedMessage>,
}

impl Entry {
    /// What a load saw: `messages` are `snapshot`'s with their sizes (kept only when the
    /// creation marker is known).
    pub(crate) fn seen(created: Option<u64>, snapshot: &Snapshot, messages: Vec<CachedMessage>) -> Self {
        Self {
            created,
            version: snapshot.version,
            window_start: snapshot.window_start,
            next_seq: snapshot.next_seq,
            messages: if created.is_some() { messages } else { Vec::new() },
        }
    }

    /// What a load by the script saw: `snapshot` with its messages' stored `sizes` (copied
    /// only when the creation marker is known: without it nothing is kept).
    pub(crate) fn loaded(created: Option<u64>, snapshot: &Snapshot, sizes: &[usize]) -> Self {
        let messages = match created {
            Some(_) => snapshot
                .messages
                .iter()
                .zip(sizes)
                .map(|(m, &size)| CachedMessage {
                    message: m.clone(),
                    size,
                })
                .collect(),
            None => Vec::new(),
        };
        Self::seen(created, snapshot, messages)
    }

    /// What a commit made of the conversation seen as `self` (that is, when `self` is the
    /// version the commit was checked against): its window start, its next seq, the seen
    /// messages still in the window and the appended ones, sized `sizes`.
    pub(crate) fn committed(&self, commit: &Commit, version: u64, sizes: &[usize]) -> Self {
        let start = commit.window_start();
        let messages = if self.created.is_some() {
            let kept = self.in_window_from(start);
            let appended = commit.appended().iter().zip(sizes).filter(|(m, _)| m.seq >= start);
            let mut all = Vec::with_capacity(kept.len() + commit.appended().len());
            all.extend_from_slice(kept);
            all.extend(appended.map(|(m, &size)| CachedMessage {
                message: m.clone(),
                size,
            }));
            all
        } else {
            Vec::new()
        };
        Self {
            created: self.created,
            version,
            window_start: start,
            next_seq: commit.next_seq(),
            messages,
        }
    }

    /// Where a load reads messages from: after the cached ones, or, with none cached, from
    /// the cached window start.
    pub(crate) fn read_from(&self) -> u64 {
        if self.created.is_some() {
            self.next_seq
        } else {
            self.window_start
        }
    }

    fn bytes(&self) -> usize {
        self.messages.iter().map(|m| m.size).sum()
    }

    /// The messages still inside a window that now starts at `start`.
    pub(crate) fn in_window_from(&self, start: u64) -> &[CachedMessage] {
        let evicted = self.messages.partition_point(|m| m.message.seq < start);
        &self.messages[evicted..]
    }
}

/// Conversations as last seen, shared by a store's clones.
#[derive(Debug)]
pub(crate) struct WindowCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    entries: LruCache<ConversationId, Arc<Entry>>,
    bytes: usize,
}

impl WindowCache {
    /// A cache whose messages take at most `max_bytes` (0: window starts only).
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            inner: Mutex::new(Inner {
                entries: LruCache::new_unbounded(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A cache is valid whatever a panicking thread left in it: every entry is whole.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What was last seen of `id`.
    pub(crate) fn get(&self, id: &ConversationId) -> Option<Arc<Entry>> {
        self.lock().entries.get(id).cloned()
    }

    /// Records what was seen of `id` (keeping a newer entry of the same conversation that a
    /// concurrent load or commit recorded first). An entry whose messages alone exceed the
    /// budget keeps its window start only.
    pub(crate) fn put(&self, id: &ConversationId, mut entry: Entry) {
        let mut bytes = entry.bytes();
        if bytes > self.max_bytes {
            entry.messages = Vec::new();
            entry.created = None;
            bytes = 0;
        }
        let mut inner = self.lock();
        if let Some(old) = inner.entries.get(id)
            && old.created == entry.created
            && old.version > entry.version
        {
            return;
        }
        if let Some(old) = inner.entries.remove(id) {
            inner.bytes -= old.bytes();
        }
        inner.bytes += bytes;
        inner.entries.insert(id.clone(), Arc::new(entry));
        while inner.bytes > self.max_bytes || inner.entries.len() > MAX_ENTRIES {
            let Some((_, old)) = inner.entries.remove_lru() else {
                break;
            };
            inner.bytes -= old.bytes();
        }
    }

    /// Forgets `id` (it was cleared, or does not exist).
    pub(crate) fn forget(&self, id: &ConversationId) {
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(id) {
            inner.bytes -= old.bytes();
        }
    }
}

#[cfg(test)]
mod tests {
    use chatmem::Message;

    use super::*;

    fn entry(created: u64, version: u64, seqs: std::ops::Range<u64>, size: usize) -> Entry {
        Entry {
            created: Some(created),
            version,
            window_start: seqs.start,
            next_seq: seqs.end,
            messages: seqs
                .map(|seq| CachedMessage {
                    message: StoredMessage::new(seq, 1, Message::user("m")),
                    size,
                })
                .collect(),
        }
    }

    fn id(s: &str) -> ConversationId {
        ConversationId::new(s).unwrap()
    }

    #[test]
    fn entries_are_kept_replaced_by_newer_ones_and_forgotten() {
        let cache = WindowCache::new(1_000);
        let a = id("a");
        assert!(cache.get(&a).is_none());
        cache.put(&a, entry(7, 2, 1..5, 10));
        assert_eq!(cache.get(&a).unwrap().version, 2);
        assert_eq!(cache.lock().bytes, 40);
        // An older sight of the same conversation does not replace a newer one...
        cache.put(&a, entry(7, 1, 1..3, 10));
        assert_eq!(cache.get(&a).unwrap().version, 2);
        // ...but any sight of a conversation created again does.
        cache.put(&a, entry(8, 1, 1..3, 10));
        assert_eq!(cache.get(&a).unwrap().created, Some(8));
        assert_eq!(cache.lock().bytes, 20);
        cache.forget(&a);
        assert!(cache.get(&a).is_none());
        assert_eq!(cache.lock().bytes, 0);
    }

    #[test]
    fn the_budget_forgets_the_least_recently_used() {
        let cache = WindowCache::new(100);
        for name in ["a", "b", "c"] {
            cache.put(&id(name), entry(1, 1, 1..4, 10));
        }
        cache.get(&id("a"));
        // 120 bytes: "b", the least recently used, goes.
        cache.put(&id("d"), entry(1, 1, 1..4, 10));
        assert!(cache.get(&id("b")).is_none());
        assert!(cache.get(&id("a")).is_some() && cache.get(&id("c")).is_some());
        assert_eq!(cache.lock().bytes, 90);
        // Larger than the whole budget: its window start is kept, not its messages.
        cache.put(&id("e"), entry(1, 1, 1..20, 10));
        let e = cache.get(&id("e")).unwrap();
        assert!(e.messages.is_empty() && e.created.is_none());
        assert_eq!((e.window_start, e.read_from()), (1, 1));
    }

    #[test]
    fn entries_are_bounded_in_number() {
        let cache = WindowCache::new(0);
        for i in 0..=MAX_ENTRIES {
            cache.put(&id(&format!("c{i}")), Entry::default());
        }
        assert_eq!(cache.lock().entries.len(), MAX_ENTRIES);
        assert!(cache.get(&id("c0")).is_none(), "the oldest went first");
    }

    #[test]
    fn a_window_that_moved_on_drops_what_left_it() {
        let e = entry(1, 1, 3..9, 1);
        assert_eq!(e.read_from(), 9);
        let seqs: Vec<u64> = e.in_window_from(6).iter().map(|m| m.message.seq).collect();
        assert_eq!(seqs, [6, 7, 8]);
        assert!(e.in_window_from(20).is_empty());
    }
}
