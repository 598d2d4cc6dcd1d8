//! Users' facts in rows: a [`FactsCommit`] as the facts commit procedure's parameters, and
//! the rows of the facts statements read back, bad data becoming `Corrupt` errors.
//!
//! A fact and a history entry are each kept as the JSON serde_json writes of [`Fact`] and
//! [`FactChange`], beside the ids the statements select by. Reading checks the JSON against
//! those ids and the set against [`FactSet::new`]'s rules. An error says which row is bad,
//! never what it holds: a fact's text is private, and a JSON error's message can quote it.

use mysql_async::prelude::FromValue;
use mysql_async::{Row, Value};

use chatmem::UserId;
use chatmem::facts::{Fact, FactChange, FactSet};
use chatmem::store::{FactsCommit, StoreError, StoreErrorKind, StoredFacts};
use chatmem::{JsonFieldError, deserialize_json};
use chatmem_sql::to_bigint;

/// The user id as the tables key it: its UTF-8 bytes (`VARBINARY`, compared exactly).
pub(crate) fn user_key(user: &UserId) -> Value {
    Value::Bytes(user.as_str().as_bytes().to_vec())
}

/// The 7 parameters of `CALL <prefix>_commit_facts(...)` for `commit` to `user`, converted
/// before anything is sent: the user, the expected version, the next id, the token, then the
/// set as a JSON array of `[id, fact JSON]`, the history entries as one of `[fact id, entry
/// JSON]` in the order they happened, and the facts whose history goes as one of ids.
pub(crate) fn commit_params(user: &UserId, commit: &FactsCommit) -> Result<Vec<Value>, StoreError> {
    let set = commit.set();
    let facts = set
        .facts()
        .iter()
        .map(|fact| {
            Ok((
                bigint(fact.id, "fact id")?,
                json(serde_json::to_string(fact), "a fact")?,
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let entries = commit
        .history()
        .iter()
        .map(|change| {
            Ok((
                bigint(change.fact, "fact id")?,
                json(serde_json::to_string(change), "a fact's history entry")?,
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let dropped = commit
        .dropped()
        .iter()
        .map(|&id| bigint(id, "fact id"))
        .collect::<Result<Vec<_>, _>>()?;
    let array = |written: serde_json::Result<String>, what| json(written, what).map(|j| Value::Bytes(j.into_bytes()));
    Ok(vec![
        user_key(user),
        Value::Int(bigint(commit.expected_version(), "expected facts version")?),
        Value::Int(bigint(set.next_id(), "next fact id")?),
        Value::UInt(commit.token()),
        array(serde_json::to_string(&facts), "the facts")?,
        array(serde_json::to_string(&entries), "the history entries")?,
        array(serde_json::to_string(&dropped), "the dropped facts")?,
    ])
}

/// A number as MySQL's `BIGINT`.
fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    to_bigint(value, what, "MySQL's BIGINT")
}

/// A `serde_json` result of writing `what`.
fn json(written: serde_json::Result<String>, what: &str) -> Result<String, StoreError> {
    written.map_err(|e| StoreError::new(StoreErrorKind::Other, format!("writing {what} as JSON")).with_source(e))
}

/// Bad data in a user's facts: `what` names the row and what is wrong with it.
fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, format!("a user's stored facts: {what}"))
}

/// Column `index` of `row`, `what` naming the row; unreadable (a missing column included) is
/// corrupt. The driver's error is not kept: it can quote the value.
fn column<T: FromValue>(row: &Row, index: usize, what: &str) -> Result<T, StoreError> {
    match row.get_opt::<T, usize>(index) {
        Some(Ok(value)) => Ok(value),
        _ => Err(corrupt(format!("{what} has no readable column {index}"))),
    }
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
    text: &'a [u8],
    what: &str,
    read: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::SliceRead<'a>>) -> Result<T, JsonFieldError>,
) -> Result<T, StoreError> {
    let mut de = serde_json::Deserializer::from_slice(text);
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
    const ROW: &str = "a facts row";
    const USER: &str = "the facts' user row";
    let mut user = None;
    let mut facts = Vec::with_capacity(rows.len().saturating_sub(1));
    for row in rows {
        let a: Option<i64> = column(row, 1, ROW)?;
        match column::<i64>(row, 0, ROW)? {
            0 => {
                let next_id = counter(column(row, 2, USER)?, "next_id")?;
                user = Some((counter(a, "version")?, next_id));
            }
            1 => {
                let id = counter(a, "a fact's id")?;
                let what = format!("fact {id}'s row");
                let text: Option<Vec<u8>> = column(row, 3, &what)?;
                let text = text.ok_or_else(|| corrupt(format!("{what} has no JSON")))?;
                let fact = parsed(&text, &what, |de| deserialize_json::<_, Fact>(de))?;
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
            let text: Vec<u8> = column(row, 0, &what)?;
            let change = parsed(&text, &what, |de| deserialize_json::<_, FactChange>(de))?;
            if change.fact != fact {
                return Err(corrupt(format!("{what} is of fact {}", change.fact)));
            }
            Ok(change)
        })
        .collect()
}

/// Reads the procedure's result row: (applied, version). Applied by this call or by an
/// earlier send of the same commit: `Some` of the version it made. Not applied (a lost
/// version check): `None`.
pub(crate) fn commit_outcome(rows: &[Row]) -> Result<Option<u64>, StoreError> {
    const WHAT: &str = "the facts commit result";
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the facts commit procedure returned no row"))?;
    if column::<i64>(row, 0, WHAT)? == 1 {
        return counter(column(row, 1, WHAT)?, "the new facts version").map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::facts::{FactLimits, add};

    fn bytes(value: &Value) -> &[u8] {
        match value {
            Value::Bytes(b) => b,
            other => panic!("not bytes: {other:?}"),
        }
    }

    #[test]
    fn a_commit_becomes_its_parameters() {
        let loaded = StoredFacts::default();
        let (one, _) = add(&loaded.set, "Says \"hi\" 🍵", None, &FactLimits::default(), 7).unwrap();
        let (two, _) = add(&one.set, "Works nights", None, &FactLimits::default(), 8).unwrap();
        let commit = FactsCommit::new(&loaded, one.then(two)).unwrap().unwrap();
        let user = UserId::new("ada ").unwrap();
        let p = commit_params(&user, &commit).unwrap();
        assert_eq!(p.len(), 7);
        assert_eq!(bytes(&p[0]), b"ada ", "the id's bytes, the space kept");
        assert_eq!(
            (&p[1], &p[2], &p[3]),
            (&Value::Int(0), &Value::Int(3), &Value::UInt(commit.token()))
        );
        let facts: Vec<(i64, String)> = serde_json::from_slice(bytes(&p[4])).unwrap();
        assert_eq!(facts.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 2]);
        let back: Vec<Fact> = facts.iter().map(|f| serde_json::from_str(&f.1).unwrap()).collect();
        assert_eq!(back, commit.set().facts());
        let entries: Vec<(i64, String)> = serde_json::from_slice(bytes(&p[5])).unwrap();
        let back: Vec<FactChange> = entries.iter().map(|e| serde_json::from_str(&e.1).unwrap()).collect();
        assert_eq!(back, commit.history());
        assert_eq!(entries.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(bytes(&p[6]), b"[]");

        let stored = StoredFacts {
            set: commit.set().clone(),
            version: 1,
        };
        let deleting = FactsCommit::deleting(&stored, &[2]).unwrap().unwrap();
        let p = commit_params(&user, &deleting).unwrap();
        assert_eq!((&p[1], &p[2]), (&Value::Int(1), &Value::Int(3)));
        assert_eq!(bytes(&p[5]), b"[]");
        assert_eq!(bytes(&p[6]), b"[2]");
    }

    #[test]
    fn bad_json_is_corrupt_without_quoting_it() {
        let fact = |json: &str| parsed(json.as_bytes(), "fact 1's row", |de| deserialize_json::<_, Fact>(de));
        let e = fact(r#"{"id": 1, "text": ["Lives in Berlin"]}"#).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        let text = e.to_string();
        assert!(
            text.ends_with("fact 1's row is not valid JSON of one (field `text`)"),
            "{text}"
        );
        assert!(!text.contains("Berlin"), "{text}");
        assert!(std::error::Error::source(&e).is_none());
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
