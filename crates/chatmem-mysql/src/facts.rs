//! Users' facts in rows: a [`FactsCommit`] as the facts commit procedure's parameters, and
//! the rows of the facts statements read back, bad data becoming `Corrupt` errors.
//!
//! A fact and a history entry are each kept as the JSON [`chatmem::store::fact_json`] and
//! [`chatmem::store::change_json`] write, beside the ids the statements select by, and read
//! back by chatmem's readers ([`read_fact`], [`read_change`], [`read_fact_set`]), which check
//! the JSON against those ids and the set against [`FactSet`](chatmem::facts::FactSet)'s
//! rules. An error says which row is bad, never what it holds: a fact's text is private.

use std::borrow::Cow;

use mysql_async::prelude::FromValue;
use mysql_async::{Row, Value};

use chatmem::UserId;
use chatmem::facts::FactChange;
use chatmem::store::{FactsCommit, StoreError, StoreErrorKind, StoredFacts, change_json, fact_json, read_change};
use chatmem_sql::{FactsRow, facts_counter, to_bigint};

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
        .map(|fact| Ok((bigint(fact.id, "fact id")?, fact_json(fact)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    let entries = commit
        .history()
        .iter()
        .map(|change| Ok((bigint(change.fact, "fact id")?, change_json(change)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    let dropped = commit
        .dropped()
        .iter()
        .map(|&id| bigint(id, "fact id"))
        .collect::<Result<Vec<_>, _>>()?;
    // Arrays of numbers and strings: serde_json always writes them.
    let array = |written: serde_json::Result<String>, what: &str| {
        written
            .map(|j| Value::Bytes(j.into_bytes()))
            .map_err(|_| StoreError::new(StoreErrorKind::Other, format!("writing {what} as JSON")))
    };
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

/// Column `index` of `row` of `user`'s facts, `what` naming the row; unreadable (a missing
/// column included) is corrupt. The driver's error is not kept: it can quote the value.
fn column<T: FromValue>(user: &UserId, row: &Row, index: usize, what: &str) -> Result<T, StoreError> {
    match row.get_opt::<T, usize>(index) {
        Some(Ok(value)) => Ok(value),
        _ => Err(StoreError::facts_corrupt(
            user,
            format!("{what} has no readable column {index}"),
        )),
    }
}

/// Reads the rows of `sql::FACTS_LOAD` for `user`: no row, an unknown user. The columns are
/// read here; what they mean, [`chatmem_sql::stored_facts`].
pub(crate) fn stored_facts(user: &UserId, rows: &[Row]) -> Result<StoredFacts, StoreError> {
    const ROW: &str = "a facts row";
    chatmem_sql::stored_facts(
        user,
        rows.iter().map(|row| {
            let a: Option<i64> = column(user, row, 1, ROW)?;
            Ok(match column::<i64>(user, row, 0, ROW)? {
                0 => FactsRow::User {
                    version: a,
                    next_id: column(user, row, 2, "the facts' user row")?,
                },
                1 => FactsRow::Fact {
                    id: a,
                    json: column::<Option<Vec<u8>>>(user, row, 3, "a fact's row")?.map(Cow::Owned),
                },
                kind => FactsRow::Other(kind),
            })
        }),
    )
}

/// Reads the rows of `sql::FACT_HISTORY` for `user`'s fact `fact`.
pub(crate) fn history(user: &UserId, rows: &[Row], fact: u64) -> Result<Vec<FactChange>, StoreError> {
    let what = format!("a history entry of fact {fact}");
    rows.iter()
        .map(|row| read_change(user, &column::<Vec<u8>>(user, row, 0, &what)?, fact, &what))
        .collect()
}

/// Reads the procedure's result row: (applied, version). Applied by this call or by an
/// earlier send of the same commit: `Some` of the version it made. Not applied (a lost
/// version check): `None`.
pub(crate) fn commit_outcome(user: &UserId, rows: &[Row]) -> Result<Option<u64>, StoreError> {
    const WHAT: &str = "the facts commit result";
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the facts commit procedure returned no row"))?;
    if column::<i64>(user, row, 0, WHAT)? == 1 {
        return facts_counter(user, column(user, row, 1, WHAT)?, "the new facts version").map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::facts::{FactLimits, add};
    use chatmem::store::read_fact;

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
        let back: Vec<_> = facts
            .iter()
            .map(|f| read_fact(&user, f.1.as_bytes(), f.0 as u64, "a fact").unwrap())
            .collect();
        assert_eq!(back, commit.set().facts());
        let entries: Vec<(i64, String)> = serde_json::from_slice(bytes(&p[5])).unwrap();
        let back: Vec<_> = entries
            .iter()
            .map(|e| read_change(&user, e.1.as_bytes(), e.0 as u64, "an entry").unwrap())
            .collect();
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
}
