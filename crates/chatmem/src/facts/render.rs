//! How a user's facts are written into a prompt ([`render`]): in one fixed order under one
//! fixed heading, so an unchanged set of facts is the same bytes every turn and a provider's
//! cached prefix survives until a fact changes.

use crate::counter::TokenCounter;
use crate::message::Message;

use super::bounds::fact_tokens;
use super::fact::{Fact, FactSet};

/// The first line of the message a user's facts are sent in: fixed, so a model (and a reader
/// of the prompt) can tell what is known of the user from what is being said now.
pub const FACTS_HEADING: &str = "What is known about the user (kept across conversations):";

/// A user's facts as written for a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedFacts {
    /// [`FACTS_HEADING`] and one line per fact, as one user message.
    pub message: Message,
    /// Its tokens by the counter it was rendered with (the whole message, by
    /// [`TokenCounter::count_message`]).
    pub tokens: usize,
    /// The ids of the facts in it, in the order they are written.
    pub included: Vec<u64>,
}

/// One fact as it is written: `- ` and its text (one line: a fact's text has no line break).
pub fn line(fact: &Fact) -> String {
    format!("- {}", fact.text)
}

/// The order facts are written in: pinned facts first; within pinned and within the others,
/// facts with a key first, by key (byte order), then facts without one, by id (oldest
/// first). A fact superseded under its key keeps its place, a new fact without a key is
/// written last, so the text before it stays as it was.
pub fn render_order(set: &FactSet) -> Vec<&Fact> {
    let mut facts: Vec<&Fact> = set.facts().iter().collect();
    facts.sort_by(|a, b| (!a.pinned, a.key.is_none(), &a.key, a.id).cmp(&(!b.pinned, b.key.is_none(), &b.key, b.id)));
    facts
}

/// The user message `set`'s facts are sent in: [`FACTS_HEADING`], then one [`line`](fn@line) per fact
/// in [`render_order`], every fact that fits in `budget_tokens` (the whole message, by
/// `counter`; a fact that does not fit is left out whole and the next ones still tried).
/// `None` when there are no facts or none fits.
///
/// A function of the facts' texts, keys, pins and ids only: the same set renders to the same
/// bytes (a confirmation, which changes times and sources, changes nothing here), so the
/// prompt changes only when a fact does — as long as the budget and counter are the same
/// every turn. Give it a fixed budget (a configured one, not what a window leaves), or the
/// facts change with the conversation's length.
///
/// Why a user message: a fact is what the user said, read by a model; sent as a system
/// message, a user's sentence would carry the operator's instructions' weight. It belongs in
/// one fixed place near the beginning of the prompt (after the system message), not beside
/// the newest message as recall's is: it is the same in every turn of every conversation of
/// the user.
///
/// ```
/// use chatmem::{Cl100k, facts::{FactKey, FactSet, add, render}};
/// let set = FactSet::default();
/// let set = add(&set, "Allergic to nuts", None, &Default::default(), 1)?.0.set;
/// let key = FactKey::new("address.default")?;
/// let set = add(&set, "Default delivery address: 12 Main St.", Some(key), &Default::default(), 2)?.0.set;
/// let rendered = render(&set, 100, &Cl100k).unwrap();
/// assert_eq!(
///     rendered.message.text().unwrap(),
///     "What is known about the user (kept across conversations):\n- Default delivery address: 12 Main St.\n- Allergic to nuts"
/// );
/// assert_eq!(rendered.included, [2, 1]);
/// assert_eq!(render(&FactSet::default(), 100, &Cl100k), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn render(set: &FactSet, budget_tokens: usize, counter: &dyn TokenCounter) -> Option<RenderedFacts> {
    // What each line costs is estimated as it is added (its own count and a line break); the
    // message as written is counted once at the end and its last lines left out if the
    // estimate fell short.
    let mut spent = counter.count_message(&Message::user(FACTS_HEADING));
    let mut included: Vec<&Fact> = Vec::new();
    for fact in render_order(set) {
        let cost = fact_tokens(fact, counter);
        if spent + cost <= budget_tokens {
            spent += cost;
            included.push(fact);
        }
    }
    while !included.is_empty() {
        let mut text = String::from(FACTS_HEADING);
        for fact in &included {
            text.push('\n');
            text.push_str(&line(fact));
        }
        let message = Message::user(text);
        let tokens = counter.count_message(&message);
        if tokens <= budget_tokens {
            return Some(RenderedFacts {
                message,
                tokens,
                included: included.iter().map(|f| f.id).collect(),
            });
        }
        included.pop();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::{Cl100k, Heuristic};
    use crate::facts::fact::tests::fact;

    fn set(facts: Vec<Fact>) -> FactSet {
        let next = facts.iter().map(|f| f.id).max().unwrap_or(0) + 1;
        FactSet::new(facts, next).unwrap()
    }

    fn text(r: &RenderedFacts) -> String {
        r.message.text().unwrap().into_owned()
    }

    #[test]
    fn pinned_first_then_keyed_by_key_then_the_rest_by_id() {
        let mut facts = vec![
            fact(1, "unkeyed old", None),
            fact(2, "zeta", Some("z.key")),
            fact(3, "alpha", Some("a.key")),
            fact(4, "unkeyed pinned", None),
            fact(5, "pinned keyed", Some("m.key")),
            fact(6, "unkeyed new", None),
        ];
        facts[3].pinned = true;
        facts[4].pinned = true;
        let s = set(facts);
        let order: Vec<u64> = render_order(&s).iter().map(|f| f.id).collect();
        assert_eq!(order, [5, 4, 3, 2, 1, 6]);
        let r = render(&s, 1_000, &Cl100k).unwrap();
        assert_eq!(r.included, order);
        assert_eq!(
            text(&r),
            format!("{FACTS_HEADING}\n- pinned keyed\n- unkeyed pinned\n- alpha\n- zeta\n- unkeyed old\n- unkeyed new")
        );
        assert_eq!(r.message.role(), crate::message::Role::User);
        assert_eq!(r.tokens, Cl100k.count_message(&r.message));
    }

    #[test]
    fn nothing_to_say_is_none() {
        assert_eq!(render(&FactSet::default(), 1_000, &Cl100k), None);
        // The heading alone does not fit: nothing is sent.
        let s = set(vec![fact(1, "a", None)]);
        assert_eq!(render(&s, 5, &Cl100k), None);
    }

    #[test]
    fn within_the_budget_whole_lines_only_and_the_next_ones_still_tried() {
        let s = set(vec![
            fact(1, "short one", None),
            fact(2, "long ".repeat(60).trim_end(), None),
            fact(3, "short two", None),
        ]);
        let all = render(&s, 10_000, &Heuristic).unwrap();
        assert_eq!(all.included, [1, 2, 3]);
        let heading = Heuristic.count_message(&Message::user(FACTS_HEADING));
        let budget = heading + fact_tokens(s.get(1).unwrap(), &Heuristic) + fact_tokens(s.get(3).unwrap(), &Heuristic);
        let some = render(&s, budget, &Heuristic).unwrap();
        assert_eq!(some.included, [1, 3]);
        assert!(some.tokens <= budget);
        assert_eq!(text(&some), format!("{FACTS_HEADING}\n- short one\n- short two"));
        for budget in 0..200 {
            if let Some(r) = render(&s, budget, &Cl100k) {
                assert!(r.tokens <= budget, "{budget}: {}", r.tokens);
                assert!(text(&r).lines().count() == r.included.len() + 1);
            }
        }
    }

    #[test]
    fn an_unchanged_set_renders_byte_identically_and_a_confirmation_changes_nothing() {
        let s = set(vec![
            fact(1, "Lives in Berlin", Some("home.city")),
            fact(2, "Allergic to nuts", None),
        ]);
        let a = render(&s, 500, &Cl100k).unwrap();
        assert_eq!(render(&s.clone(), 500, &Cl100k).unwrap(), a);
        let mut confirmed = s.facts().to_vec();
        confirmed[1].confirmed_micros = 1_000;
        confirmed[1].updated_micros = 1_000;
        confirmed[1].sources = vec![crate::facts::fact::tests::source("c2", 9)];
        let confirmed = FactSet::new(confirmed, s.next_id()).unwrap();
        assert_eq!(render(&confirmed, 500, &Cl100k).unwrap(), a);
        let mut edited = s.facts().to_vec();
        edited[1].text = "Allergic to peanuts".into();
        let edited = FactSet::new(edited, s.next_id()).unwrap();
        assert_ne!(render(&edited, 500, &Cl100k).unwrap().message, a.message);
    }
}
