//! [`Fact`], where it came from ([`FactSource`]), and a user's current facts ([`FactSet`]).

use serde::{Deserialize, Serialize};

use crate::id::ConversationId;

use super::key::FactKey;
use super::text::is_clean;

/// The most sources a fact keeps: a fact confirmed again and again keeps its newest ones.
pub const MAX_FACT_SOURCES: usize = 64;

/// The largest [`FactSet::next_id`] accepted: ids fit in a signed 64-bit column.
pub const MAX_FACT_ID: u64 = i64::MAX as u64;

/// A message a fact was read from: its conversation and sequence number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FactSource {
    /// The conversation.
    pub conversation: ConversationId,
    /// The message's sequence number in it.
    pub seq: u64,
}

/// One thing known about a user, kept across conversations.
///
/// Its text is one line ([`clean_text`](super::clean_text)); its key, when it has one, names
/// what it is about ([`FactKey`]). Times are Unix microseconds, the caller's clock:
/// `created_micros` when the fact was made, `updated_micros` when it last changed in any way
/// (its text, key, pin or sources; a confirmation included), `confirmed_micros` when it was
/// last said to hold (made, edited, or said again by an extraction or a person): the least
/// recently confirmed unpinned fact is the first to leave when the bounds are passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Its id, unique among the user's facts (current and past) and never reused.
    pub id: u64,
    /// What is known, one line.
    pub text: String,
    /// What it is about, when it says.
    pub key: Option<FactKey>,
    /// The messages it was read from, oldest first, at most [`MAX_FACT_SOURCES`] (none for a
    /// fact added by hand).
    pub sources: Vec<FactSource>,
    /// When it was made.
    pub created_micros: i64,
    /// When it last changed.
    pub updated_micros: i64,
    /// When it was last said to hold.
    pub confirmed_micros: i64,
    /// Whether a person pinned it: a pinned fact never leaves by the bounds.
    pub pinned: bool,
}

/// Why a list of facts is not a [`FactSet`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidFactSet {
    /// Two facts share an id.
    #[error("two facts have id {0}")]
    DuplicateId(u64),
    /// A fact's id is not below the set's next id.
    #[error("fact {id} is not below the next id {next_id}")]
    IdNotBelowNext {
        /// The fact's id.
        id: u64,
        /// The set's next id.
        next_id: u64,
    },
    /// The next id is past [`MAX_FACT_ID`] or 0.
    #[error("the next fact id {0} is not from 1 to {MAX_FACT_ID}")]
    NextIdOutOfRange(u64),
    /// Two current facts share a key.
    #[error("facts {first} and {second} both have key {key}")]
    DuplicateKey {
        /// The key.
        key: FactKey,
        /// The fact with it that comes first by id.
        first: u64,
        /// The other.
        second: u64,
    },
    /// A fact's text is not one clean line ([`clean_text`](super::clean_text)).
    #[error("fact {0}'s text is not one clean, non-empty line")]
    UncleanText(u64),
    /// A fact has more than [`MAX_FACT_SOURCES`] sources.
    #[error("fact {id} has {count} sources; the limit is {MAX_FACT_SOURCES}")]
    TooManySources {
        /// The fact.
        id: u64,
        /// How many it has.
        count: usize,
    },
}

/// A user's current facts, ordered by id, and the id the next new fact gets.
///
/// Valid by construction: ids are unique and below `next_id`, no two facts share a key, every
/// text is one clean line. It changes only through the pure functions of this module
/// ([`merge`](super::merge), [`enforce`](super::enforce), [`add`](super::add),
/// [`edit`](super::edit), [`pin`](super::pin), [`unpin`](super::unpin),
/// [`delete`](super::delete)), each returning a new set and what changed. Two sets with the
/// same facts are equal however they were built.
///
/// ```
/// use chatmem::facts::FactSet;
/// let empty = FactSet::default();
/// assert!(empty.is_empty());
/// assert_eq!(empty.next_id(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FactSetParts", into = "FactSetParts")]
pub struct FactSet {
    facts: Vec<Fact>,
    next_id: u64,
}

/// A [`FactSet`] as it is serialized: its facts and next id.
#[derive(Serialize, Deserialize)]
struct FactSetParts {
    facts: Vec<Fact>,
    next_id: u64,
}

impl TryFrom<FactSetParts> for FactSet {
    type Error = InvalidFactSet;
    fn try_from(parts: FactSetParts) -> Result<Self, Self::Error> {
        FactSet::new(parts.facts, parts.next_id)
    }
}

impl From<FactSet> for FactSetParts {
    fn from(set: FactSet) -> Self {
        FactSetParts {
            facts: set.facts,
            next_id: set.next_id,
        }
    }
}

impl Default for FactSet {
    /// No facts; the first gets id 1.
    fn default() -> Self {
        Self {
            facts: Vec::new(),
            next_id: 1,
        }
    }
}

impl FactSet {
    /// The set of `facts` (in any order), whose next new fact gets `next_id`: what a store
    /// loads.
    ///
    /// # Errors
    /// [`InvalidFactSet`] when two facts share an id or a key, an id is not below `next_id`,
    /// `next_id` is 0 or past [`MAX_FACT_ID`], a text is not one clean line, or a fact has too
    /// many sources.
    pub fn new(mut facts: Vec<Fact>, next_id: u64) -> Result<Self, InvalidFactSet> {
        if next_id == 0 || next_id > MAX_FACT_ID {
            return Err(InvalidFactSet::NextIdOutOfRange(next_id));
        }
        facts.sort_by_key(|f| f.id);
        for pair in facts.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(InvalidFactSet::DuplicateId(pair[0].id));
            }
        }
        for (i, fact) in facts.iter().enumerate() {
            if fact.id >= next_id {
                return Err(InvalidFactSet::IdNotBelowNext { id: fact.id, next_id });
            }
            if !is_clean(&fact.text) {
                return Err(InvalidFactSet::UncleanText(fact.id));
            }
            if fact.sources.len() > MAX_FACT_SOURCES {
                return Err(InvalidFactSet::TooManySources {
                    id: fact.id,
                    count: fact.sources.len(),
                });
            }
            if let Some(key) = &fact.key
                && let Some(first) = facts[..i].iter().find(|f| f.key.as_ref() == Some(key))
            {
                return Err(InvalidFactSet::DuplicateKey {
                    key: key.clone(),
                    first: first.id,
                    second: fact.id,
                });
            }
        }
        Ok(Self { facts, next_id })
    }

    /// The facts, ordered by id (oldest first).
    pub fn facts(&self) -> &[Fact] {
        &self.facts
    }

    /// How many facts there are.
    pub fn len(&self) -> usize {
        self.facts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// The id the next new fact gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The fact with id `id`.
    pub fn get(&self, id: u64) -> Option<&Fact> {
        self.position(id).map(|i| &self.facts[i])
    }

    /// The current fact with key `key`.
    pub fn by_key(&self, key: &FactKey) -> Option<&Fact> {
        self.facts.iter().find(|f| f.key.as_ref() == Some(key))
    }

    /// The set with every fact forgotten and ids still never reused.
    pub fn forgotten(&self) -> Self {
        Self {
            facts: Vec::new(),
            next_id: self.next_id,
        }
    }

    pub(crate) fn position(&self, id: u64) -> Option<usize> {
        self.facts.binary_search_by_key(&id, |f| f.id).ok()
    }

    pub(crate) fn fact_mut(&mut self, id: u64) -> Option<&mut Fact> {
        self.position(id).map(|i| &mut self.facts[i])
    }

    /// Adds a new fact with the next id (ids only grow, so the order by id holds) and returns
    /// its id. The caller keeps keys unique and text clean.
    pub(crate) fn push_new(&mut self, mut fact: Fact) -> u64 {
        let id = self.next_id;
        fact.id = id;
        self.facts.push(fact);
        self.next_id = id.saturating_add(1);
        id
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<Fact> {
        self.position(id).map(|i| self.facts.remove(i))
    }
}

/// `sources` with `more` appended, those already there left out, and only the newest
/// [`MAX_FACT_SOURCES`] kept.
pub(crate) fn merge_sources(sources: &mut Vec<FactSource>, more: &[FactSource]) {
    for source in more {
        if !sources.contains(source) {
            sources.push(source.clone());
        }
    }
    if sources.len() > MAX_FACT_SOURCES {
        sources.drain(..sources.len() - MAX_FACT_SOURCES);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fact(id: u64, text: &str, key: Option<&str>) -> Fact {
        Fact {
            id,
            text: text.to_string(),
            key: key.map(|k| FactKey::new(k).unwrap()),
            sources: Vec::new(),
            created_micros: id as i64,
            updated_micros: id as i64,
            confirmed_micros: id as i64,
            pinned: false,
        }
    }

    pub(crate) fn source(conversation: &str, seq: u64) -> FactSource {
        FactSource {
            conversation: ConversationId::new(conversation).unwrap(),
            seq,
        }
    }

    #[test]
    fn a_set_is_ordered_by_id_whatever_order_it_was_given_in() {
        let a = FactSet::new(vec![fact(3, "c", None), fact(1, "a", Some("k")), fact(2, "b", None)], 4).unwrap();
        let b = FactSet::new(vec![fact(1, "a", Some("k")), fact(2, "b", None), fact(3, "c", None)], 4).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.facts().iter().map(|f| f.id).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(a.get(2).unwrap().text, "b");
        assert_eq!(a.get(4), None);
        assert_eq!(a.by_key(&FactKey::new("k").unwrap()).unwrap().id, 1);
        assert_eq!(a.by_key(&FactKey::new("other").unwrap()), None);
        assert_eq!((a.len(), a.is_empty(), a.next_id()), (3, false, 4));
        let forgotten = a.forgotten();
        assert!(forgotten.is_empty());
        assert_eq!(forgotten.next_id(), 4);
    }

    #[test]
    fn a_set_refuses_what_would_break_its_rules() {
        assert_eq!(
            FactSet::new(vec![fact(1, "a", None), fact(1, "b", None)], 2),
            Err(InvalidFactSet::DuplicateId(1))
        );
        assert_eq!(
            FactSet::new(vec![fact(2, "a", None)], 2),
            Err(InvalidFactSet::IdNotBelowNext { id: 2, next_id: 2 })
        );
        assert_eq!(FactSet::new(vec![], 0), Err(InvalidFactSet::NextIdOutOfRange(0)));
        assert_eq!(
            FactSet::new(vec![], MAX_FACT_ID + 1),
            Err(InvalidFactSet::NextIdOutOfRange(MAX_FACT_ID + 1))
        );
        assert!(FactSet::new(vec![], MAX_FACT_ID).is_ok());
        assert_eq!(
            FactSet::new(vec![fact(2, "b", Some("k")), fact(1, "a", Some("k"))], 3),
            Err(InvalidFactSet::DuplicateKey {
                key: FactKey::new("k").unwrap(),
                first: 1,
                second: 2
            })
        );
        for text in ["", " a", "a\nb", "a  b", "a\u{202e}"] {
            assert_eq!(
                FactSet::new(vec![fact(1, text, None)], 2),
                Err(InvalidFactSet::UncleanText(1)),
                "{text:?}"
            );
        }
        let mut many = fact(1, "a", None);
        many.sources = (0..=MAX_FACT_SOURCES as u64).map(|s| source("c", s)).collect();
        assert_eq!(
            FactSet::new(vec![many], 2),
            Err(InvalidFactSet::TooManySources {
                id: 1,
                count: MAX_FACT_SOURCES + 1
            })
        );
    }

    #[test]
    fn a_set_round_trips_through_serde_and_is_checked_on_the_way_in() {
        let mut f = fact(1, "Default delivery address: 12 Main St.", Some("address.default"));
        f.sources = vec![source("c1", 12), source("c1", 13)];
        f.pinned = true;
        let set = FactSet::new(vec![f, fact(2, "Allergic to nuts", None)], 3).unwrap();
        let json = serde_json::to_string(&set).unwrap();
        assert!(
            json.starts_with(r#"{"facts":[{"id":1,"text":"Default delivery address: 12 Main St.","key":"address.default","sources":[{"conversation":"c1","seq":12}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<FactSet>(&json).unwrap(), set);
        let broken = json.replace(r#""next_id":3"#, r#""next_id":2"#);
        let e = serde_json::from_str::<FactSet>(&broken).unwrap_err().to_string();
        assert!(e.contains("fact 2 is not below the next id 2"), "{e}");
    }

    #[test]
    fn sources_merge_without_repeats_keeping_the_newest() {
        let mut sources = vec![source("c", 1), source("c", 2)];
        merge_sources(&mut sources, &[source("c", 2), source("d", 2), source("c", 3)]);
        assert_eq!(
            sources,
            [source("c", 1), source("c", 2), source("d", 2), source("c", 3)]
        );
        let more: Vec<FactSource> = (10..10 + MAX_FACT_SOURCES as u64).map(|s| source("c", s)).collect();
        merge_sources(&mut sources, &more);
        assert_eq!(sources, more);
    }
}
