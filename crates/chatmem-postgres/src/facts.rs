//! Users' facts in rows: a [`FactsCommit`] as the facts commit statement's parameters, and
//! the rows of the facts statements read back, bad data becoming `Corrupt` errors.
//!
//! A fact and a history entry are each kept as the JSON [`chatmem::store::fact_json`] and
//! [`chatmem::store::change_json`] write, beside the ids the statements select by, and read
//! back by chatmem's readers ([`read_fact`], [`read_change`], [`read_fact_set`]), which check
//! the JSON against those ids and the set against [`FactSet`](chatmem::facts::FactSet)'s
//! rules. An error says which row is bad, never what it holds: a fact's text is private.

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

use chatmem::UserId;
use chatmem::facts::FactChange;
use chatmem::store::{
    FactsCommit, StoreError, StoreErrorKind, StoredFacts, change_json, fact_json, read_change, read_fact, read_fact_set,
};
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
            facts.push(fact_json(fact)?);
        }
        let history = commit.history();
        let (mut entry_facts, mut entries) = (Vec::with_capacity(history.len()), Vec::with_capacity(history.len()));
        for change in history {
            entry_facts.push(bigint(change.fact, "fact id")?);
            entries.push(change_json(change)?);
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

/// Column `index` of `row` of `user`'s facts, `what` naming the row; unreadable (a missing
/// column included) is corrupt. The driver's error is not kept: it can quote the value.
pub(crate) fn column<'r, T: FromSql<'r>>(
    user: &UserId,
    row: &'r Row,
    index: usize,
    what: &str,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|_| StoreError::facts_corrupt(user, format!("{what} has no readable column {index}")))
}

/// `value` of `column` as a u64: NULL or negative is corrupt.
fn counter(user: &UserId, value: Option<i64>, column: &str) -> Result<u64, StoreError> {
    match value {
        Some(v) => u64::try_from(v).map_err(|_| StoreError::facts_corrupt(user, format!("{column} is {v}"))),
        None => Err(StoreError::facts_corrupt(user, format!("{column} is NULL"))),
    }
}

/// Reads the rows of `sql::FACTS_LOAD` for `user`: no row, an unknown user.
pub(crate) fn stored_facts(user: &UserId, rows: &[Row]) -> Result<StoredFacts, StoreError> {
    const USER: &str = "the facts' user row";
    let mut head = None;
    let mut facts = Vec::with_capacity(rows.len().saturating_sub(1));
    for row in rows {
        let a: Option<i64> = column(user, row, 1, "a facts row")?;
        match column::<i32>(user, row, 0, "a facts row")? {
            0 => {
                let next_id = counter(user, column(user, row, 2, USER)?, "next_id")?;
                head = Some((counter(user, a, "version")?, next_id));
            }
            1 => {
                let id = counter(user, a, "a fact's id")?;
                let what = format!("fact {id}'s row");
                let text: Option<&str> = column(user, row, 3, &what)?;
                let text = text.ok_or_else(|| StoreError::facts_corrupt(user, format!("{what} has no JSON")))?;
                facts.push(read_fact(user, text.as_bytes(), id, &what)?);
            }
            kind => return Err(StoreError::facts_corrupt(user, format!("a facts row of kind {kind}"))),
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

/// Reads the rows of `sql::FACT_HISTORY` for `user`'s fact `fact`.
pub(crate) fn history(user: &UserId, rows: &[Row], fact: u64) -> Result<Vec<FactChange>, StoreError> {
    let what = format!("a history entry of fact {fact}");
    rows.iter()
        .map(|row| read_change(user, column::<&str>(user, row, 0, &what)?.as_bytes(), fact, &what))
        .collect()
}

/// The three columns of a commit statement's result row (`sql::FACTS_COMMIT`, as
/// `sql::COMMIT_RESULT`): the new version, else the current version and token.
pub(crate) fn commit_result(user: &UserId, rows: &[Row]) -> Result<(Option<u64>, u64, Option<i64>), StoreError> {
    const WHAT: &str = "the facts commit result";
    let row = rows
        .first()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "the facts commit statement returned no row"))?;
    let new = column::<Option<i64>>(user, row, 0, WHAT)?
        .map(|v| counter(user, Some(v), "the new facts version"))
        .transpose()?;
    // No user row reads as version 0, as a load would.
    let current = counter(
        user,
        Some(column::<Option<i64>>(user, row, 1, WHAT)?.unwrap_or(0)),
        "version",
    )?;
    Ok((new, current, column(user, row, 2, WHAT)?))
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
        let user = UserId::new("ada").unwrap();
        let back: Vec<_> = p
            .ids
            .iter()
            .zip(&p.facts)
            .map(|(&id, j)| read_fact(&user, j.as_bytes(), id as u64, "a fact").unwrap())
            .collect();
        assert_eq!(back, commit.set().facts());
        assert_eq!(p.entry_facts, [1, 2]);
        let back: Vec<_> = p
            .entry_facts
            .iter()
            .zip(&p.entries)
            .map(|(&fact, j)| read_change(&user, j.as_bytes(), fact as u64, "an entry").unwrap())
            .collect();
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
    fn counters_are_never_negative_or_null() {
        let user = UserId::new("ada").unwrap();
        let e = counter(&user, Some(-1), "version").unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert_eq!(
            e.to_string(),
            "stored data is corrupt: user \"ada\"'s facts: version is -1"
        );
        let e = counter(&user, None, "next_id").unwrap_err().to_string();
        assert!(e.ends_with("next_id is NULL"), "{e}");
        assert_eq!(counter(&user, Some(3), "version").unwrap(), 3);
    }
}
