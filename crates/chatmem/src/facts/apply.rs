//! [`apply_facts`]: the one way a change reaches a user's facts in a [`Store`] — made on what
//! was loaded, committed if nothing changed since, made again on what is there if another
//! writer got in between.

use crate::error::{StoreError, StoreErrorKind};
use crate::store::{FactsCommit, Store, StoredFacts};
use crate::turn::backoff;

use super::change::FactChange;
use super::user_id::UserId;

/// How many times [`apply_facts`] loads, changes and commits before it gives up on other
/// writers that keep changing the user's facts first. Fewer than a turn's
/// ([`DEFAULT_MAX_ATTEMPTS`](crate::DEFAULT_MAX_ATTEMPTS)): a user's facts have few writers
/// (an extraction off the turn's path, a person's edit), so losing eight times in a row says
/// something is wrong, and every attempt reloads the whole set.
pub const FACTS_ATTEMPTS: u32 = 8;

/// What [`apply_facts`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The user's facts after it: as committed, at the new version; as loaded when the change
    /// made no commit.
    pub facts: StoredFacts,
    /// The history entries written, in order (none when nothing was committed, nor for a
    /// deletion, which writes none).
    pub history: Vec<FactChange>,
    /// Whether a commit was written.
    pub committed: bool,
    /// How many times the facts were loaded and the change made: 1 unless other writers
    /// committed in between.
    pub attempts: u32,
}

/// Applies a change to `user`'s facts in `store`: loads them ([`Store::load_facts`]), has
/// `change` build the commit from what was loaded ([`FactsCommit::new`] of a pure rule's
/// result, or [`FactsCommit::deleting`]; `None` for no change) and commits it
/// ([`Store::commit_facts`]). When another writer committed in between (a lost version check,
/// the one rule a turn's commit retries on too, waiting as it does), it loads again and calls
/// `change` again on what it finds, so a change is always made on the newest facts and never
/// writes over them: two extractions at once both land, a person's edit is never undone by an
/// extraction made before it.
///
/// `change` may be called up to [`FACTS_ATTEMPTS`] times, each time on newer facts; it should
/// be a function of what it is given (capture the proposal, not a set loaded earlier).
///
/// ```
/// use chatmem::InMemoryStore;
/// use chatmem::facts::{FactLimits, UserId, add, apply_facts};
/// use chatmem::store::FactsCommit;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = InMemoryStore::new();
/// let user = UserId::new("app-user-42")?;
/// let applied = apply_facts(&store, &user, |loaded| {
///     let (added, _) = add(&loaded.set, "Prefers email over phone", None, &FactLimits::default(), 5)
///         .map_err(|e| chatmem::store::StoreError::new(chatmem::store::StoreErrorKind::InvalidInput, e.to_string()))?;
///     FactsCommit::new(loaded, added)
/// })
/// .await?;
/// assert!(applied.committed);
/// assert_eq!((applied.facts.version, applied.attempts), (1, 1));
/// assert_eq!(chatmem::Store::load_facts(&store, &user).await?, applied.facts);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// Whatever `change` returns (nothing is committed); `InvalidInput` when `change` built its
/// commit on other facts than it was given (a version other than the loaded one); the store's
/// error for a failed load or commit; a `Conflict` when other writers won
/// [`FACTS_ATTEMPTS`] times.
pub async fn apply_facts<S, F>(store: &S, user: &UserId, mut change: F) -> Result<Applied, StoreError>
where
    S: Store + ?Sized,
    F: FnMut(&StoredFacts) -> Result<Option<FactsCommit>, StoreError>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let loaded = store.load_facts(user).await?;
        let Some(commit) = change(&loaded)? else {
            return Ok(Applied {
                facts: loaded,
                history: Vec::new(),
                committed: false,
                attempts: attempt,
            });
        };
        if commit.expected_version() != loaded.version {
            // Built on facts loaded earlier: it would lose every version check.
            return Err(StoreError::new(
                StoreErrorKind::InvalidInput,
                format!(
                    "the facts commit expects version {} but was made on version {}: build it from the facts given",
                    commit.expected_version(),
                    loaded.version
                ),
            ));
        }
        let (set, history) = (commit.set().clone(), commit.history().to_vec());
        match store.commit_facts(user, commit).await {
            Ok(version) => {
                return Ok(Applied {
                    facts: StoredFacts { set, version },
                    history,
                    committed: true,
                    attempts: attempt,
                });
            }
            Err(e) if e.is_conflict() && attempt < FACTS_ATTEMPTS => {
                tracing::debug!(attempt, "a facts commit lost a version check; reloading");
                backoff(attempt).await;
            }
            Err(e) if e.is_conflict() => {
                return Err(StoreError::new(
                    StoreErrorKind::Conflict,
                    format!("other writers kept changing the user's facts; gave up after {attempt} attempts"),
                )
                .with_source(e));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::InMemoryStore;
    use crate::facts::{FactLimits, FactSet, add};
    use crate::test_support::{block_on, over_inner_store};

    fn by_hand(e: crate::facts::FactError) -> StoreError {
        StoreError::new(StoreErrorKind::InvalidInput, e.to_string())
    }

    /// `text` added to `loaded`, as a commit.
    fn adding(loaded: &StoredFacts, text: &str) -> Result<Option<FactsCommit>, StoreError> {
        let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1).map_err(by_hand)?;
        FactsCommit::new(loaded, added)
    }

    fn texts(set: &FactSet) -> Vec<&str> {
        set.facts().iter().map(|f| f.text.as_str()).collect()
    }

    /// A store that keeps conversations only: the facts calls are the trait's defaults.
    #[derive(Debug, Default)]
    struct NoFacts {
        inner: InMemoryStore,
    }

    over_inner_store!(NoFacts {});

    /// An in-memory store where, before each of the next `rivals` facts commits, another
    /// writer adds a fact of its own: the commit then finds the facts changed since they
    /// were loaded.
    #[derive(Debug, Default)]
    struct Racing {
        inner: InMemoryStore,
        rivals: AtomicU32,
        rival_commits: AtomicU32,
    }

    over_inner_store!(Racing {
        fn keeps_facts(&self) -> bool {
            true
        }
        async fn load_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
            self.inner.load_facts(user).await
        }
        async fn commit_facts(&self, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
            if self.rivals.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                let n = self.rival_commits.fetch_add(1, Ordering::SeqCst);
                let loaded = self.inner.load_facts(user).await?;
                let rival = adding(&loaded, &format!("rival {n}"))?.expect("a new fact");
                self.inner.commit_facts(user, rival).await?;
            }
            self.inner.commit_facts(user, commit).await
        }
    });

    #[test]
    fn a_change_that_lost_is_made_again_on_the_newer_facts() {
        block_on(async {
            let store = Racing::default();
            store.rivals.store(2, Ordering::SeqCst);
            let user = UserId::new("u").unwrap();
            let mut seen = Vec::new();
            let applied = apply_facts(&store, &user, |loaded| {
                seen.push(loaded.version);
                adding(loaded, "mine")
            })
            .await
            .unwrap();
            assert_eq!(seen, [0, 1, 2], "made again on each newer version");
            assert_eq!((applied.attempts, applied.committed), (3, true));
            assert_eq!(applied.facts.version, 3);
            assert_eq!(texts(&applied.facts.set), ["rival 0", "rival 1", "mine"]);
            assert_eq!(applied.history.len(), 1);
            assert_eq!(applied.history[0].fact, 3);
            assert_eq!(store.load_facts(&user).await.unwrap(), applied.facts);
        });
    }

    #[test]
    fn writers_that_keep_winning_make_it_give_up_with_a_conflict_having_written_nothing() {
        block_on(async {
            let store = Racing::default();
            store.rivals.store(100, Ordering::SeqCst);
            let user = UserId::new("u").unwrap();
            let mut calls = 0;
            let e = apply_facts(&store, &user, |loaded| {
                calls += 1;
                adding(loaded, "mine")
            })
            .await
            .unwrap_err();
            assert!(e.is_conflict(), "{e}");
            assert!(e.to_string().contains("gave up after 8 attempts"), "{e}");
            assert_eq!(calls, FACTS_ATTEMPTS);
            let now = store.load_facts(&user).await.unwrap();
            assert_eq!(now.set.len(), FACTS_ATTEMPTS as usize);
            assert!(!texts(&now.set).contains(&"mine"));
        });
    }

    #[test]
    fn no_change_commits_nothing_and_a_refused_change_stops_at_once() {
        block_on(async {
            let store = InMemoryStore::new();
            let user = UserId::new("u").unwrap();
            apply_facts(&store, &user, |l| adding(l, "one")).await.unwrap();
            let same = apply_facts(&store, &user, |_| Ok(None)).await.unwrap();
            assert!(!same.committed);
            assert_eq!((same.facts.version, same.attempts), (1, 1));
            assert!(same.history.is_empty());

            let mut calls = 0;
            let e = apply_facts(&store, &user, |l| {
                calls += 1;
                adding(l, "  ")
            })
            .await
            .unwrap_err();
            assert_eq!((e.kind(), calls), (StoreErrorKind::InvalidInput, 1));
            assert_eq!(store.load_facts(&user).await.unwrap().version, 1);
        });
    }

    #[test]
    fn a_commit_built_on_other_facts_than_those_given_is_refused() {
        block_on(async {
            let store = InMemoryStore::new();
            let user = UserId::new("u").unwrap();
            let stale = StoredFacts::default();
            apply_facts(&store, &user, |l| adding(l, "one")).await.unwrap();
            let e = apply_facts(&store, &user, |_| adding(&stale, "two")).await.unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
            assert!(
                e.to_string().contains("expects version 0 but was made on version 1"),
                "{e}"
            );
        });
    }

    #[test]
    fn a_store_without_facts_says_so() {
        block_on(async {
            let store = NoFacts::default();
            assert!(!store.keeps_facts());
            let user = UserId::new("u").unwrap();
            let e = apply_facts(&store, &user, |l| adding(l, "one")).await.unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
            assert!(e.to_string().contains("keeps no facts"), "{e}");
            // Through a shared pointer too (the forwarding keeps the default's answer).
            let shared: std::sync::Arc<dyn Store> = std::sync::Arc::new(store);
            assert!(!shared.keeps_facts());
            for e in [
                shared
                    .commit_facts(&user, adding(&StoredFacts::default(), "one").unwrap().unwrap())
                    .await
                    .unwrap_err(),
                shared.fact_history(&user, 1).await.unwrap_err(),
                shared.forget_user(&user).await.unwrap_err(),
            ] {
                assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
            }
        });
    }
}
