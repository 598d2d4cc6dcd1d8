//! [`SharedMessages`]: a snapshot's messages, shared with the store that loaded them.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::counter::CounterName;
use crate::stored_message::StoredMessage;
use crate::window::is_plain;

/// The messages of a [`Snapshot`](crate::store::Snapshot), oldest first: an immutable run that
/// reads as a slice (`&[StoredMessage]`) and clones in constant time.
///
/// A store that keeps its messages in memory hands out its own log this way, so a load
/// copies no message and dropping a snapshot releases no message: the cost of a turn does
/// not grow with its window. Changing the run ([`extend`](Extend::extend)) writes in place
/// when nothing else holds it and copies it once otherwise (copy on write), so a snapshot
/// never sees a later commit.
///
/// ```
/// use chatmem::Message;
/// use chatmem::store::{SharedMessages, StoredMessage};
/// let mut log: SharedMessages = vec![StoredMessage::new(1, 2, Message::user("hi"))].into();
/// let snapshot = log.clone(); // no copy
/// log.extend([StoredMessage::new(2, 3, Message::assistant("hello"))]);
/// assert_eq!((log.len(), snapshot.len()), (2, 1)); // the snapshot kept what it saw
/// assert_eq!(log[1].seq, 2);
/// assert_eq!(snapshot.iter().map(|m| m.seq).collect::<Vec<_>>(), [1]);
/// ```
#[derive(Clone, Default)]
pub struct SharedMessages {
    /// `None` for an empty run (no allocation).
    log: Option<Arc<Log>>,
    /// The run is `log.items[start..]`: a store moves its window's start without moving
    /// the messages after it.
    start: usize,
}

#[derive(Clone, Default)]
struct Log {
    items: Vec<StoredMessage>,
    /// The index of the last item that is not [plain](is_plain): a run starting after it
    /// needs no tool-call repair, known without reading every message.
    last_special: Option<usize>,
    /// The counter every item's count was made by, when they share one: a memory loading
    /// the run then knows that nothing needs recounting without reading every message.
    counted_by: Counted,
    /// `before[i]`: the token count of the items before item `i`; with `total`, a run's
    /// tokens from any position on, so a token budget is fitted without summing the window.
    before: Vec<u64>,
    total: u64,
}

#[derive(Clone, Default)]
enum Counted {
    /// No items.
    #[default]
    Nothing,
    /// Every item by this counter (`None`: not recorded).
    Same(Option<CounterName>),
    /// Not all by one.
    Mixed,
}

impl Counted {
    fn add(&mut self, by: &Option<CounterName>) {
        match self {
            Counted::Nothing => *self = Counted::Same(by.clone()),
            Counted::Same(same) if same != by => *self = Counted::Mixed,
            Counted::Same(_) | Counted::Mixed => {}
        }
    }
}

impl Log {
    fn push(&mut self, m: StoredMessage) {
        if !is_plain(&m.message) {
            self.last_special = Some(self.items.len());
        }
        self.counted_by.add(&m.counted_by);
        self.before.push(self.total);
        self.total += u64::from(m.tokens);
        self.items.push(m);
    }

    fn from_iter(items: impl IntoIterator<Item = StoredMessage>) -> Self {
        let items = items.into_iter();
        let n = items.size_hint().0;
        let mut log = Log {
            items: Vec::with_capacity(n),
            before: Vec::with_capacity(n),
            ..Log::default()
        };
        items.for_each(|m| log.push(m));
        log
    }

    /// Recomputes what is known of the items from `start` on.
    fn rescan(&mut self, start: usize) {
        self.last_special = self
            .items
            .iter()
            .rposition(|m| !is_plain(&m.message))
            .filter(|&i| i >= start);
        self.counted_by = Counted::Nothing;
        for m in &self.items[start..] {
            self.counted_by.add(&m.counted_by);
        }
        self.before.clear();
        self.total = 0;
        for m in &self.items {
            self.before.push(self.total);
            self.total += u64::from(m.tokens);
        }
    }
}

/// A run shorter than this never moves its messages to drop the ones before its start.
const COMPACT_MIN: usize = 64;

impl SharedMessages {
    /// An empty run.
    ///
    /// ```
    /// assert!(chatmem::store::SharedMessages::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages, owned: moved out when nothing else holds them, copied otherwise (a
    /// copy shares each [`Message`](crate::Message) and copies no text).
    ///
    /// ```
    /// use chatmem::Message;
    /// use chatmem::store::{SharedMessages, StoredMessage};
    /// let run: SharedMessages = vec![StoredMessage::new(1, 2, Message::user("hi"))].into();
    /// assert_eq!(run.into_vec()[0].seq, 1);
    /// ```
    pub fn into_vec(self) -> Vec<StoredMessage> {
        let Some(log) = self.log else {
            return Vec::new();
        };
        match Arc::try_unwrap(log) {
            Ok(mut log) => {
                log.items.drain(..self.start);
                log.items
            }
            Err(shared) => shared.items[self.start..].to_vec(),
        }
    }

    /// Drops the messages with `seq < below` from the front (the messages are in `seq`
    /// order), as a store does when its window's start moves: the rest stay where they are,
    /// shared with whoever else holds the run, and are moved to the front in place only once
    /// the dropped part outgrows them and nothing else holds the run (amortized constant
    /// time per dropped message).
    ///
    /// ```
    /// use chatmem::Message;
    /// use chatmem::store::{SharedMessages, StoredMessage};
    /// let mut run: SharedMessages = (1..=4).map(|seq| StoredMessage::new(seq, 1, Message::user("m"))).collect();
    /// let snapshot = run.clone();
    /// run.drop_below(3);
    /// assert_eq!(run.iter().map(|m| m.seq).collect::<Vec<_>>(), [3, 4]);
    /// assert_eq!(snapshot.len(), 4); // a snapshot keeps what it saw
    /// ```
    pub fn drop_below(&mut self, below: u64) {
        // Nothing is at or past `u64::MAX` to keep: no message is copied out.
        self.split_below(below, u64::MAX);
    }

    /// Whether every message is a user or assistant message without tool calls, so that
    /// no tool-call pair can be broken: answered without reading the messages.
    pub(crate) fn is_plain(&self) -> bool {
        self.log
            .as_ref()
            .is_none_or(|log| log.last_special.is_none_or(|i| i < self.start))
    }

    /// Whether no message's count was made by a counter other than the one named `name`
    /// (a message whose counter is not recorded counts as `name`'s): `false` when it cannot
    /// be told without reading the messages.
    pub(crate) fn counted_only_by(&self, name: &str) -> bool {
        let Some(log) = &self.log else { return true };
        match &log.counted_by {
            Counted::Nothing | Counted::Same(None) => true,
            Counted::Same(Some(by)) => std::ptr::eq(by.as_str(), name) || by.as_str() == name,
            Counted::Mixed => false,
        }
    }

    /// The token count of the messages from position `i` on (0 past the end), by their
    /// cached counts: constant time.
    pub(crate) fn tokens_from(&self, i: usize) -> u64 {
        match &self.log {
            Some(log) if i < self.len() => log.total - log.before[self.start + i],
            _ => 0,
        }
    }

    /// Changes the messages through `f`, copying them first when the run is shared.
    pub(crate) fn update(&mut self, f: impl FnMut(&mut StoredMessage)) {
        let Some(log) = self.log.as_mut() else { return };
        let log = Arc::make_mut(log);
        log.items[self.start..].iter_mut().for_each(f);
        // `f` may have changed a message's kind or counter.
        log.rescan(self.start);
    }

    /// The run from the first message with `seq >= from` on (the messages are in `seq`
    /// order), sharing this one.
    #[cfg(test)]
    fn view_from(&self, from: u64) -> Self {
        let skip = self.partition_point(|m| m.seq < from);
        let mut view = self.clone();
        view.start += skip;
        view
    }

    /// Drops the messages with `seq < below` from the front; returns the dropped ones with
    /// `seq >= keep_from` (shared, not copied). Moves the rest to the front of the log, in
    /// place, once the dropped part outgrows it and nothing else holds it: amortized constant
    /// time per dropped message.
    pub(crate) fn split_below(&mut self, below: u64, keep_from: u64) -> Vec<StoredMessage> {
        let n = self.partition_point(|m| m.seq < below);
        let kept = self[..n].iter().filter(|m| m.seq >= keep_from).cloned().collect();
        self.start += n;
        if self.is_empty() {
            *self = Self::new();
        } else if self.start >= COMPACT_MIN
            && self.start >= self.len()
            && let Some(log) = self.log.as_mut().and_then(Arc::get_mut)
        {
            log.items.drain(..self.start);
            log.rescan(0);
            self.start = 0;
        }
        kept
    }
}

impl Deref for SharedMessages {
    type Target = [StoredMessage];

    fn deref(&self) -> &[StoredMessage] {
        match &self.log {
            Some(log) => &log.items[self.start..],
            None => &[],
        }
    }
}

impl AsRef<[StoredMessage]> for SharedMessages {
    fn as_ref(&self) -> &[StoredMessage] {
        self
    }
}

/// Appends in place when nothing else holds the run; otherwise copies it once (the
/// messages before its start left out) and appends to the copy.
impl Extend<StoredMessage> for SharedMessages {
    fn extend<I: IntoIterator<Item = StoredMessage>>(&mut self, iter: I) {
        let mut iter = iter.into_iter().peekable();
        if iter.peek().is_none() {
            return;
        }
        match self.log.as_mut().and_then(Arc::get_mut) {
            Some(log) => iter.for_each(|m| log.push(m)),
            None => {
                let copy = Log::from_iter(self[..].iter().cloned().chain(iter));
                *self = Self {
                    log: Some(Arc::new(copy)),
                    start: 0,
                };
            }
        }
    }
}

impl From<Vec<StoredMessage>> for SharedMessages {
    fn from(items: Vec<StoredMessage>) -> Self {
        if items.is_empty() {
            return Self::new();
        }
        let mut log = Log {
            items,
            ..Log::default()
        };
        log.rescan(0);
        Self {
            log: Some(Arc::new(log)),
            start: 0,
        }
    }
}

impl FromIterator<StoredMessage> for SharedMessages {
    fn from_iter<I: IntoIterator<Item = StoredMessage>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl<'a> IntoIterator for &'a SharedMessages {
    type Item = &'a StoredMessage;
    type IntoIter = std::slice::Iter<'a, StoredMessage>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for SharedMessages {
    type Item = StoredMessage;
    type IntoIter = std::vec::IntoIter<StoredMessage>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

/// Equal when the messages are.
impl PartialEq for SharedMessages {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl PartialEq<Vec<StoredMessage>> for SharedMessages {
    fn eq(&self, other: &Vec<StoredMessage>) -> bool {
        self[..] == other[..]
    }
}

impl PartialEq<[StoredMessage]> for SharedMessages {
    fn eq(&self, other: &[StoredMessage]) -> bool {
        self[..] == *other
    }
}

impl<const N: usize> PartialEq<[StoredMessage; N]> for SharedMessages {
    fn eq(&self, other: &[StoredMessage; N]) -> bool {
        self[..] == other[..]
    }
}

impl PartialEq<SharedMessages> for Vec<StoredMessage> {
    fn eq(&self, other: &SharedMessages) -> bool {
        self[..] == other[..]
    }
}

/// As a list of the messages.
impl fmt::Debug for SharedMessages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, ToolCall};

    fn user(seq: u64) -> StoredMessage {
        StoredMessage::new(seq, 1, Message::user(format!("u{seq}")))
    }

    fn seqs(run: &SharedMessages) -> Vec<u64> {
        run.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn extending_a_shared_run_leaves_the_other_holders_as_they_were() {
        let mut log: SharedMessages = (1..=3).map(user).collect();
        let view = log.view_from(2);
        log.extend([user(4)]);
        assert_eq!(seqs(&log), [1, 2, 3, 4]);
        assert_eq!(seqs(&view), [2, 3]);
        // Alone again: appended in place, in the same log.
        let log_of = |run: &SharedMessages| run.log.as_ref().map(Arc::as_ptr);
        let before = log_of(&log);
        drop(view);
        log.extend([user(5)]);
        assert_eq!(seqs(&log), [1, 2, 3, 4, 5]);
        assert_eq!(log_of(&log), before);
        // Shared: copied into a new log.
        let _held = log.clone();
        log.extend([user(6)]);
        assert_ne!(log_of(&log), before);
    }

    #[test]
    fn a_view_shares_the_messages_instead_of_copying_them() {
        let log: SharedMessages = (1..=3).map(user).collect();
        let view = log.view_from(2);
        assert!(std::ptr::eq(&log[1], &view[0]));
        assert_eq!(seqs(&log.view_from(0)), [1, 2, 3]);
        assert!(log.view_from(9).is_empty());
    }

    #[test]
    fn split_below_returns_the_kept_part_and_compacts_once_the_dead_part_outgrows_the_run() {
        let mut log: SharedMessages = (1..=200).map(user).collect();
        let kept = log.split_below(11, 6);
        assert_eq!(kept.iter().map(|m| m.seq).collect::<Vec<_>>(), [6, 7, 8, 9, 10]);
        assert_eq!(log.first().map(|m| m.seq), Some(11));
        // 150 dropped, 50 left: the log moves the 50 to its front, in place.
        assert!(log.split_below(151, u64::MAX).is_empty());
        assert_eq!(log.start, 0);
        assert_eq!(seqs(&log), (151..=200).collect::<Vec<_>>());
        // Held elsewhere: nothing moves under the other holder.
        let held = log.clone();
        log.split_below(190, u64::MAX);
        assert_eq!(seqs(&held).len(), 50);
        assert_eq!(seqs(&log), (190..=200).collect::<Vec<_>>());
        // Everything dropped: the empty run holds no log.
        log.split_below(u64::MAX, u64::MAX);
        assert!(log.is_empty() && log.log.is_none());
    }

    #[test]
    fn a_window_kept_as_a_run_moves_and_grows_in_place_when_alone() {
        // As a store's cache keeps a window: drop what left it, append the new messages.
        let mut window: SharedMessages = (1..=20).map(user).collect();
        let log = |w: &SharedMessages| w.log.as_ref().map(Arc::as_ptr);
        let at = log(&window);
        for turn in 0..100u64 {
            let next = 21 + 2 * turn;
            window.drop_below(next - 18);
            window.extend([user(next), user(next + 1)]);
            assert_eq!(seqs(&window), (next - 18..next + 2).collect::<Vec<_>>());
        }
        assert_eq!(log(&window), at, "no copy while nothing else held the run");
        assert!(window.start < COMPACT_MIN + 20, "the dropped part is compacted away");
        // A holder makes the next change copy the window once, and keeps what it saw.
        let held = window.clone();
        window.drop_below(u64::MAX - 1);
        window.extend([user(u64::MAX - 1)]);
        assert_eq!(seqs(&window), [u64::MAX - 1]);
        assert_eq!(held.len(), 20);
        assert_eq!(log(&held), at);
    }

    #[test]
    fn plainness_follows_the_run_through_views_pushes_compaction_and_updates() {
        let call = StoredMessage::new(
            2,
            1,
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]),
        );
        let result = StoredMessage::new(3, 1, Message::tool_result("c1", "ok"));
        let mut log: SharedMessages = vec![user(1), call, result].into();
        assert!(!log.is_plain());
        assert!(log.view_from(4).is_plain());
        log.extend([user(4)]);
        assert!(!log.is_plain());
        assert!(log.view_from(4).is_plain());
        let shared = log.clone();
        log.extend([StoredMessage::new(5, 1, Message::tool_result("c9", "orphan"))]);
        assert!(!log.view_from(4).is_plain());
        assert!(shared.view_from(4).is_plain());
        log.split_below(5, u64::MAX);
        assert!(!log.is_plain());
        log.update(|m| m.message = Message::user("now plain").into());
        assert!(log.is_plain());
        assert!(SharedMessages::new().is_plain());
    }

    #[test]
    fn the_tokens_from_a_position_on_are_the_sum_of_the_counts() {
        let counted = |seq: u64| StoredMessage::new(seq, seq as u32, Message::user("x"));
        let mut log: SharedMessages = (1..=100).map(counted).collect();
        let check = |run: &SharedMessages| {
            for i in 0..=run.len() + 1 {
                let sum: u64 = run.iter().skip(i).map(|m| u64::from(m.tokens)).sum();
                assert_eq!(run.tokens_from(i), sum, "from {i}");
            }
        };
        check(&log);
        log.extend((101..=110).map(counted));
        check(&log);
        let held = log.clone();
        log.split_below(80, u64::MAX); // a view
        check(&log);
        drop(held);
        log.split_below(105, u64::MAX); // compacted
        check(&log);
        log.update(|m| m.tokens = 7);
        check(&log);
        check(&SharedMessages::new());
    }

    #[test]
    fn the_counter_of_the_counts_is_known_while_every_message_shares_it() {
        let mut log = SharedMessages::new();
        assert!(log.counted_only_by("cl100k_base"));
        log.extend([user(1)]); // not recorded: taken as any counter's
        assert!(log.counted_only_by("cl100k_base"));
        let mut log: SharedMessages = (1..=3).map(|s| user(s).counted_by("cl100k_base")).collect();
        assert!(log.counted_only_by("cl100k_base"));
        assert!(!log.counted_only_by("o200k_base"));
        log.extend([user(4).counted_by("words")]);
        assert!(!log.counted_only_by("cl100k_base") && !log.counted_only_by("words"));
        log.update(|m| m.counted_by = Some("words".into()));
        assert!(log.counted_only_by("words"));
    }

    #[test]
    fn into_vec_moves_out_when_alone_and_copies_when_shared() {
        let log: SharedMessages = (1..=4).map(user).collect();
        let view = log.view_from(3);
        assert_eq!(
            view.clone().into_vec().iter().map(|m| m.seq).collect::<Vec<_>>(),
            [3, 4]
        );
        drop(log);
        let mut view = view;
        view.extend([user(5)]);
        assert_eq!(view.into_vec().iter().map(|m| m.seq).collect::<Vec<_>>(), [3, 4, 5]);
    }

    #[test]
    fn equality_and_debug_read_the_messages_only() {
        let a: SharedMessages = (1..=3).map(user).collect();
        let b: SharedMessages = (0..=3).map(user).collect::<SharedMessages>().view_from(1);
        assert_eq!(a, b);
        assert_eq!(a, (1..=3).map(user).collect::<Vec<_>>());
        assert_eq!(format!("{a:?}"), format!("{:?}", (1..=3).map(user).collect::<Vec<_>>()));
    }
}
