//! Users' facts in rows: a [`FactsCommit`] as the facts commit statement's parameters, and
//! the rows of the facts statements read back, bad data becoming `Corrupt` errors.
//!
//! A fact and a history entry are each kept as the JSON [`chatmem::store::fact_json`] and
//! [`chatmem::store::change_json`] write, beside the ids the statements select by, and read
//! back by chatmem's readers ([`read_fact`], [`read_change`], [`read_fact_set`]), which check
//! the JSON against those ids and the set against [`FactSet`](chatmem::facts::FactSet)'s
//! rules. An error says which row is bad, never what it holds: a fact's text is private.

use std::borrow::Cow;

use deadpool_postgres::tokio_postgres::Row;
use deadpool_postgres::tokio_postgres::types::FromSql;

use chatmem::UserId;
use chatmem::facts::FactChange;
use chatmem::store::{FactsCommit, StoreError, StoreErrorKind, StoredFacts, change_json, fact_json, read_change};
use chatmem_sql::{FactsRow, facts_counter, to_bigint};

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

/// Reads the rows of `sql::FACTS_LOAD` for `user`: no row, an unknown user. The columns are
/// read here; what they mean, [`chatmem_sql::stored_facts`].
pub(crate) fn stored_facts(user: &UserId, rows: &[Row]) -> Result<StoredFacts, StoreError> {
    const ROW: &str = "a facts row";
    chatmem_sql::stored_facts(
        user,
        rows.iter().map(|row| {
            let a: Option<i64> = column(user, row, 1, ROW)?;
            Ok(match column::<i32>(user, row, 0, ROW)? {
                0 => FactsRow::User {
                    version: a,
                    next_id: column(user, row, 2, "the facts' user row")?,
                },
                1 => FactsRow::Fact {
                    id: a,
                    json: column::<Option<&str>>(user, row, 3, "a fact's row")?.map(|j| Cow::Borrowed(j.as_bytes())),
                },
                kind => FactsRow::Other(kind.into()),
            })
        }),
    )
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
        .map(|v| facts_counter(user, Some(v), "the new facts version"))
        .transpose()?;
    // No user row reads as version 0, as a load would.
    let current = facts_counter(
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
    use chatmem::store::read_fact;

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
}
