//! [`Verification`]: every conversation's history, read back after the run, against what the
//! generator knows it committed.

use std::collections::HashMap;

use serde::Serialize;

use crate::ledger::Entry;
use crate::marker::Marker;

/// What the histories held, summed over all conversations. A clean run has zero `lost`,
/// `duplicated`, `split_turns` and `unexpected`.
///
/// ```
/// let v = chatmem_loadtest::Verification::default();
/// assert!(v.is_clean());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Conversations whose history was read.
    pub conversations: u64,
    /// Messages of acknowledged turns (two per turn).
    pub acknowledged_messages: u64,
    /// Messages in the histories.
    pub stored_messages: u64,
    /// Messages of acknowledged turns missing from the history.
    pub lost: u64,
    /// Extra copies of a message (a turn applied twice).
    pub duplicated: u64,
    /// Acknowledged turns whose question and answer are not next to each other.
    pub split_turns: u64,
    /// Messages in a history that the generator never sent there (unmarked, another
    /// conversation's, or a turn number never used).
    pub unexpected: u64,
    /// Turns whose request failed, so whether they landed is unknown.
    pub uncertain_turns: u64,
    /// Of those, the turns found whole in the history.
    pub uncertain_landed: u64,
    /// Histories that could not be read (their messages count as lost).
    pub unreadable: u64,
}

impl Verification {
    /// True when nothing was lost, duplicated, split, unexpected or unreadable.
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.split_turns == 0 && self.unexpected == 0 && self.unreadable == 0
    }

    /// Checks the history of conversation `conversation` (each message's marker, `None` for
    /// a message without one) against what the ledger holds for it, and adds the counts.
    pub(crate) fn check(&mut self, conversation: usize, known: &Entry, history: &[Option<Marker>]) {
        self.conversations += 1;
        self.stored_messages += history.len() as u64;
        self.acknowledged_messages += 2 * known.acked.len() as u64;
        self.uncertain_turns += known.uncertain.len() as u64;

        let mut at: HashMap<(u32, bool), Vec<usize>> = HashMap::new();
        for (i, m) in history.iter().enumerate() {
            match m {
                Some(m) if m.conversation == conversation => at.entry((m.turn, m.answer)).or_default().push(i),
                _ => self.unexpected += 1,
            }
        }
        let mut whole = |turn: u32, count_lost: bool| -> bool {
            let question = at.remove(&(turn, false)).unwrap_or_default();
            let answer = at.remove(&(turn, true)).unwrap_or_default();
            for copies in [&question, &answer] {
                self.duplicated += copies.len().saturating_sub(1) as u64;
                if count_lost && copies.is_empty() {
                    self.lost += 1;
                }
            }
            match (question.first(), answer.first()) {
                (Some(&q), Some(&a)) => {
                    if a != q + 1 {
                        self.split_turns += 1;
                    }
                    true
                }
                // Half a turn landed: a turn is one batch, so that is a split, not a loss.
                (Some(_), None) | (None, Some(_)) if !count_lost => {
                    self.split_turns += 1;
                    false
                }
                _ => false,
            }
        };
        for &turn in &known.acked {
            whole(turn, true);
        }
        for &turn in &known.uncertain {
            if whole(turn, false) {
                self.uncertain_landed += 1;
            }
        }
        // What is left was never sent to this conversation.
        self.unexpected += at.values().map(|v| v.len() as u64).sum::<u64>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(turn: u32, answer: bool) -> Option<Marker> {
        Some(Marker {
            conversation: 3,
            turn,
            answer,
        })
    }

    fn entry(acked: &[u32], uncertain: &[u32]) -> Entry {
        Entry {
            acked: acked.to_vec(),
            uncertain: uncertain.to_vec(),
            ..Entry::default()
        }
    }

    fn check(known: &Entry, history: &[Option<Marker>]) -> Verification {
        let mut v = Verification::default();
        v.check(3, known, history);
        v
    }

    #[test]
    fn a_complete_history_is_clean() {
        let v = check(
            &entry(&[0, 1], &[2]),
            &[m(0, false), m(0, true), m(1, false), m(1, true)],
        );
        assert!(v.is_clean(), "{v:?}");
        assert_eq!(
            (v.acknowledged_messages, v.stored_messages, v.uncertain_turns),
            (4, 4, 1)
        );
        assert_eq!(v.uncertain_landed, 0);
    }

    #[test]
    fn lost_duplicated_split_and_foreign_messages_are_counted() {
        // Turn 1 lost whole, turn 0's answer twice, turn 2 split by turn 3.
        let history = [
            m(0, false),
            m(0, true),
            m(0, true),
            m(2, false),
            m(3, false),
            m(3, true),
            m(2, true),
        ];
        let v = check(&entry(&[0, 1, 2, 3], &[]), &history);
        assert_eq!(
            (v.lost, v.duplicated, v.split_turns, v.unexpected),
            (2, 1, 1, 0),
            "{v:?}"
        );
        assert!(!v.is_clean());

        // Another conversation's message, an unmarked one, a turn never sent.
        let other = Some(Marker {
            conversation: 4,
            turn: 0,
            answer: false,
        });
        let v = check(&entry(&[0], &[]), &[m(0, false), m(0, true), other, None, m(9, false)]);
        assert_eq!((v.lost, v.unexpected), (0, 3), "{v:?}");
    }

    #[test]
    fn uncertain_turns_may_land_or_not_but_never_by_half() {
        let v = check(
            &entry(&[0], &[1, 2]),
            &[m(0, false), m(0, true), m(1, false), m(1, true)],
        );
        assert!(v.is_clean(), "{v:?}");
        assert_eq!(v.uncertain_landed, 1);
        let v = check(&entry(&[0], &[1]), &[m(0, false), m(0, true), m(1, false)]);
        assert_eq!(v.split_turns, 1, "{v:?}");
    }
}
