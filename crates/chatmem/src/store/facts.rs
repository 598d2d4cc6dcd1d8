//! What a store moves for [facts](crate::facts): a user's facts as loaded ([`StoredFacts`]) and
//! one atomic, version-checked write of them ([`FactsCommit`]), built only from what was loaded
//! and a change made by the pure rules, so that it is never invalid.

use std::collections::BTreeSet;

use crate::commit::new_token;
use crate::error::{StoreError, StoreErrorKind};
use crate::facts::{ChangeKind, Changed, FactChange, FactSet};

/// A user's facts as a store keeps them: the current set (with the id the next new fact gets)
/// and the version every facts commit bumps. An unknown user, and one forgotten, is
/// [`StoredFacts::default`]: no facts, next id 1, version 0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredFacts {
    /// The current facts.
    pub set: FactSet,
    /// The version of the user's facts: 0 for an unknown user, bumped by every commit.
    pub version: u64,
}

/// One atomic write of a user's facts: what [`Store::commit_facts`](crate::Store::commit_facts)
/// applies if the user's facts are still at [`expected_version`](FactsCommit::expected_version).
///
/// Built only on the [`StoredFacts`] it changes, from what the pure rules of
/// [`facts`](crate::facts) made of them: [`FactsCommit::new`] for a [`Changed`] (an
/// extraction's [`merge`](crate::facts::merge) and [`enforce`](crate::facts::enforce), an
/// [`add`](crate::facts::add), [`edit`](crate::facts::edit), [`pin`](crate::facts::pin) or
/// [`unpin`](crate::facts::unpin) by hand), [`FactsCommit::deleting`] for a deletion. Each
/// checks the change against what was loaded, so no store re-checks a commit: since every
/// commit bumps the version, a store that finds the user still at the expected version knows
/// what was loaded still holds.
///
/// Applying it means: replace the current set with [`set`](FactsCommit::set) (its next id
/// included), drop the history of the facts in [`dropped`](FactsCommit::dropped), append
/// [`history`](FactsCommit::history) in its order after what the user's history already
/// holds, bump the version, keep the [`token`](FactsCommit::token).
///
/// ```
/// use chatmem::facts::{Changed, add};
/// use chatmem::store::{FactsCommit, StoredFacts};
/// let loaded = StoredFacts::default();
/// let (added, id) = add(&loaded.set, "Prefers email over phone", None, &Default::default(), 5)?;
/// let commit = FactsCommit::new(&loaded, added)?.expect("something changed");
/// assert_eq!(commit.expected_version(), 0);
/// assert_eq!(commit.set().get(id).unwrap().text, "Prefers email over phone");
/// assert_eq!(commit.history()[0].kind.as_str(), "added");
///
/// // Nothing changed, nothing to commit; a set changed with no history is refused.
/// let unchanged = Changed { set: loaded.set.clone(), changes: Vec::new() };
/// assert_eq!(FactsCommit::new(&loaded, unchanged)?, None);
/// let silent = Changed { set: commit.set().clone(), changes: Vec::new() };
/// assert!(FactsCommit::new(&loaded, silent).is_err(), "a fact may not appear with no history");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactsCommit {
    token: u64,
    expected_version: u64,
    set: FactSet,
    history: Vec<FactChange>,
    dropped: Vec<u64>,
}

fn invalid(why: String) -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, why)
}

impl FactsCommit {
    /// The commit of `changed`, made by the pure rules from `loaded.set`; `None` when nothing
    /// changed (no history entry, the same set).
    ///
    /// Checked against `loaded`, so that what a store writes keeps the rules whatever built
    /// the [`Changed`]: ids only grow (the next id never goes back, a fact not loaded has an
    /// id from the loaded next id on, so no id is reused); every fact made or changed has a
    /// history entry, and a new fact's begins with [`Added`](ChangeKind::Added); a fact leaves
    /// the set exactly when it is [`Superseded`](ChangeKind::Superseded) or
    /// [`Evicted`](ChangeKind::Evicted) (deleting is [`FactsCommit::deleting`]'s); every entry
    /// is of a loaded fact or a new one.
    ///
    /// # Errors
    /// A [`StoreError`] of kind `InvalidInput` naming the first rule broken.
    pub fn new(loaded: &StoredFacts, changed: Changed) -> Result<Option<Self>, StoreError> {
        let (before, after) = (&loaded.set, &changed.set);
        if changed.changes.is_empty() {
            if after == before {
                return Ok(None);
            }
            return Err(invalid("the facts changed with no history entry".into()));
        }
        if after.next_id() < before.next_id() {
            return Err(invalid(format!(
                "the next fact id went back from {} to {}: ids are never reused",
                before.next_id(),
                after.next_id()
            )));
        }
        let with_entries: BTreeSet<u64> = changed.changes.iter().map(|c| c.fact).collect();
        for &id in &with_entries {
            if before.get(id).is_none() && !(before.next_id()..after.next_id()).contains(&id) {
                return Err(invalid(format!(
                    "a history entry for fact {id}, which is neither a current fact nor a new one"
                )));
            }
            // So that every fact's history, as a store keeps it, begins with its making.
            let first = changed.changes.iter().find(|c| c.fact == id).map(|c| &c.kind);
            if before.get(id).is_none() && !matches!(first, Some(ChangeKind::Added { .. })) {
                return Err(invalid(format!(
                    "new fact {id}'s history does not begin with its adding"
                )));
            }
        }
        let leaves = |c: &&FactChange| matches!(c.kind, ChangeKind::Superseded { .. } | ChangeKind::Evicted { .. });
        if let Some(left) = changed
            .changes
            .iter()
            .filter(leaves)
            .find(|c| after.get(c.fact).is_some())
        {
            return Err(invalid(format!(
                "fact {} is recorded as {} but is still current",
                left.fact,
                left.kind.as_str()
            )));
        }
        for fact in after.facts() {
            match before.get(fact.id) {
                Some(old) if old == fact => {}
                Some(_) if !with_entries.contains(&fact.id) => {
                    return Err(invalid(format!("fact {} changed with no history entry", fact.id)));
                }
                Some(_) => {}
                None if fact.id < before.next_id() => {
                    return Err(invalid(format!(
                        "fact {} is not current and cannot come back: ids are never reused",
                        fact.id
                    )));
                }
                None if !with_entries.contains(&fact.id) => {
                    return Err(invalid(format!("new fact {} has no history entry", fact.id)));
                }
                None => {}
            }
        }
        for fact in before.facts() {
            let recorded = || {
                changed.changes.iter().any(|c| {
                    c.fact == fact.id && matches!(c.kind, ChangeKind::Superseded { .. } | ChangeKind::Evicted { .. })
                })
            };
            if after.get(fact.id).is_none() && !recorded() {
                return Err(invalid(format!(
                    "fact {} left without being superseded or evicted (a deletion is FactsCommit::deleting's)",
                    fact.id
                )));
            }
        }
        Ok(Some(Self {
            token: new_token(),
            expected_version: loaded.version,
            set: changed.set,
            history: changed.changes,
            dropped: Vec::new(),
        }))
    }

    /// The commit that deletes `facts` by hand, each with its history: a current fact leaves
    /// the set, a past one (superseded or evicted) loses the history it kept. No history entry
    /// is written (a person deletes to forget), and the next id stays, so a deleted id is never
    /// given again. Repeats are ignored; `None` when `facts` is empty.
    ///
    /// Which facts go together is the caller's to say: a fact's past versions (the facts its
    /// [`Added`](ChangeKind::Added) entry `supersedes`, in turn) keep their own history, texts
    /// included, unless they are deleted too.
    ///
    /// ```
    /// use chatmem::facts::{FactKey, add};
    /// use chatmem::store::{FactsCommit, StoredFacts};
    /// let key = FactKey::new("home.city")?;
    /// let (one, _) = add(&Default::default(), "Lives in Berlin", Some(key.clone()), &Default::default(), 1)?;
    /// let (two, now) = add(&one.set, "Lives in Hamburg", Some(key), &Default::default(), 2)?;
    /// let loaded = StoredFacts { set: two.set, version: 2 };
    /// // The current fact and the one it superseded.
    /// let commit = FactsCommit::deleting(&loaded, &[now, 1])?.expect("something to delete");
    /// assert!(commit.set().is_empty());
    /// assert_eq!(commit.set().next_id(), 3);
    /// assert_eq!(commit.dropped(), [1, 2]);
    /// assert!(FactsCommit::deleting(&loaded, &[3]).is_err(), "fact 3 was never made");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A [`StoreError`] of kind `InvalidInput` for an id never given (0, or from the next id
    /// on).
    pub fn deleting(loaded: &StoredFacts, facts: &[u64]) -> Result<Option<Self>, StoreError> {
        let mut set = loaded.set.clone();
        let mut dropped: Vec<u64> = facts.to_vec();
        dropped.sort_unstable();
        dropped.dedup();
        if dropped.is_empty() {
            return Ok(None);
        }
        for &id in &dropped {
            if id == 0 || id >= set.next_id() {
                return Err(invalid(format!("fact {id} was never made")));
            }
            set.remove(id);
        }
        Ok(Some(Self {
            token: new_token(),
            expected_version: loaded.version,
            set,
            history: Vec::new(),
            dropped,
        }))
    }

    /// The version the writer loaded; the commit fails with a conflict if it changed.
    pub fn expected_version(&self) -> u64 {
        self.expected_version
    }

    /// A random token that tells this commit from every other (never 0). A store keeps the
    /// token of the user's last facts commit, so a commit sent again after its reply was lost
    /// is answered with the version it made instead of being applied twice, as
    /// [`Commit::token`](crate::store::Commit::token) is.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The user's facts after the commit: they replace the current ones.
    pub fn set(&self) -> &FactSet {
        &self.set
    }

    /// The history entries to append, in the order they happened.
    pub fn history(&self) -> &[FactChange] {
        &self.history
    }

    /// The facts whose history goes (deleted by hand), ascending; the store drops their
    /// history before appending [`history`](FactsCommit::history).
    pub fn dropped(&self) -> &[u64] {
        &self.dropped
    }

    /// The commit's parts, for a store to write: the set, the history entries, the facts
    /// whose history goes.
    pub fn into_parts(self) -> (FactSet, Vec<FactChange>, Vec<u64>) {
        (self.set, self.history, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Heuristic;
    use crate::facts::{Cause, FactKey, FactLimits, Shown, add, enforce, merge, parse_proposal, pin};
    use crate::id::ConversationId;

    fn added(texts: &[(&str, Option<&str>)]) -> StoredFacts {
        let mut set = FactSet::default();
        for (i, (text, key)) in texts.iter().enumerate() {
            let key = key.map(|k| FactKey::new(k).unwrap());
            set = add(&set, text, key, &FactLimits::default(), i as i64).unwrap().0.set;
        }
        StoredFacts { set, version: 4 }
    }

    fn kind(e: StoreError) -> (StoreErrorKind, String) {
        (e.kind(), e.context().to_owned())
    }

    #[test]
    fn what_the_rules_make_commits_and_no_change_is_none() {
        let loaded = added(&[("Lives in Berlin", Some("home.city")), ("Likes tea", None)]);
        let c1 = ConversationId::new("c1").unwrap();
        let shown = Shown::new(c1.clone(), [7, 8]);
        let limits = FactLimits::default().with_max_facts(2).unwrap();
        let proposal = parse_proposal(
            r#"{"facts": [{"text": "Lives in Hamburg", "key": "home.city", "sources": [7]},
                {"text": "Allergic to nuts", "sources": [8]}]}"#,
            &shown,
            &limits,
        )
        .unwrap();
        let cause = Cause::Extraction { conversation: c1 };
        let merged = merge(&loaded.set, &proposal, &cause, 100);
        let bounded = enforce(&merged.set, &limits, &Heuristic, &cause, 100);
        let changed = merged.then(bounded);
        let kinds: Vec<&str> = changed.changes.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["superseded", "added", "added", "evicted"]);
        let commit = FactsCommit::new(&loaded, changed.clone()).unwrap().unwrap();
        assert_eq!(commit.expected_version(), 4);
        assert_ne!(commit.token(), 0);
        assert_eq!(commit.set(), &changed.set);
        assert_eq!(commit.history(), changed.changes);
        assert!(commit.dropped().is_empty());
        let again = FactsCommit::new(&loaded, changed).unwrap().unwrap();
        assert_ne!(again.token(), commit.token(), "every commit has its own token");

        let pinned = pin(&loaded.set, 2, &limits, &Heuristic, 5).unwrap();
        let pinning = FactsCommit::new(&loaded, pinned.clone()).unwrap().unwrap();
        assert_eq!(pinning.history()[0].kind, ChangeKind::Pinned);
        // Pinning it again changes nothing: nothing to commit.
        let on_it = StoredFacts {
            set: pinned.set,
            version: 5,
        };
        let again = pin(&on_it.set, 2, &limits, &Heuristic, 6).unwrap();
        assert!(again.changes.is_empty());
        assert_eq!(FactsCommit::new(&on_it, again).unwrap(), None);
    }

    #[test]
    fn a_change_that_breaks_a_rule_is_refused() {
        let loaded = added(&[("one", None), ("two", Some("k")), ("three", None)]);
        let (two_more, _) = add(&loaded.set, "four", None, &FactLimits::default(), 9).unwrap();
        let entry = two_more.changes[0].clone();

        // A fact gone without a record: the model never deletes.
        let (without, _) = crate::facts::delete(&loaded.set, 2).unwrap();
        let silent = Changed {
            set: without.clone(),
            changes: vec![FactChange {
                fact: 1,
                ..entry.clone()
            }],
        };
        let (k, why) = kind(FactsCommit::new(&loaded, silent).unwrap_err());
        assert_eq!(k, StoreErrorKind::InvalidInput);
        assert!(why.contains("fact 2 left without being superseded or evicted"), "{why}");

        // The facts changed with no entry at all.
        let (k, why) = kind(
            FactsCommit::new(
                &loaded,
                Changed {
                    set: without,
                    changes: Vec::new(),
                },
            )
            .unwrap_err(),
        );
        assert_eq!(k, StoreErrorKind::InvalidInput);
        assert!(why.contains("no history entry"), "{why}");

        // A changed fact with no entry of its own.
        let mut facts = loaded.set.facts().to_vec();
        facts[0].text = "uno".into();
        let edited = FactSet::new(facts, loaded.set.next_id()).unwrap();
        let why = FactsCommit::new(
            &loaded,
            Changed {
                set: edited,
                changes: vec![FactChange {
                    fact: 3,
                    ..entry.clone()
                }],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("fact 1 changed with no history entry"), "{why}");

        // The next id going back, and an entry for a fact never made.
        let mut facts = two_more.set.facts().to_vec();
        facts.pop();
        let back = FactSet::new(facts.clone(), 3 + 1).unwrap();
        let why = FactsCommit::new(
            &StoredFacts {
                set: two_more.set.clone(),
                version: 1,
            },
            Changed {
                set: back,
                changes: vec![entry.clone()],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("went back from 5 to 4"), "{why}");
        let why = FactsCommit::new(
            &loaded,
            Changed {
                set: loaded.set.clone(),
                changes: vec![FactChange {
                    fact: 9,
                    ..entry.clone()
                }],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("fact 9, which is neither"), "{why}");

        // A deleted fact's id coming back.
        let (gone, _) = crate::facts::delete(&loaded.set, 2).unwrap();
        let after_delete = StoredFacts { set: gone, version: 5 };
        let why = FactsCommit::new(
            &after_delete,
            Changed {
                set: loaded.set.clone(),
                changes: vec![FactChange {
                    fact: 2,
                    ..entry.clone()
                }],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("fact 2, which is neither"), "{why}");

        // A new fact with no entry.
        let why = FactsCommit::new(
            &loaded,
            Changed {
                set: two_more.set.clone(),
                changes: vec![FactChange { fact: 1, ..entry }],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("new fact 4 has no history entry"), "{why}");

        // A new fact whose history begins with something other than its adding.
        let confirmed = FactChange {
            kind: ChangeKind::Confirmed {
                sources: Vec::new(),
                key: None,
            },
            ..two_more.changes[0].clone()
        };
        let why = FactsCommit::new(
            &loaded,
            Changed {
                set: two_more.set.clone(),
                changes: vec![confirmed, two_more.changes[0].clone()],
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            why.contains("new fact 4's history does not begin with its adding"),
            "{why}"
        );

        // A fact recorded as gone that is still current.
        let mut changes = two_more.changes.clone();
        changes.push(FactChange {
            fact: 1,
            at_micros: 9,
            cause: Cause::ByHand,
            kind: ChangeKind::Evicted {
                reason: crate::facts::EvictionReason::TooManyFacts,
                text: "one".into(),
            },
        });
        let why = FactsCommit::new(
            &loaded,
            Changed {
                set: two_more.set.clone(),
                changes,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            why.contains("fact 1 is recorded as evicted but is still current"),
            "{why}"
        );
    }

    #[test]
    fn deleting_takes_current_and_past_facts_and_keeps_the_next_id() {
        let loaded = added(&[("one", Some("k")), ("uno", Some("k")), ("two", None)]);
        assert_eq!(
            loaded.set.facts().iter().map(|f| f.id).collect::<Vec<_>>(),
            [2, 3],
            "fact 1 was superseded"
        );
        let commit = FactsCommit::deleting(&loaded, &[3, 1, 3]).unwrap().unwrap();
        assert_eq!(commit.set().facts().iter().map(|f| f.id).collect::<Vec<_>>(), [2]);
        assert_eq!(commit.set().next_id(), loaded.set.next_id());
        assert_eq!(commit.dropped(), [1, 3]);
        assert!(commit.history().is_empty());
        assert_eq!(commit.expected_version(), 4);
        let (set, history, dropped) = commit.into_parts();
        assert_eq!((set.len(), history.len(), dropped), (1, 0, vec![1, 3]));
        assert_eq!(FactsCommit::deleting(&loaded, &[]).unwrap(), None);
        for never in [0, 4, u64::MAX] {
            let e = FactsCommit::deleting(&loaded, &[2, never]).unwrap_err();
            assert_eq!(
                kind(e),
                (StoreErrorKind::InvalidInput, format!("fact {never} was never made"))
            );
        }
    }
}
