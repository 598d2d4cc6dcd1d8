//! What a person does to a user's facts by hand: [`add`], [`edit`], [`pin`], [`unpin`],
//! [`delete`]. Each is pure, returns the new set and what changed (caused
//! [`ByHand`](Cause::ByHand)), and refuses what would break a rule with a [`FactError`].

use crate::counter::TokenCounter;

use super::bounds::{FactLimits, fact_tokens, pinned_cost};
use super::change::{Cause, ChangeKind, Changed, EvictionReason, FactChange};
use super::fact::{Fact, FactSet};
use super::key::FactKey;
use super::merge::{Said, apply_one};
use super::text::{InvalidFactText, clean_text};

/// Why a change by hand was refused. Nothing of a refused change applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FactError {
    /// No current fact has this id.
    #[error("no fact has id {0}")]
    UnknownFact(u64),
    /// The text cannot be a fact's.
    #[error(transparent)]
    Text(#[from] InvalidFactText),
    /// Another current fact has the key.
    #[error("fact {by} already has key {key}")]
    KeyTaken {
        /// The key.
        key: FactKey,
        /// The fact that has it.
        by: u64,
    },
    /// Pinning would pin more facts than the user keeps.
    #[error("pinning fact {fact} would pin more than {max} facts, the most kept; unpin or delete one first")]
    TooManyPinned {
        /// The fact.
        fact: u64,
        /// [`FactLimits::max_facts`].
        max: usize,
    },
    /// Pinning (or editing a pinned fact) would make the pinned facts take more tokens than
    /// the user's facts may.
    #[error(
        "with fact {fact}, the pinned facts would take {tokens} tokens, more than the {max} the facts may; unpin or shorten one first"
    )]
    PinnedTokensPastCap {
        /// The fact.
        fact: u64,
        /// The pinned facts' tokens with the change.
        tokens: usize,
        /// [`FactLimits::max_tokens`].
        max: usize,
    },
    /// The fact would leave at once to keep the user's facts within their bounds
    /// ([`enforce`](super::enforce)): the pinned facts leave no room for it, or it alone
    /// takes more tokens than the user's facts may. Refused whole: letting it in would evict
    /// every other unpinned fact first.
    #[error("{}", no_room(*fact, *reason))]
    NoRoom {
        /// The fact (for a new fact, the id it would have had).
        fact: u64,
        /// The bound it would leave for.
        reason: EvictionReason,
    },
}

fn no_room(fact: u64, reason: EvictionReason) -> String {
    match reason {
        EvictionReason::TooManyFacts => format!(
            "fact {fact} would leave at once: the pinned facts are as many as the user keeps; unpin or delete one first"
        ),
        EvictionReason::TooManyTokens => format!(
            "fact {fact} would leave at once: with the pinned facts it takes more tokens than the user's facts may; shorten it, or unpin or delete a pinned fact first"
        ),
    }
}

/// A person's edit of a fact: what to change (`None`: leave it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FactEdit {
    /// The new text (cleaned as [`clean_text`](super::clean_text) does).
    pub text: Option<String>,
    /// The new key (`Some(None)` removes it).
    pub key: Option<Option<FactKey>>,
}

/// `set` with `text` (and `key`) added by hand, by [`merge`](super::merge)'s rules: a key
/// supersedes the current fact with it (or confirms it when the text is the same), a text the
/// same as a current fact's confirms that fact. Returns the id of the fact the text is now in.
/// A fact added by hand has no sources. The bounds are not applied:
/// [`enforce`](super::enforce) after it.
///
/// ```
/// use chatmem::facts::{FactSet, add};
/// let (one, id) = add(&FactSet::default(), "Prefers email over phone", None, &Default::default(), 5)?;
/// assert_eq!(one.set.get(id).unwrap().text, "Prefers email over phone");
/// let (again, same) = add(&one.set, "prefers email over phone.", None, &Default::default(), 6)?;
/// assert_eq!((same, again.set.len(), again.changes[0].kind.as_str()), (id, 1, "confirmed"));
/// # Ok::<(), chatmem::facts::FactError>(())
/// ```
///
/// # Errors
/// [`FactError::Text`] when the text is empty, longer than
/// [`FactLimits::max_text_bytes`] or holds a character that cannot be seen.
pub fn add(
    set: &FactSet,
    text: &str,
    key: Option<FactKey>,
    limits: &FactLimits,
    now_micros: i64,
) -> Result<(Changed, u64), FactError> {
    let text = clean_text(text, limits.max_text_bytes())?;
    let mut out = Changed::unchanged(set);
    let id = apply_one(
        &mut out,
        &Said {
            text: &text,
            key: key.as_ref(),
            sources: &[],
            cause: &Cause::ByHand,
            now: now_micros,
        },
    );
    Ok((out, id))
}

/// `set` with fact `id`'s text and key changed as `edit` says, recorded as
/// [`Edited`](ChangeKind::Edited) (updated and confirmed now). An edit that changes nothing
/// changes nothing (no entry).
///
/// # Errors
/// [`FactError::UnknownFact`]; [`FactError::Text`] for a text that cannot be a fact's;
/// [`FactError::KeyTaken`] when another fact has the new key;
/// [`FactError::PinnedTokensPastCap`] when the fact is pinned and its longer text would make
/// the pinned facts pass [`FactLimits::max_tokens`].
pub fn edit(
    set: &FactSet,
    id: u64,
    edit: FactEdit,
    limits: &FactLimits,
    counter: &dyn TokenCounter,
    now_micros: i64,
) -> Result<Changed, FactError> {
    let fact = set.get(id).ok_or(FactError::UnknownFact(id))?;
    let text = match edit.text {
        Some(text) => clean_text(&text, limits.max_text_bytes())?,
        None => fact.text.clone(),
    };
    let key = edit.key.unwrap_or_else(|| fact.key.clone());
    if let Some(key) = &key
        && let Some(holder) = set.by_key(key).filter(|f| f.id != id)
    {
        return Err(FactError::KeyTaken {
            key: key.clone(),
            by: holder.id,
        });
    }
    if text == fact.text && key == fact.key {
        return Ok(Changed::unchanged(set));
    }
    if fact.pinned {
        let (_, before) = pinned_cost(set, counter);
        let edited = Fact {
            text: text.clone(),
            ..fact.clone()
        };
        let after = before - fact_tokens(fact, counter) + fact_tokens(&edited, counter);
        if after > limits.max_tokens() && after > before {
            return Err(FactError::PinnedTokensPastCap {
                fact: id,
                tokens: after,
                max: limits.max_tokens(),
            });
        }
    }
    let mut out = set.clone();
    if let Some(fact) = out.fact_mut(id) {
        fact.text = text.clone();
        fact.key = key.clone();
        fact.updated_micros = now_micros;
        fact.confirmed_micros = now_micros;
    }
    Ok(Changed {
        set: out,
        changes: vec![by_hand(id, now_micros, ChangeKind::Edited { text, key })],
    })
}

/// `set` with fact `id` pinned (updated now): a pinned fact never leaves by the bounds. Pinning
/// a pinned fact changes nothing.
///
/// # Errors
/// [`FactError::UnknownFact`]; [`FactError::TooManyPinned`] when the pinned facts would be
/// more than [`FactLimits::max_facts`]; [`FactError::PinnedTokensPastCap`] when they would
/// take more than [`FactLimits::max_tokens`] ([`fact_tokens`](super::fact_tokens), summed).
pub fn pin(
    set: &FactSet,
    id: u64,
    limits: &FactLimits,
    counter: &dyn TokenCounter,
    now_micros: i64,
) -> Result<Changed, FactError> {
    let fact = set.get(id).ok_or(FactError::UnknownFact(id))?;
    if fact.pinned {
        return Ok(Changed::unchanged(set));
    }
    let (count, tokens) = pinned_cost(set, counter);
    if count + 1 > limits.max_facts() {
        return Err(FactError::TooManyPinned {
            fact: id,
            max: limits.max_facts(),
        });
    }
    let tokens = tokens + fact_tokens(fact, counter);
    if tokens > limits.max_tokens() {
        return Err(FactError::PinnedTokensPastCap {
            fact: id,
            tokens,
            max: limits.max_tokens(),
        });
    }
    Ok(set_pin(set, id, true, now_micros))
}

/// `set` with fact `id` unpinned (updated now): it may leave by the bounds again. Unpinning a
/// fact that is not pinned changes nothing.
///
/// # Errors
/// [`FactError::UnknownFact`].
pub fn unpin(set: &FactSet, id: u64, now_micros: i64) -> Result<Changed, FactError> {
    let fact = set.get(id).ok_or(FactError::UnknownFact(id))?;
    if !fact.pinned {
        return Ok(Changed::unchanged(set));
    }
    Ok(set_pin(set, id, false, now_micros))
}

fn set_pin(set: &FactSet, id: u64, pinned: bool, now: i64) -> Changed {
    let mut out = set.clone();
    if let Some(fact) = out.fact_mut(id) {
        fact.pinned = pinned;
        fact.updated_micros = now;
    }
    let kind = if pinned {
        ChangeKind::Pinned
    } else {
        ChangeKind::Unpinned
    };
    Changed {
        set: out,
        changes: vec![by_hand(id, now, kind)],
    }
}

/// `set` without fact `id`, and the fact. A deletion leaves no history entry: a person deletes
/// to forget, so the store deletes the fact's history with it.
///
/// # Errors
/// [`FactError::UnknownFact`].
pub fn delete(set: &FactSet, id: u64) -> Result<(FactSet, Fact), FactError> {
    let mut out = set.clone();
    let fact = out.remove(id).ok_or(FactError::UnknownFact(id))?;
    Ok((out, fact))
}

fn by_hand(fact: u64, at_micros: i64, kind: ChangeKind) -> FactChange {
    FactChange {
        fact,
        at_micros,
        cause: Cause::ByHand,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Heuristic;
    use crate::facts::fact::tests::fact;

    fn set(facts: Vec<Fact>) -> FactSet {
        let next = facts.iter().map(|f| f.id).max().unwrap_or(0) + 1;
        FactSet::new(facts, next).unwrap()
    }

    fn key(k: &str) -> FactKey {
        FactKey::new(k).unwrap()
    }

    fn limits() -> FactLimits {
        FactLimits::default()
    }

    #[test]
    fn add_by_hand_follows_merges_rules_and_says_where_the_text_is() {
        let (one, id) = add(
            &FactSet::default(),
            "  Lives in\nBerlin ",
            Some(key("home.city")),
            &limits(),
            10,
        )
        .unwrap();
        assert_eq!(id, 1);
        let fact = one.set.get(1).unwrap();
        assert_eq!((fact.text.as_str(), fact.sources.len()), ("Lives in Berlin", 0));
        assert_eq!(one.changes[0].cause, Cause::ByHand);
        let (two, id) = add(&one.set, "Lives in Hamburg", Some(key("home.city")), &limits(), 20).unwrap();
        assert_eq!(id, 2);
        assert_eq!(
            two.changes
                .iter()
                .map(|c| (c.fact, c.kind.as_str()))
                .collect::<Vec<_>>(),
            [(1, "superseded"), (2, "added")]
        );
        let (three, id) = add(&two.set, "lives in hamburg", None, &limits(), 30).unwrap();
        assert_eq!(
            (id, three.changes[0].kind.as_str(), three.set.len()),
            (2, "confirmed", 1)
        );
        assert_eq!(
            add(&FactSet::default(), " ", None, &limits(), 1).unwrap_err(),
            FactError::Text(InvalidFactText::Empty)
        );
        let short = limits().with_max_text_bytes(3).unwrap();
        assert_eq!(
            add(&FactSet::default(), "abcd", None, &short, 1)
                .unwrap_err()
                .to_string(),
            "fact text is 4 bytes long; the limit is 3"
        );
    }

    #[test]
    fn edit_changes_text_and_key_and_refuses_a_taken_key() {
        let before = set(vec![
            fact(1, "Likes tea", None),
            fact(2, "Lives in Berlin", Some("home.city")),
        ]);
        let edited = edit(
            &before,
            1,
            FactEdit {
                text: Some("Likes green\ttea".into()),
                key: Some(Some(key("drink.favorite"))),
            },
            &limits(),
            &Heuristic,
            77,
        )
        .unwrap();
        let f = edited.set.get(1).unwrap();
        assert_eq!(
            (f.text.as_str(), f.key.as_ref().map(FactKey::as_str)),
            ("Likes green tea", Some("drink.favorite"))
        );
        assert_eq!((f.created_micros, f.updated_micros, f.confirmed_micros), (1, 77, 77));
        assert_eq!(
            edited.changes,
            [FactChange {
                fact: 1,
                at_micros: 77,
                cause: Cause::ByHand,
                kind: ChangeKind::Edited {
                    text: "Likes green tea".into(),
                    key: Some(key("drink.favorite"))
                }
            }]
        );
        // The key removed, the text kept.
        let unkeyed = edit(
            &before,
            2,
            FactEdit {
                key: Some(None),
                ..FactEdit::default()
            },
            &limits(),
            &Heuristic,
            5,
        )
        .unwrap();
        assert_eq!(unkeyed.set.get(2).unwrap().key, None);
        assert_eq!(unkeyed.set.get(2).unwrap().text, "Lives in Berlin");
        // Nothing changed: no entry.
        let same = FactEdit {
            text: Some(" Likes tea ".into()),
            key: Some(None),
        };
        assert_eq!(
            edit(&before, 1, same, &limits(), &Heuristic, 5).unwrap(),
            Changed::unchanged(&before)
        );
        // A key another fact has; its own key is fine.
        let taken = FactEdit {
            key: Some(Some(key("home.city"))),
            ..FactEdit::default()
        };
        assert_eq!(
            edit(&before, 1, taken.clone(), &limits(), &Heuristic, 5),
            Err(FactError::KeyTaken {
                key: key("home.city"),
                by: 2
            })
        );
        assert!(
            edit(&before, 2, taken, &limits(), &Heuristic, 5)
                .unwrap()
                .changes
                .is_empty()
        );
        assert_eq!(
            edit(&before, 9, FactEdit::default(), &limits(), &Heuristic, 5),
            Err(FactError::UnknownFact(9))
        );
        let bad = FactEdit {
            text: Some("a\u{202e}".into()),
            ..FactEdit::default()
        };
        assert_eq!(
            edit(&before, 1, bad, &limits(), &Heuristic, 5),
            Err(FactError::Text(InvalidFactText::InvisibleCharacter(1)))
        );
    }

    #[test]
    fn a_pinned_fact_cannot_grow_the_pinned_facts_past_the_tokens() {
        let mut pinned = fact(1, "short", None);
        pinned.pinned = true;
        let before = set(vec![pinned]);
        // "- short" costs 2 + 1; the cap is 4.
        let tight = limits().with_max_tokens(4).unwrap();
        let longer = FactEdit {
            text: Some("much longer text".into()),
            ..FactEdit::default()
        };
        let e = edit(&before, 1, longer.clone(), &tight, &Heuristic, 5).unwrap_err();
        assert_eq!(
            e,
            FactError::PinnedTokensPastCap {
                fact: 1,
                tokens: 6,
                max: 4
            }
        );
        assert!(e.to_string().contains("would take 6 tokens, more than the 4"), "{e}");
        // Unpinned, it may grow (the bounds then decide).
        let unpinned = set(vec![fact(1, "short", None)]);
        assert!(edit(&unpinned, 1, longer, &tight, &Heuristic, 5).is_ok());
        // Past the cap already (a lowered limit), a shorter text is still allowed.
        let tiny = limits().with_max_tokens(1).unwrap();
        let shorter = FactEdit {
            text: Some("s".into()),
            ..FactEdit::default()
        };
        assert!(edit(&before, 1, shorter, &tiny, &Heuristic, 5).is_ok());
    }

    #[test]
    fn pin_refuses_past_the_bounds_and_unpin_undoes_it() {
        let before = set(vec![fact(1, "one", None), fact(2, "two", None), fact(3, "three", None)]);
        let pinned = pin(&before, 1, &limits(), &Heuristic, 9).unwrap();
        let f = pinned.set.get(1).unwrap();
        assert!(f.pinned);
        assert_eq!((f.updated_micros, f.confirmed_micros), (9, 1));
        assert_eq!(pinned.changes[0].kind, ChangeKind::Pinned);
        // Again: nothing changes.
        assert_eq!(
            pin(&pinned.set, 1, &limits(), &Heuristic, 10).unwrap(),
            Changed::unchanged(&pinned.set)
        );

        let two = limits().with_max_facts(2).unwrap();
        let both = pin(&pinned.set, 2, &two, &Heuristic, 10).unwrap();
        let e = pin(&both.set, 3, &two, &Heuristic, 11).unwrap_err();
        assert_eq!(e, FactError::TooManyPinned { fact: 3, max: 2 });
        assert!(e.to_string().contains("would pin more than 2 facts"), "{e}");

        // "- one" and "- two" cost 3 each (2 + the break).
        let six = limits().with_max_tokens(6).unwrap();
        let both = pin(&pinned.set, 2, &six, &Heuristic, 10).unwrap();
        assert_eq!(
            pin(&both.set, 3, &six, &Heuristic, 11),
            Err(FactError::PinnedTokensPastCap {
                fact: 3,
                tokens: 9,
                max: 6
            })
        );
        assert_eq!(
            pin(&before, 7, &limits(), &Heuristic, 1),
            Err(FactError::UnknownFact(7))
        );

        let unpinned = unpin(&both.set, 2, 12).unwrap();
        assert!(!unpinned.set.get(2).unwrap().pinned);
        assert_eq!(unpinned.set.get(2).unwrap().updated_micros, 12);
        assert_eq!(unpinned.changes[0].kind, ChangeKind::Unpinned);
        assert_eq!(unpin(&before, 2, 12).unwrap(), Changed::unchanged(&before));
        assert_eq!(unpin(&before, 7, 12), Err(FactError::UnknownFact(7)));
    }

    #[test]
    fn delete_removes_the_fact_and_keeps_ids_unused() {
        let before = set(vec![fact(1, "one", None), fact(2, "two", Some("k"))]);
        let (after, gone) = delete(&before, 2).unwrap();
        assert_eq!(gone.text, "two");
        assert_eq!(after.facts().iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
        assert_eq!(after.next_id(), 3);
        assert_eq!(after.by_key(&key("k")), None);
        assert_eq!(delete(&after, 2), Err(FactError::UnknownFact(2)));
        assert_eq!(FactError::UnknownFact(2).to_string(), "no fact has id 2");
    }
}
