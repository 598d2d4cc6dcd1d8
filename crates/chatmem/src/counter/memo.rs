//! [`Memo`]: a counter that remembers the counts of short strings it has counted, for what a
//! prompt counts again every turn (the placeholders of cleared tool results, their calls' ids
//! and arguments), never for a message's own text, which is counted once when it joins memory.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::counter::TokenCounter;

/// Strings longer than this are counted each time: a long text is rarely counted twice, and
/// keeping it would cost its bytes.
const MAX_KEPT_BYTES: usize = 256;
/// The most counts kept; past it the table starts over (a bound, not an eviction policy: a
/// conversation's placeholders number in the hundreds).
const MAX_KEPT: usize = 65_536;

/// The counts of short strings, by counter name (a count holds for every counter of that
/// name, as a stored count does: [`count_holds_for`](crate::store::StoredMessage::count_holds_for)).
/// Shared by the copies of a memory.
#[derive(Debug, Default)]
pub(crate) struct TextCounts(Mutex<HashMap<Box<str>, Counts>>);

/// One counter's counts, by text.
type Counts = HashMap<Box<str>, u32>;

/// `inner`, remembering in `counts` what it counts of short strings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Memo<'a> {
    pub(crate) inner: &'a dyn TokenCounter,
    pub(crate) counts: &'a TextCounts,
}

impl TokenCounter for Memo<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn count_text(&self, text: &str) -> usize {
        if text.len() > MAX_KEPT_BYTES {
            return self.inner.count_text(text);
        }
        let name = self.inner.name();
        // A poisoned lock only means another count panicked: the table is still counts.
        let kept = {
            let table = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
            table.get(name).and_then(|counts| counts.get(text)).copied()
        };
        if let Some(n) = kept {
            return n as usize;
        }
        // Counted outside the lock: another turn may count the same string meanwhile, to the
        // same count.
        let n = self.inner.count_text(text);
        let mut table = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
        let counts = table.entry(Box::from(name)).or_default();
        if counts.len() >= MAX_KEPT {
            counts.clear();
        }
        counts.insert(Box::from(text), u32::try_from(n).unwrap_or(u32::MAX));
        n
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::Heuristic;

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl TokenCounter for Counting {
        fn name(&self) -> &str {
            "heuristic"
        }
        fn count_text(&self, text: &str) -> usize {
            self.0.fetch_add(1, Ordering::Relaxed);
            Heuristic.count_text(text)
        }
    }

    #[test]
    fn short_strings_are_counted_once_long_ones_each_time() {
        let inner = Counting::default();
        let counts = TextCounts::default();
        let memo = Memo {
            inner: &inner,
            counts: &counts,
        };
        let long = "x".repeat(MAX_KEPT_BYTES + 1);
        for _ in 0..3 {
            assert_eq!(memo.count_text("[cleared: f result for call c1, 9 tokens]"), 11);
            assert_eq!(memo.count_text(&long), Heuristic.count_text(&long));
        }
        assert_eq!(inner.0.load(Ordering::Relaxed), 1 + 3);
    }
}
