//! Users' facts in rows: a [`FactsCommit`] as the facts commit statement's parameters, and
//! the rows of the facts statements read back, bad data becoming `Corrupt` errors.
//!
//! A fact and a history entry are each kept as the JSON serde_json writes of [`Fact`] and
//! [`FactChange`], beside the ids the statements select by. Reading checks the JSON against
//! those ids and the set against [`FactSet::new`]'s rules. An error says which row is bad,
//! never what it holds: a fact's text is private, and a JSON error's message can quote it.

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

use chatmem::facts::{Fact, FactChange, FactSet};
use chatmem::store::{FactsCommit, StoreError, StoreErrorKind, StoredFacts};
use chatmem::{JsonFieldError, deserialize_json};
use chatmem_sql::to_bigint;

use crate::params::token_bits;

/// A facts commit's statement parameters (`sql::FACTS_COMMIT`), converted before anything
/// is sent.
pub(crate) struct FactsParams {
    pub(crate) expected: i64,
    pub(crate) next_id: i64,
    /// [`FactsCommit::token`] as the bigint with the same 64 bits.
    pub(crate) token: i64,
    /// The set's fact ids and each fact's JSON, in the same order.
    pub(crate) ids: Vec<i64>,
    pub(crate) facts: Vec<String>,
    /// The history entries' facts and JSON, in the order they happened.
    pub(crate) entry_facts: Vec<i64>,
    pub(crate) entries: Vec<String>,
    /// The facts whose history goes.
    pub(crate) dropped: Vec<i64>,
}

impl FactsParams {
    pub(crate) fn new(commit: &FactsCommit) -> Result<Self, StoreError> {
        let set = commit.set();
        let (mut ids, mut facts) = (Vec::with_capacity(set.len()), Vec::with_capacity(set.len()));
        for fact in set.facts() {
            ids.push(bigint(fact.id, "fact id")?);
            facts.push(json(serde_json::to_string(fact), "a fact")?);
        }
        let history = commit.history();
        let (mut entry_facts, mut entries) = (Vec::with_capacity(history.len()), Vec::with_capacity(history.len()));
        for change in history {
            entry_facts.push(bigint(change.fact, "fact id")?);
            entries.push(json(serde_json::to_string(change), "a fact's history entry")?);
        }
        Ok(Self {
            expected: bigint(commit.expected_version(), "expected facts version")?,
            next_id: bigint(set.next_id(), "next fact id")?,
            token: token_bits(commit.token()),
            ids,
            facts,
            entry_facts,
            entries,
            dropped: commit
                .dropped()
                .iter()
                .map(|&id| bigint(id, "fact id"))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// A number as PostgreSQL's `bigint`.
fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    to_bigint(value, what, "PostgreSQL's bigint")
}

/// A `serde_json` result of writing `what`.
fn json(written: serde_json::Result<String>, what: &str) -> Result<String, StoreError> {
    written.map_err(|e| StoreError::new(StoreErrorKind::Other, format!("writing {what} as JSON")).with_source(e))
}

/// Bad data in a user's facts: `what` names the row and what is wrong with it.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, format!("a user's stored facts: {what}"))
}

/// Column `index` of `row`, `what` naming the row; unreadable (a missing column included) is
/// corrupt.
pub(crate) fn column<'r, T: FromSql<'r>>(row: &'r Row, index: usize, what: &str) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|_| corrupt(format!("{what} has no readable column {index}")))
}

/// `value` of `column` as a u64: NULL or negative is corrupt.
fn counter(value: Option<i64>, column: &str) -> Result<u64, StoreError> {
    match value {
        Some(v) => u64::try_from(v).map_err(|_| corrupt(format!("{column} is {v}"))),
        None => Err(corrupt(format!("{column} is NULL"))),
    }
}

/// The JSON `text` of row `what`, read whole by `read` (through
/// [`chatmem::deserialize_json`], which tracks the field). The error names the field only:
/// its reason can quote what the row holds.
fn parsed<'a, T>(
    text: &'a str,
    what: &str,
    read: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> Result<T, JsonFieldError>,
) -> Result<T, StoreError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = read(&mut de).map_err(|e| match e.path() {
        Some(field) => corrupt(format!("{what} is not valid JSON of one (field `{field}`)")),
        None => corrupt(format!("{what} is not valid JSON of one")),
    })?;
    de.end()
        .map_err(|_| corrupt(format!("{what} holds more than one JSON value")))?;
    Ok(value)
}

/// Reads the rows of `sql::FACTS_LOAD`: no row, an unknown user.
pub(crate) fn stored_facts(rows: &[Row]) -> Result<StoredFacts, StoreError> {
    const USER: &str = "the facts' user row";
    let mut user = None;
    let mut facts = Vec::with_capacity(rows.len().saturating_sub(1));
    for row in rows {
        let a: Option<i64> = column(row, 1, "a facts row")?;
        match column::<i32>(row, 0, "a facts row")? {
            0 => {
                let next_id = counter(column(row, 2, USER)?, "next_id")?;
                user = Some((counter(a, "version")?, next_id));
            }
            1 => {
                let id = counter(a, "a fact's id")?;
                let what = format!("fact {id}'s row");
                let text: Option<&str> = column(row, 3, &what)?;
                let text = text.ok_or_else(|| corrupt(format!("{what} has no JSON")))?;
                let fact = parsed(text, &what, |de| deserialize_json::<_, Fact>(de))?;
                if fact.id != id {
                    return Err(corrupt(format!("{what} holds fact {}", fact.id)));
                }
                facts.push(fact);
            }
            kind => return Err(corrupt(format!("a facts row of kind {kind}"))),
        }
    }
    let Some((version, next_id)) = user else {
        if facts.is_empty() {
            return Ok(StoredFacts::default());
        }
        return Err(corrupt("facts without their user row"));
    };
    let set = FactSet::new(facts, next_id).map_err(|e| corrupt(format!("the set breaks a rule: {e}")))?;
    Ok(StoredFacts { set, version })
}

/// Reads the rows of `sql::FACT_HISTORY` for fact `fact`.
pub(crate) fn history(rows: &[Row], fact: u64) -> Result<Vec<FactChange>, StoreError> {
    let what = format!("a history entry of fact {fact}");
    rows.iter()
        .map(|row| {
            let change = parsed(column(row, 0, &what)?, &what, |de| {
                deserialize_json::<_, FactChange>(de)
            })?;
            if change.fact != fact {
                return Err(corrupt(format!("{what} is of fact {}", change.fact)));
            }
            Ok(change)
        })
        .collect()
}

/// The three columns of a commit statement's result row (`sql::FACTS_COMMIT`, as
/// `sql::COMMIT_RESULT`): the new version, else the current version and token.
pub(crate) fn commit_result(rows: &[Row]) -> Result<(Option<u64>, u64, Option<i64>), StoreError> {
    const WHAT: &str = "the facts commit result";
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the facts commit statement returned no row"))?;
    let new = column::<Option<i64>>(row, 0, WHAT)?
        .map(|v| counter(Some(v), "the new facts version"))
        .transpose()?;
    // No user row reads as version 0, as a load would.
    let current = counter(Some(column::<Option<i64>>(row, 1, WHAT)?.unwrap_or(0)), "version")?;
    Ok((new, current, column(row, 2, WHAT)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::facts::{FactLimits, add};

    #[test]
    fn a_commit_becomes_its_rows() {
        let loaded = StoredFacts::default();
        let (one, _) = add(&loaded.set, "Prefers email", None, &FactLimits::default(), 7).unwrap();
        let (two, _) = add(&one.set, "Works nights", None, &FactLimits::default(), 8).unwrap();
        let commit = FactsCommit::new(&loaded, one.then(two)).unwrap().unwrap();
        let p = FactsParams::new(&commit).unwrap();
        assert_eq!((p.expected, p.next_id, p.token), (0, 3, token_bits(commit.token())));
        assert_eq!(p.ids, [1, 2]);
        let back: Vec<Fact> = p.facts.iter().map(|j| serde_json::from_str(j).unwrap()).collect();
        assert_eq!(back, commit.set().facts());
        assert_eq!(p.entry_facts, [1, 2]);
        let back: Vec<FactChange> = p.entries.iter().map(|j| serde_json::from_str(j).unwrap()).collect();
        assert_eq!(back, commit.history());
        assert!(p.dropped.is_empty());

        let stored = StoredFacts {
            set: commit.set().clone(),
            version: 1,
        };
        let deleting = FactsCommit::deleting(&stored, &[2]).unwrap().unwrap();
        let p = FactsParams::new(&deleting).unwrap();
        assert_eq!((p.expected, p.next_id, p.ids, p.dropped), (1, 3, vec![1], vec![2]));
        assert!(p.entries.is_empty());
    }

    #[test]
    fn bad_json_is_corrupt_without_quoting_it() {
        let fact = |json| parsed(json, "fact 1's row", |de| deserialize_json::<_, Fact>(de));
        let e = fact(r#"{"id": 1, "text": ["Lives in Berlin"]}"#).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        let text = e.to_string();
        assert!(
            text.ends_with("fact 1's row is not valid JSON of one (field `text`)"),
            "{text}"
        );
        assert!(!text.contains("Berlin"), "{text}");
        assert!(std::error::Error::source(&e).is_none());
        let e = fact("{\"id\": \"Lives in Berlin").unwrap_err().to_string();
        assert!(e.ends_with("fact 1's row is not valid JSON of one (field `id`)"), "{e}");
        assert!(!e.contains("Berlin"), "{e}");
        let (added, _) = add(&FactSet::default(), "Lives in Berlin", None, &FactLimits::default(), 1).unwrap();
        let json = serde_json::to_string(&added.set.facts()[0]).unwrap();
        assert_eq!(fact(&json).unwrap(), added.set.facts()[0]);
        let e = fact("[1").unwrap_err().to_string();
        assert!(e.ends_with("fact 1's row is not valid JSON of one"), "{e}");
        let e = fact(&format!("{json} {json}")).unwrap_err().to_string();
        assert!(e.ends_with("fact 1's row holds more than one JSON value"), "{e}");
        assert_eq!(
            counter(Some(-1), "version").unwrap_err().kind(),
            StoreErrorKind::Corrupt
        );
        assert!(
            counter(None, "next_id")
                .unwrap_err()
                .to_string()
                .contains("next_id is NULL")
        );
    }
}
