//! A user's [facts](crate::facts) through a [`ChatMemory`]: what a person in charge reads and
//! changes by hand. Each change is one load and one version-checked commit through
//! [`apply_facts`] (made again on newer facts when another writer got in first), bounded by the
//! memory's [`FactLimits`] and counted by its counter: the one rule the server and the command
//! line both use.

use crate::error::{Error, Result};
use crate::facts::{
    Cause, ChangeKind, Changed, Fact, FactChange, FactEdit, FactError, FactKey, FactLimits, FactSet, UserId, add,
    apply_facts, edit, enforce, pin, unpin,
};
use crate::memory::ChatMemory;
use crate::store::{FactsCommit, Store, StoreError, StoreErrorKind, StoredFacts, now_micros};

/// What a change's rule says about the facts it was given.
type Rule<'a> = dyn FnMut(&FactSet, i64) -> std::result::Result<Changed, FactError> + Send + 'a;

/// These calls work whether or not the memory sends facts with its turns
/// ([`ChatMemoryBuilder::facts`](crate::ChatMemoryBuilder::facts)): a user is forgotten even
/// after facts were turned off. Without facts configured the bounds are
/// [`FactLimits::default`]. A store that keeps no facts fails each of them with
/// [`Error::Facts`].
impl<S: Store> ChatMemory<S> {
    /// The bounds a change by hand keeps a user's facts within: the configured
    /// [`Facts::fact_limits`](crate::facts::Facts::fact_limits), else the defaults.
    pub fn fact_limits(&self) -> FactLimits {
        self.facts_settings()
            .map_or_else(FactLimits::default, |f| *f.fact_limits())
    }

    /// `user`'s facts and their version, in one round trip (an unknown or forgotten user has
    /// none, at version 0).
    ///
    /// # Errors
    /// [`Error::Facts`] when the store fails.
    pub async fn facts(&self, user: &UserId) -> Result<StoredFacts> {
        self.store().load_facts(user).await.map_err(facts_failed(user))
    }

    /// Adds `text` (with `key`) to `user`'s facts by hand, by the facts' rules
    /// ([`add`](crate::facts::add)): a key supersedes the current fact with it, a text the
    /// same as a current fact's confirms that fact. Then the bounds
    /// ([`enforce`](crate::facts::enforce)): past them, the least recently confirmed unpinned
    /// facts leave, each recorded as evicted. Returns the fact the text is now in.
    ///
    /// ```
    /// use chatmem::facts::FactKey;
    /// use chatmem::{ChatMemory, UserId};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let memory = ChatMemory::in_memory();
    /// let user = UserId::new("app-user-42")?;
    /// let key = FactKey::new("home.city")?;
    /// let berlin = memory.add_fact(&user, "Lives in Berlin", Some(key.clone())).await?;
    /// let hamburg = memory.add_fact(&user, "Lives in Hamburg", Some(key)).await?;
    /// let now = memory.facts(&user).await?;
    /// assert_eq!(now.set.facts(), [hamburg.clone()]);
    /// // The old fact is kept in its history, superseded.
    /// assert_eq!(memory.fact_history(&user, berlin.id).await?.last().unwrap().kind.as_str(), "superseded");
    /// // Deleted with the fact it superseded, history included.
    /// assert_eq!(memory.delete_fact(&user, hamburg.id).await?, [berlin.id, hamburg.id]);
    /// assert!(memory.fact_history(&user, berlin.id).await?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::FactRefused`] (nothing written) for a text that cannot be a fact's
    /// ([`FactError::Text`]) or a fact that would leave at once by the bounds
    /// ([`FactError::NoRoom`]: the pinned facts leave no room for it); [`Error::Facts`] when
    /// the store fails.
    pub async fn add_fact(&self, user: &UserId, text: &str, key: Option<FactKey>) -> Result<Fact> {
        let (limits, counter) = (self.fact_limits(), self.counter().clone());
        let mut added = 0;
        let facts = self
            .change_facts(user, &mut |set, now| {
                let (changed, id) = add(set, text, key.clone(), &limits, now)?;
                added = id;
                within_bounds(changed, id, &limits, counter.as_ref(), now)
            })
            .await?;
        the_fact(user, &facts, added)
    }

    /// Changes fact `fact`'s text or key by hand ([`edit`](crate::facts::edit)), then keeps the
    /// bounds as [`add_fact`](ChatMemory::add_fact) does. Returns the fact as it is now.
    ///
    /// # Errors
    /// [`Error::FactRefused`] (nothing written) for an unknown fact, a text that cannot be a
    /// fact's, a key another fact has, a pinned fact grown past the tokens, or a fact that
    /// would leave at once by the bounds; [`Error::Facts`] when the store fails.
    pub async fn edit_fact(&self, user: &UserId, fact: u64, change: FactEdit) -> Result<Fact> {
        self.change_fact(user, fact, change, None).await
    }

    /// Pins fact `fact` (`pinned`: a pinned fact never leaves by the bounds and is written
    /// first) or unpins it. Pinning a pinned fact, or unpinning one that is not, changes
    /// nothing. Returns the fact as it is now.
    ///
    /// # Errors
    /// [`Error::FactRefused`] (nothing written) for an unknown fact, or a pin past the bounds
    /// ([`FactError::TooManyPinned`], [`FactError::PinnedTokensPastCap`]: unpin or delete a
    /// pinned fact first); [`Error::Facts`] when the store fails.
    pub async fn pin_fact(&self, user: &UserId, fact: u64, pinned: bool) -> Result<Fact> {
        self.change_fact(user, fact, FactEdit::default(), Some(pinned)).await
    }

    /// [`edit_fact`](ChatMemory::edit_fact) and then [`pin_fact`](ChatMemory::pin_fact) in
    /// one commit (a server's `PATCH` of text and pin together): when either is refused,
    /// nothing is written. `change` empty with a pin: only the pin. Returns the fact as it is
    /// now.
    ///
    /// # Errors
    /// As [`edit_fact`](ChatMemory::edit_fact) and [`pin_fact`](ChatMemory::pin_fact).
    pub async fn change_fact(&self, user: &UserId, fact: u64, change: FactEdit, pinned: Option<bool>) -> Result<Fact> {
        let (limits, counter) = (self.fact_limits(), self.counter().clone());
        let edits = change != FactEdit::default() || pinned.is_none();
        let facts = self
            .change_facts(user, &mut |set, now| {
                let mut changed = Changed::unchanged(set);
                if edits {
                    let edited = edit(set, fact, change.clone(), &limits, counter.as_ref(), now)?;
                    changed = within_bounds(edited, fact, &limits, counter.as_ref(), now)?;
                }
                let then = match pinned {
                    Some(true) => pin(&changed.set, fact, &limits, counter.as_ref(), now)?,
                    Some(false) => unpin(&changed.set, fact, now)?,
                    None => return Ok(changed),
                };
                Ok(changed.then(then))
            })
            .await?;
        the_fact(user, &facts, fact)
    }

    /// Deletes fact `fact` of `user` — current or past — with its history, and the facts it
    /// superseded in turn (its past versions under its key, with theirs): a person deletes to
    /// forget, and "Lives in Hamburg" forgotten should not leave "Lives in Berlin" in its
    /// history. No history entry is written, and no id is given again. Returns the ids
    /// deleted, ascending. One history read per version, then one load and one commit.
    ///
    /// # Errors
    /// [`Error::FactRefused`] with [`FactError::UnknownFact`] (nothing written) when the
    /// user has no such fact, current or in history; [`Error::Facts`] when the store fails.
    pub async fn delete_fact(&self, user: &UserId, fact: u64) -> Result<Vec<u64>> {
        let first = self.fact_history(user, fact).await?;
        let mut versions = vec![fact];
        let mut history = first.clone();
        // Each `supersedes` names an older fact (ids only grow), so the walk ends.
        while let Some(older) = history.iter().find_map(|c| match &c.kind {
            ChangeKind::Added { supersedes, .. } => supersedes.filter(|&s| s < versions[versions.len() - 1]),
            _ => None,
        }) {
            versions.push(older);
            history = self.fact_history(user, older).await?;
        }
        versions.sort_unstable();
        let mut refused = None;
        let applied = apply_facts(self.store(), user, |loaded| {
            let known =
                fact != 0 && fact < loaded.set.next_id() && (loaded.set.get(fact).is_some() || !first.is_empty());
            if !known {
                refused = Some(FactError::UnknownFact(fact));
                return Err(refusal());
            }
            FactsCommit::deleting(loaded, &versions)
        })
        .await;
        outcome(user, applied, refused)?;
        Ok(versions)
    }

    /// The history of `user`'s fact `fact`, oldest first: what happened to it, when and why
    /// (empty for a fact never made, deleted, or of a forgotten user).
    ///
    /// # Errors
    /// [`Error::Facts`] when the store fails.
    pub async fn fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>> {
        self.store().fact_history(user, fact).await.map_err(facts_failed(user))
    }

    /// Deletes everything kept of `user`'s facts (every fact, every history entry); returns
    /// whether anything was kept. The user's conversations are left as they are.
    ///
    /// # Errors
    /// [`Error::Facts`] when the store fails.
    pub async fn forget_user(&self, user: &UserId) -> Result<bool> {
        self.store().forget_user(user).await.map_err(facts_failed(user))
    }

    /// Applies `rule` to `user`'s facts by hand (made again on newer facts after a lost
    /// version check); returns the facts after it.
    async fn change_facts(&self, user: &UserId, rule: &mut Rule<'_>) -> Result<StoredFacts> {
        let mut refused = None;
        let applied = apply_facts(self.store(), user, |loaded| match rule(&loaded.set, now_micros()) {
            Ok(changed) => FactsCommit::new(loaded, changed),
            Err(e) => {
                refused = Some(e);
                Err(refusal())
            }
        })
        .await;
        outcome(user, applied, refused)
    }
}

/// `changed` within `limits`, refused when that evicts `fact` itself (the fact the person
/// changed: it would be gone the moment it was written, and every other unpinned fact with it).
fn within_bounds(
    changed: Changed,
    fact: u64,
    limits: &FactLimits,
    counter: &dyn crate::TokenCounter,
    now: i64,
) -> std::result::Result<Changed, FactError> {
    let bounded = enforce(&changed.set, limits, counter, &Cause::ByHand, now);
    if let Some(ChangeKind::Evicted { reason, .. }) = bounded.changes.iter().find(|c| c.fact == fact).map(|c| &c.kind) {
        return Err(FactError::NoRoom { fact, reason: *reason });
    }
    Ok(changed.then(bounded))
}

/// What a rule's refusal is to [`apply_facts`] (which stops at once on it): never shown, the
/// [`FactError`] is.
fn refusal() -> StoreError {
    StoreError::new(StoreErrorKind::InvalidInput, "refused by the facts' rules")
}

fn facts_failed(user: &UserId) -> impl FnOnce(StoreError) -> Error + '_ {
    move |source| Error::Facts {
        user: user.clone(),
        source,
    }
}

/// The facts after [`apply_facts`], or its error: the rule's refusal when there was one.
fn outcome(
    user: &UserId,
    applied: std::result::Result<crate::facts::Applied, StoreError>,
    refused: Option<FactError>,
) -> Result<StoredFacts> {
    match (applied, refused) {
        (Ok(applied), _) => Ok(applied.facts),
        (Err(_), Some(source)) => Err(Error::FactRefused {
            user: user.clone(),
            source,
        }),
        (Err(source), None) => Err(Error::Facts {
            user: user.clone(),
            source,
        }),
    }
}

/// Fact `id` of `facts`, which a change just kept.
fn the_fact(user: &UserId, facts: &StoredFacts, id: u64) -> Result<Fact> {
    facts.set.get(id).cloned().ok_or_else(|| Error::FactRefused {
        user: user.clone(),
        source: FactError::UnknownFact(id),
    })
}
