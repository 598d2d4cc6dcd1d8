//! How a proposal joins a user's facts ([`merge`]): chatmem's rules, not the model's, pure and
//! deterministic. The model never deletes.

use super::change::{Cause, ChangeKind, Changed, FactChange};
use super::fact::{Fact, FactSet, FactSource, merge_sources};
use super::key::FactKey;
use super::proposal::ProposedFact;
use super::text::comparable_text;

/// `set` with `proposal` applied, fact by fact in the proposal's order, at `now_micros`,
/// caused by `cause`; with the changes, in the order they happened:
///
/// - A fact with a key, when the current fact with that key says the same
///   ([`same_text`](super::same_text): case, spacing and punctuation aside), confirms it
///   ([`Confirmed`](ChangeKind::Confirmed): confirmed and updated now, the new sources added
///   after its own, its text as it was).
/// - A fact with a key that says something else supersedes the current fact with that key:
///   the new one gets the next id (and the old one's pin, since the pin was on what the key is
///   about), the old one leaves the set and is recorded as
///   [`Superseded`](ChangeKind::Superseded) by it, then the new one as
///   [`Added`](ChangeKind::Added). Unless it is older: when the current fact was said later in
///   the same conversation (a source there after every source of the new one), the new one is
///   an earlier value whose extraction finished late, and is left out, with no change.
/// - A fact with a key no current fact has takes the place of a current fact without a key
///   that says the same (which takes the key and is confirmed), or else is added.
/// - A fact without a key that says the same as a current fact (with a key or without; the
///   first by id) confirms it; else it is added.
///
/// Nothing is deleted, and the bounds are not applied: [`enforce`](super::enforce) after it,
/// and commit both changes together.
///
/// ```
/// use chatmem::ConversationId;
/// use chatmem::facts::{Cause, FactLimits, FactSet, Shown, merge, parse_proposal};
/// let c1 = ConversationId::new("c1")?;
/// let shown = Shown::new(c1.clone(), 10..=13);
/// let cause = Cause::Extraction { conversation: c1 };
/// let limits = FactLimits::default();
/// let first = parse_proposal(r#"{"facts": [{"text": "Lives in Berlin", "key": "home.city", "sources": [10]},
///     {"text": "Allergic to nuts", "sources": [11]}]}"#, &shown, &limits)?;
/// let one = merge(&FactSet::default(), &first, &cause, 100);
/// let again = parse_proposal(r#"{"facts": [{"text": "Lives in Hamburg", "key": "home.city", "sources": [12]},
///     {"text": "allergic to nuts!", "sources": [13]}]}"#, &shown, &limits)?;
/// let two = merge(&one.set, &again, &cause, 200);
/// let texts: Vec<&str> = two.set.facts().iter().map(|f| f.text.as_str()).collect();
/// assert_eq!(texts, ["Allergic to nuts", "Lives in Hamburg"]);
/// let kinds: Vec<&str> = two.changes.iter().map(|c| c.kind.as_str()).collect();
/// assert_eq!(kinds, ["superseded", "added", "confirmed"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn merge(set: &FactSet, proposal: &[ProposedFact], cause: &Cause, now_micros: i64) -> Changed {
    let mut out = Changed::unchanged(set);
    for fact in proposal {
        apply_one(
            &mut out,
            &Said {
                text: &fact.text,
                key: fact.key.as_ref(),
                sources: &fact.sources,
                cause,
                now: now_micros,
            },
        );
    }
    out
}

/// One fact said (by a model or a person): its text (clean), key (valid) and sources, what
/// said it and when.
pub(crate) struct Said<'a> {
    pub(crate) text: &'a str,
    pub(crate) key: Option<&'a FactKey>,
    pub(crate) sources: &'a [FactSource],
    pub(crate) cause: &'a Cause,
    pub(crate) now: i64,
}

/// Applies one fact by [`merge`]'s rules to `out` and returns the id of the fact its text is
/// now in.
pub(crate) fn apply_one(out: &mut Changed, said: &Said<'_>) -> u64 {
    let comparable = comparable_text(said.text);
    let says_it = |f: &Fact| f.text == said.text || comparable_text(&f.text) == comparable;
    let keyed = said.key.and_then(|k| out.set.by_key(k)).map(|f| (f.id, says_it(f)));
    let target = match (said.key, keyed) {
        (Some(_), Some((id, true))) => Some((id, None)),
        (Some(_), Some((old, false))) if said_before(out.set.get(old), said.sources) => return old,
        (Some(_), Some((old, false))) => return supersede(out, old, said),
        (Some(k), None) => out
            .set
            .facts()
            .iter()
            .find(|f| f.key.is_none() && says_it(f))
            .map(|f| (f.id, Some(k.clone()))),
        (None, _) => out.set.facts().iter().find(|f| says_it(f)).map(|f| (f.id, None)),
    };
    let Some((id, took_key)) = target else {
        return add_new(out, said, false, None);
    };
    if let Some(fact) = out.set.fact_mut(id) {
        merge_sources(&mut fact.sources, said.sources);
        fact.confirmed_micros = said.now;
        fact.updated_micros = said.now;
        if let Some(k) = &took_key {
            fact.key = Some(k.clone());
        }
    }
    out.changes.push(FactChange {
        fact: id,
        at_micros: said.now,
        cause: said.cause.clone(),
        kind: ChangeKind::Confirmed {
            sources: said.sources.to_vec(),
            key: took_key,
        },
    });
    id
}

/// Whether `current` was said after `sources` in a conversation they share: a source of
/// `current` there with a later message than every one of `sources` there. Extractions of one
/// conversation may finish out of order (the model is slow, the turns are not), so an older
/// value must not supersede a newer one; across conversations there is no such order to go by.
fn said_before(current: Option<&Fact>, sources: &[FactSource]) -> bool {
    let Some(current) = current else { return false };
    sources.iter().any(|s| {
        let newest_said = sources
            .iter()
            .filter(|o| o.conversation == s.conversation)
            .map(|o| o.seq)
            .max()
            .unwrap_or(s.seq);
        current
            .sources
            .iter()
            .any(|c| c.conversation == s.conversation && c.seq > newest_said)
    })
}

/// Replaces fact `old` by a new fact of what was said, under the same key.
fn supersede(out: &mut Changed, old: u64, said: &Said<'_>) -> u64 {
    let Some(previous) = out.set.remove(old) else {
        // Not reached: `old` was just found in the set.
        return add_new(out, said, false, None);
    };
    out.changes.push(FactChange {
        fact: old,
        at_micros: said.now,
        cause: said.cause.clone(),
        kind: ChangeKind::Superseded {
            by: out.set.next_id(),
            text: previous.text,
        },
    });
    add_new(out, said, previous.pinned, Some(old))
}

/// Adds what was said as a new fact with the next id.
fn add_new(out: &mut Changed, said: &Said<'_>, pinned: bool, supersedes: Option<u64>) -> u64 {
    let mut sources = Vec::new();
    merge_sources(&mut sources, said.sources);
    let id = out.set.push_new(Fact {
        id: 0,
        text: said.text.to_owned(),
        key: said.key.cloned(),
        sources,
        created_micros: said.now,
        updated_micros: said.now,
        confirmed_micros: said.now,
        pinned,
    });
    out.changes.push(FactChange {
        fact: id,
        at_micros: said.now,
        cause: said.cause.clone(),
        kind: ChangeKind::Added {
            text: said.text.to_owned(),
            key: said.key.cloned(),
            supersedes,
        },
    });
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::fact::tests::{fact, source};
    use crate::id::ConversationId;

    fn cause() -> Cause {
        Cause::Extraction {
            conversation: ConversationId::new("c2").unwrap(),
        }
    }

    fn proposed(text: &str, key: Option<&str>, seqs: &[u64]) -> ProposedFact {
        ProposedFact {
            text: text.to_owned(),
            key: key.map(|k| FactKey::new(k).unwrap()),
            sources: seqs.iter().map(|&s| source("c2", s)).collect(),
        }
    }

    fn set(facts: Vec<Fact>) -> FactSet {
        let next = facts.iter().map(|f| f.id).max().unwrap_or(0) + 1;
        FactSet::new(facts, next).unwrap()
    }

    fn kinds(changed: &Changed) -> Vec<(u64, &'static str)> {
        changed.changes.iter().map(|c| (c.fact, c.kind.as_str())).collect()
    }

    #[test]
    fn new_facts_are_added_with_the_next_ids_and_now() {
        let merged = merge(
            &FactSet::default(),
            &[
                proposed("Likes tea", None, &[3]),
                proposed("Lives in Berlin", Some("home.city"), &[4, 5]),
            ],
            &cause(),
            1_000,
        );
        assert_eq!(kinds(&merged), [(1, "added"), (2, "added")]);
        assert_eq!(merged.set.next_id(), 3);
        let tea = merged.set.get(1).unwrap();
        assert_eq!(
            *tea,
            Fact {
                id: 1,
                text: "Likes tea".into(),
                key: None,
                sources: vec![source("c2", 3)],
                created_micros: 1_000,
                updated_micros: 1_000,
                confirmed_micros: 1_000,
                pinned: false,
            }
        );
        assert_eq!(merged.set.get(2).unwrap().sources, [source("c2", 4), source("c2", 5)]);
        assert_eq!(
            merged.changes[1],
            FactChange {
                fact: 2,
                at_micros: 1_000,
                cause: cause(),
                kind: ChangeKind::Added {
                    text: "Lives in Berlin".into(),
                    key: Some(FactKey::new("home.city").unwrap()),
                    supersedes: None
                }
            }
        );
    }

    #[test]
    fn the_same_text_without_a_key_confirms_the_fact_that_says_it() {
        let mut old = fact(1, "Allergic to nuts.", None);
        old.sources = vec![source("c1", 7)];
        let before = set(vec![old, fact(2, "Lives in Berlin", Some("home.city"))]);
        let merged = merge(
            &before,
            &[
                proposed("ALLERGIC  to nuts", None, &[7, 9]),
                proposed("lives in berlin", None, &[10]),
            ],
            &cause(),
            500,
        );
        assert_eq!(kinds(&merged), [(1, "confirmed"), (2, "confirmed")]);
        let nuts = merged.set.get(1).unwrap();
        assert_eq!(
            nuts.text, "Allergic to nuts.",
            "a confirmation keeps the text as it was"
        );
        assert_eq!(nuts.sources, [source("c1", 7), source("c2", 7), source("c2", 9)]);
        assert_eq!(
            (nuts.created_micros, nuts.updated_micros, nuts.confirmed_micros),
            (1, 500, 500)
        );
        assert_eq!(
            merged.changes[0].kind,
            ChangeKind::Confirmed {
                sources: vec![source("c2", 7), source("c2", 9)],
                key: None
            }
        );
        assert_eq!(merged.set.len(), 2);
        assert_eq!(merged.set.next_id(), before.next_id());
    }

    #[test]
    fn an_older_value_of_a_key_from_the_same_conversation_supersedes_nothing() {
        // Extractions of one conversation may land out of order: the value said at #20 was
        // applied before the one said at #10 came back.
        let mut newer = fact(1, "Lives in Hamburg", Some("home.city"));
        newer.sources = vec![source("c2", 20)];
        let before = set(vec![newer.clone()]);
        let late = merge(
            &before,
            &[proposed("Lives in Berlin", Some("home.city"), &[9, 10])],
            &cause(),
            5,
        );
        assert_eq!(late.set, before, "the newer value stays, unchanged");
        assert!(late.changes.is_empty(), "{:?}", late.changes);

        // Said later in the conversation, or in another one, it supersedes as usual.
        let later = merge(
            &before,
            &[proposed("Lives in Berlin", Some("home.city"), &[21])],
            &cause(),
            5,
        );
        assert_eq!(kinds(&later), [(1, "superseded"), (2, "added")]);
        let mut elsewhere = newer;
        elsewhere.sources = vec![source("c1", 20)];
        let other = merge(
            &set(vec![elsewhere]),
            &[proposed("Lives in Berlin", Some("home.city"), &[10])],
            &cause(),
            5,
        );
        assert_eq!(kinds(&other), [(1, "superseded"), (2, "added")]);
    }

    #[test]
    fn a_key_with_the_same_text_confirms_and_with_another_supersedes() {
        let mut home = fact(1, "Lives in Berlin", Some("home.city"));
        home.pinned = true;
        let before = set(vec![home, fact(2, "Likes tea", None)]);
        let same = merge(
            &before,
            &[proposed("Lives in Berlin!", Some("home.city"), &[1])],
            &cause(),
            50,
        );
        assert_eq!(kinds(&same), [(1, "confirmed")]);
        assert_eq!(same.set.get(1).unwrap().confirmed_micros, 50);

        let moved = merge(
            &before,
            &[proposed("Lives in Hamburg", Some("home.city"), &[2])],
            &cause(),
            60,
        );
        assert_eq!(kinds(&moved), [(1, "superseded"), (3, "added")]);
        assert_eq!(
            moved.changes[0].kind,
            ChangeKind::Superseded {
                by: 3,
                text: "Lives in Berlin".into()
            }
        );
        assert!(matches!(
            moved.changes[1].kind,
            ChangeKind::Added {
                supersedes: Some(1),
                ..
            }
        ));
        assert_eq!(moved.set.get(1), None);
        let hamburg = moved.set.by_key(&FactKey::new("home.city").unwrap()).unwrap();
        assert_eq!(
            (hamburg.id, hamburg.text.as_str(), hamburg.pinned),
            (3, "Lives in Hamburg", true)
        );
        assert_eq!(hamburg.sources, [source("c2", 2)]);
        assert_eq!(moved.set.len(), 2);
    }

    #[test]
    fn a_key_finds_its_unkeyed_twin() {
        let before = set(vec![
            fact(1, "Likes tea", None),
            fact(2, "Vegetarian", Some("diet.kind")),
        ]);
        let merged = merge(
            &before,
            &[proposed("likes tea", Some("drink.favorite"), &[4])],
            &cause(),
            9,
        );
        assert_eq!(kinds(&merged), [(1, "confirmed")]);
        assert_eq!(
            merged.changes[0].kind,
            ChangeKind::Confirmed {
                sources: vec![source("c2", 4)],
                key: Some(FactKey::new("drink.favorite").unwrap())
            }
        );
        assert_eq!(
            merged.set.get(1).unwrap().key.as_ref().unwrap().as_str(),
            "drink.favorite"
        );
        // A twin under another key is another fact.
        let merged = merge(
            &before,
            &[proposed("Vegetarian", Some("diet.since"), &[4])],
            &cause(),
            9,
        );
        assert_eq!(kinds(&merged), [(3, "added")]);
    }

    #[test]
    fn a_proposal_applies_in_order_and_sees_its_own_facts() {
        let merged = merge(
            &FactSet::default(),
            &[
                proposed("Likes tea", None, &[1]),
                proposed("likes tea.", None, &[2]),
                proposed("Lives in Berlin", Some("home.city"), &[3]),
            ],
            &cause(),
            5,
        );
        assert_eq!(kinds(&merged), [(1, "added"), (1, "confirmed"), (2, "added")]);
        assert_eq!(merged.set.get(1).unwrap().sources, [source("c2", 1), source("c2", 2)]);
    }

    #[test]
    fn nothing_proposed_nothing_changes() {
        let before = set(vec![fact(1, "Likes tea", None)]);
        assert_eq!(merge(&before, &[], &cause(), 5), Changed::unchanged(&before));
    }

    #[test]
    fn sources_stay_bounded_through_confirmations() {
        let mut s = FactSet::default();
        for seq in 0..(crate::facts::MAX_FACT_SOURCES as u64 + 20) {
            s = merge(&s, &[proposed("Likes tea", None, &[seq])], &cause(), seq as i64).set;
        }
        let tea = s.get(1).unwrap();
        assert_eq!(tea.sources.len(), crate::facts::MAX_FACT_SOURCES);
        assert_eq!(
            tea.sources.last().unwrap().seq,
            crate::facts::MAX_FACT_SOURCES as u64 + 19
        );
        assert!(FactSet::new(s.facts().to_vec(), s.next_id()).is_ok());
    }
}
