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
//! Why shared: a cached window is a [`SharedMessages`] run that the snapshots loaded from it
//! share, so a load copies no message; a commit takes its entry out of the cache
//! ([`WindowCache::take_at`]) and, the loaded snapshot having been let go of (as
//! `ChatMemory` does before it commits), appends to the run in place: the cache copies no
//! message of the window in a turn (it copied the window twice a turn before).
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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chatmem::ConversationId;
use chatmem::store::{Commit, SharedMessages, Snapshot};
use hashlink::LruCache;

/// The most conversations cached.
pub(crate) const MAX_ENTRIES: usize = 65_536;

/// One conversation as last seen (loaded or committed) by this store.
///
/// Its messages are the run the snapshots it hands out share ([`SharedMessages`]): a load
/// copies none, and a commit appends to the run in place when the entry was the last holder
/// (see [`WindowCache::take_at`]).
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
    pub(crate) messages: SharedMessages,
    /// The stored size of each of `messages`, in order, which the budget counts...
    pub(crate) sizes: VecDeque<usize>,
    /// ...and their sum.
    pub(crate) bytes: usize,
}

impl Entry {
    /// What a load saw: `snapshot` and its messages' stored `sizes` (the messages kept,
    /// shared with the snapshot, only when the creation marker is known).
    pub(crate) fn seen(created: Option<u64>, snapshot: &Snapshot, sizes: impl IntoIterator<Item = usize>) -> Self {
        let mut entry = Self {
            created,
            version: snapshot.version,
            window_start: snapshot.window_start,
            next_seq: snapshot.next_seq,
            ..Self::default()
        };
        if created.is_some() {
            entry.messages = snapshot.messages.clone();
            entry.sizes = sizes.into_iter().collect();
            entry.bytes = entry.sizes.iter().sum();
        }
        entry
    }

    /// What a commit made of the conversation seen as `self` (that is, when `self` is the
    /// version the commit was checked against): its window start, its next seq, the seen
    /// messages still in the window and the appended ones, sized `sizes`.
    pub(crate) fn committed(mut self, commit: &Commit, version: u64, sizes: &[usize]) -> Self {
        let start = commit.window_start();
        if self.created.is_some() {
            self.drop_below(start);
            let appended = commit.appended().iter().zip(sizes).filter(|(m, _)| m.seq >= start);
            self.append(appended.map(|(m, &size)| (m.clone(), size)));
        }
        self.version = version;
        self.window_start = start;
        self.next_seq = commit.next_seq();
        self
    }

    /// Drops the cached messages with `seq < start` (they left the window).
    pub(crate) fn drop_below(&mut self, start: u64) {
        let before = self.messages.len();
        self.messages.drop_below(start);
        for _ in self.messages.len()..before {
            self.bytes -= self.sizes.pop_front().unwrap_or(0);
        }
    }

    /// Appends messages read after the cached ones, with their stored sizes.
    pub(crate) fn append(&mut self, read: impl IntoIterator<Item = (chatmem::store::StoredMessage, usize)>) {
        let (sizes, bytes) = (&mut self.sizes, &mut self.bytes);
        self.messages.extend(read.into_iter().map(|(message, size)| {
            sizes.push_back(size);
            *bytes += size;
            message
        }));
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

    /// The messages still inside a window that now starts at `start`, shared.
    pub(crate) fn in_window_from(&self, start: u64) -> SharedMessages {
        let mut run = self.messages.clone();
        run.drop_below(start);
        run
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
    pub(crate) bytes: usize,
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

    /// Takes out the entry of `id` when it is at `version`, to be changed and put back
    /// (otherwise leaves it): owned, and its messages with it when nothing else holds them
    /// (a snapshot loaded from it is let go of before its commit), so that a commit appends
    /// to them in place instead of copying the window. A load of `id` meanwhile finds no
    /// entry and runs the load script.
    pub(crate) fn take_at(&self, id: &ConversationId, version: u64) -> Option<Entry> {
        let mut inner = self.lock();
        if inner.entries.peek(id)?.version != version {
            return None;
        }
        let entry = inner.entries.remove(id)?;
        inner.bytes -= entry.bytes;
        drop(inner);
        Some(Arc::unwrap_or_clone(entry))
    }

    /// Records what was seen of `id` (keeping a newer entry of the same conversation that a
    /// concurrent load or commit recorded first). An entry whose messages alone exceed the
    /// budget keeps its window start only.
    pub(crate) fn put(&self, id: &ConversationId, mut entry: Entry) {
        let mut bytes = entry.bytes;
        if bytes > self.max_bytes {
            entry.messages = SharedMessages::new();
            entry.sizes = VecDeque::new();
            entry.bytes = 0;
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
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        inner.entries.insert(id.clone(), Arc::new(entry));
        while inner.bytes > self.max_bytes || inner.entries.len() > MAX_ENTRIES {
            let Some((_, old)) = inner.entries.remove_lru() else {
                break;
            };
            inner.bytes -= old.bytes;
        }
    }

    /// Forgets `id` (it was cleared, or does not exist).
    pub(crate) fn forget(&self, id: &ConversationId) {
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(id) {
            inner.bytes -= old.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use chatmem::Message;
    use chatmem::store::StoredMessage;

    use super::*;

    fn entry(created: u64, version: u64, seqs: std::ops::Range<u64>, size: usize) -> Entry {
        let snapshot = Snapshot {
            version,
            window_start: seqs.start,
            next_seq: seqs.end,
            messages: seqs
                .clone()
                .map(|seq| StoredMessage::new(seq, 1, Message::user("m")))
                .collect(),
            ..Snapshot::empty()
        };
        Entry::seen(Some(created), &snapshot, seqs.map(|_| size))
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
    fn a_commit_takes_its_entry_out_and_puts_back_the_window_it_made() {
        let cache = WindowCache::new(1_000);
        let a = id("a");
        cache.put(&a, entry(7, 3, 1..11, 10));
        // Checked against another version: the entry stays as it was.
        assert!(cache.take_at(&a, 2).is_none());
        assert_eq!(cache.get(&a).unwrap().version, 3);
        let seen = cache.take_at(&a, 3).unwrap();
        assert!(cache.get(&a).is_none() && cache.lock().bytes == 0, "taken out");
        // The window moves from 1 to 5 and gets two messages (stored sizes 30 and 40).
        let mut snapshot = Snapshot::empty();
        (snapshot.version, snapshot.window_start, snapshot.next_seq) = (3, 1, 11);
        let commit = Commit::on(&snapshot)
            .append(Message::user("u"), 1)
            .append(Message::assistant("a"), 1)
            .window_start(5)
            .build()
            .unwrap();
        cache.put(&a, seen.committed(&commit, 4, &[30, 40]));
        let e = cache.get(&a).unwrap();
        assert_eq!((e.version, e.window_start, e.next_seq, e.read_from()), (4, 5, 13, 13));
        assert_eq!(
            e.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
            (5..13).collect::<Vec<_>>()
        );
        assert_eq!(
            e.sizes.iter().copied().collect::<Vec<_>>(),
            [10, 10, 10, 10, 10, 10, 30, 40]
        );
        assert_eq!((e.bytes, cache.lock().bytes), (130, 130));
    }

    #[test]
    fn a_window_that_moved_on_drops_what_left_it() {
        let e = entry(1, 1, 3..9, 1);
        assert_eq!(e.read_from(), 9);
        let seqs: Vec<u64> = e.in_window_from(6).iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [6, 7, 8]);
        assert!(e.in_window_from(20).is_empty());
    }
}
