//! Users' facts read back from the SQL stores' rows: what is the same whatever the driver,
//! once each store has read its row's columns.

use std::borrow::Cow;

use chatmem::UserId;
use chatmem::store::{StoreError, StoredFacts, read_fact, read_fact_set};

/// One row of a facts load statement (the user row `UNION ALL` the facts), its columns as
/// the store's driver read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactsRow<'r> {
    /// Kind 0: the user row, its version and next fact id.
    User {
        /// The `version` column.
        version: Option<i64>,
        /// The `next_id` column.
        next_id: Option<i64>,
    },
    /// Kind 1: a fact, its id and JSON.
    Fact {
        /// The fact's id column.
        id: Option<i64>,
        /// The fact's JSON column.
        json: Option<Cow<'r, [u8]>>,
    },
    /// Any other kind: the row is not one the statement makes.
    Other(i64),
}

/// `value` of `user`'s facts column `column` as a u64.
///
/// ```
/// use chatmem::UserId;
/// use chatmem::store::StoreErrorKind;
/// use chatmem_sql::facts_counter;
/// let user = UserId::new("ada")?;
/// assert_eq!(facts_counter(&user, Some(3), "version")?, 3);
/// let e = facts_counter(&user, Some(-1), "next_id").unwrap_err();
/// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
/// assert!(e.to_string().contains("next_id is -1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::Corrupt`](chatmem::store::StoreErrorKind::Corrupt) for NULL or a
/// negative value.
pub fn facts_counter(user: &UserId, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
    match value {
        Some(v) => u64::try_from(v).map_err(|_| StoreError::facts_corrupt(user, format!("{column} is {v}"))),
        None => Err(StoreError::facts_corrupt(user, format!("{column} is NULL"))),
    }
}

/// The [`StoredFacts`] of a facts load statement's rows: no row at all, an unknown user.
///
/// ```
/// use std::borrow::Cow;
/// use chatmem::UserId;
/// use chatmem::store::StoreErrorKind;
/// use chatmem_sql::{FactsRow, stored_facts};
/// let user = UserId::new("ada")?;
/// assert_eq!(stored_facts(&user, Vec::new())?.version, 0);
/// let fact = FactsRow::Fact { id: Some(1), json: None };
/// let e = stored_facts(&user, [Ok(FactsRow::User { version: Some(1), next_id: Some(2) }), Ok(fact)]).unwrap_err();
/// assert_eq!(e.kind(), StoreErrorKind::Corrupt);
/// assert!(e.to_string().contains("fact 1's row has no JSON"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The first error of `rows`; [`StoreErrorKind::Corrupt`](chatmem::store::StoreErrorKind::Corrupt)
/// for a NULL or negative counter, a fact without its JSON, a row of another kind, facts
/// without their user row, or facts that [`read_fact`] and [`read_fact_set`] refuse.
pub fn stored_facts<'r>(
    user: &UserId,
    rows: impl IntoIterator<Item = Result<FactsRow<'r>, StoreError>>,
) -> Result<StoredFacts, StoreError> {
    let mut head = None;
    let mut facts = Vec::new();
    for row in rows {
        match row? {
            FactsRow::User { version, next_id } => {
                let next_id = facts_counter(user, next_id, "next_id")?;
                head = Some((facts_counter(user, version, "version")?, next_id));
            }
            FactsRow::Fact { id, json } => {
                let id = facts_counter(user, id, "a fact's id")?;
                let what = format!("fact {id}'s row");
                let json = json.ok_or_else(|| StoreError::facts_corrupt(user, format!("{what} has no JSON")))?;
                facts.push(read_fact(user, &json, id, &what)?);
            }
            FactsRow::Other(kind) => {
                return Err(StoreError::facts_corrupt(user, format!("a facts row of kind {kind}")));
            }
        }
    }
    let Some((version, next_id)) = head else {
        if facts.is_empty() {
            return Ok(StoredFacts::default());
        }
        return Err(StoreError::facts_corrupt(user, "facts without their user row"));
    };
    let set = read_fact_set(user, facts, next_id)?;
    Ok(StoredFacts { set, version })
}

#[cfg(test)]
mod tests {
    use chatmem::facts::{FactLimits, FactSet, add};
    use chatmem::store::{StoreErrorKind, fact_json};

    use super::*;

    #[test]
    fn counters_are_never_negative_or_null() {
        let user = UserId::new("ada").unwrap();
        let e = facts_counter(&user, Some(-1), "version").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert_eq!(
            e.to_string(),
            "stored data is corrupt: user \"ada\"'s facts: version is -1"
        );
        let e = facts_counter(&user, None, "next_id").unwrap_err().to_string();
        assert!(e.ends_with("next_id is NULL"), "{e}");
        assert_eq!(facts_counter(&user, Some(3), "version").unwrap(), 3);
    }

    #[test]
    fn the_user_row_and_the_fact_rows_become_the_stored_facts() {
        let user = UserId::new("ada").unwrap();
        let (one, _) = add(&FactSet::default(), "Works nights", None, &FactLimits::default(), 7).unwrap();
        let json = fact_json(&one.set.facts()[0]).unwrap();
        let fact = || FactsRow::Fact {
            id: Some(1),
            json: Some(Cow::Borrowed(json.as_bytes())),
        };
        let head = || FactsRow::User {
            version: Some(4),
            next_id: Some(2),
        };
        let read = stored_facts(&user, [Ok(head()), Ok(fact())]).unwrap();
        assert_eq!((read.set, read.version), (one.set, 4));

        let e = stored_facts(&user, [Ok(fact())]).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert!(e.to_string().contains("facts without their user row"), "{e}");
        let e = stored_facts(&user, [Ok(head()), Ok(FactsRow::Other(2))]).unwrap_err();
        assert!(e.to_string().contains("a facts row of kind 2"), "{e}");
        let unreadable = StoreError::facts_corrupt(&user, "a facts row has no readable column 0");
        let e = stored_facts(&user, [Ok(head()), Err(unreadable)]).unwrap_err();
        assert!(e.to_string().contains("no readable column 0"), "{e}");
        let e = stored_facts(
            &user,
            [Ok(FactsRow::User {
                version: Some(1),
                next_id: None,
            })],
        )
        .unwrap_err();
        assert!(e.to_string().ends_with("next_id is NULL"), "{e}");
    }
}
