//! Users' [facts](chatmem::facts): the tables `fact_users`, `facts` and `fact_history`
//! (`migrate::FACTS_TABLES`). A fact is kept as the JSON chatmem writes for a
//! [`Fact`] ([`fact_json`]), a history entry as a [`FactChange`]'s ([`change_json`]), so what
//! they hold is chatmem's to say and a new field needs no new column; the columns beside the
//! JSON are the keys (the fact's id is in both, and a row whose two disagree is corrupt).
//! Reading is chatmem's readers' ([`read_fact`], [`read_change`], [`read_fact_set`]), as in
//! every store: an error names the user and the column, never what it holds. Users are
//! compared as exact strings (`=`, SQLite's binary collation), never as patterns. Nothing here
//! expires: facts belong to a user, not to a conversation.

use std::collections::HashMap;
use std::fmt;

use chatmem::UserId;
use chatmem::facts::{Fact, FactChange};
use chatmem::store::{
    FactsCommit, StoreError, StoredFacts, change_json, fact_json, read_change, read_fact, read_fact_set,
};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::error::db_error;
use crate::params::to_i64;

/// The user row joined to the user's facts, in id order: no row at all for an unknown (or
/// forgotten) user, one row with a NULL fact for a user with no current fact.
const LOAD: &str = "
SELECT u.version, u.next_id, f.id, f.json
FROM fact_users u
LEFT JOIN facts f ON f.user_id = u.user_id
WHERE u.user_id = ?1
ORDER BY f.id";

/// A stored id, count or version: never negative.
fn to_u64(user: &UserId, value: i64, what: impl fmt::Display) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::facts_corrupt(user, format!("{what} is {value}")))
}

/// The JSON text in column `i` of `row`; `None` when it holds something else.
fn json_text<'r>(row: &'r Row<'_>, i: usize, op: &str) -> Result<Option<&'r [u8]>, StoreError> {
    match row.get_ref(i).map_err(|e| db_error(op, e))? {
        ValueRef::Text(json) => Ok(Some(json)),
        _ => Ok(None),
    }
}

/// The fact in the row (`id`, `json`) from column `first` on.
fn fact(row: &Row<'_>, first: usize, user: &UserId, op: &str) -> Result<Fact, StoreError> {
    let id: i64 = row.get(first).map_err(|e| db_error(op, e))?;
    let id = to_u64(user, id, "facts.id")?;
    let what = format!("facts.json of fact {id}");
    let Some(json) = json_text(row, first + 1, op)? else {
        return Err(StoreError::facts_corrupt(user, format!("{what} is not JSON text")));
    };
    read_fact(user, json, id, &what)
}

/// One statement: the user row joined to the user's facts.
pub(crate) fn load(conn: &Connection, user: &UserId) -> Result<StoredFacts, StoreError> {
    const WHAT: &str = "loading a user's facts";
    let err = |e| db_error(WHAT, e);
    let mut stmt = conn.prepare_cached(LOAD).map_err(err)?;
    let mut rows = stmt.query([user.as_str()]).map_err(err)?;
    let mut head: Option<(u64, u64)> = None;
    let mut facts = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        if head.is_none() {
            let version = to_u64(user, row.get(0).map_err(err)?, "fact_users.version")?;
            let next_id = to_u64(user, row.get(1).map_err(err)?, "fact_users.next_id")?;
            head = Some((version, next_id));
        }
        // The user row joined to no fact: no current fact.
        if !matches!(row.get_ref(2).map_err(err)?, ValueRef::Null) {
            facts.push(fact(row, 2, user, WHAT)?);
        }
    }
    let Some((version, next_id)) = head else {
        return Ok(StoredFacts::default());
    };
    let set = read_fact_set(user, facts, next_id)?;
    Ok(StoredFacts { set, version })
}

/// A commit's rows, converted before the write lock is taken.
struct CommitRows {
    /// The token as SQLite keeps it: the u64's bits as an i64.
    token: i64,
    expected: u64,
    next_id: i64,
    /// The set's facts: id and JSON.
    facts: Vec<(i64, String)>,
    /// The history entries, in order: fact and JSON.
    history: Vec<(i64, String)>,
    dropped: Vec<i64>,
}

impl CommitRows {
    fn new(commit: FactsCommit) -> Result<Self, StoreError> {
        let (token, expected) = (commit.token(), commit.expected_version());
        let (set, history, dropped) = commit.into_parts();
        Ok(Self {
            token: i64::from_ne_bytes(token.to_ne_bytes()),
            expected,
            next_id: to_i64(set.next_id(), "next fact id")?,
            facts: set
                .facts()
                .iter()
                .map(|f| Ok((to_i64(f.id, "fact id")?, fact_json(f)?)))
                .collect::<Result<_, StoreError>>()?,
            history: history
                .iter()
                .map(|c| Ok((to_i64(c.fact, "fact id")?, change_json(c)?)))
                .collect::<Result<_, StoreError>>()?,
            dropped: dropped
                .into_iter()
                .map(|id| to_i64(id, "fact id"))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// One IMMEDIATE transaction: the version check (a resent commit answered with the version
/// it made), the set written where it changed (facts gone deleted, new or changed ones
/// written, the others left alone), the dropped facts' history deleted, the new entries
/// appended, the user row's version, next id and token set.
pub(crate) fn commit(conn: &mut Connection, user: &UserId, commit: FactsCommit) -> Result<u64, StoreError> {
    const WHAT: &str = "committing a user's facts";
    let err = |e| db_error(WHAT, e);
    let p = CommitRows::new(commit)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let row: Option<(i64, i64)> = tx
        .prepare_cached("SELECT version, commit_token FROM fact_users WHERE user_id = ?1")
        .and_then(|mut s| s.query_row([user.as_str()], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(err)?;
    let (current, stored_token) = match row {
        Some((version, token)) => (to_u64(user, version, "fact_users.version")?, Some(token)),
        None => (0, None),
    };
    // The version check is the only check: a `FactsCommit` cannot be built invalid.
    if current != p.expected {
        // The same commit sent again: answered as applied, not applied twice.
        if p.expected.checked_add(1) == Some(current) && stored_token == Some(p.token) {
            return Ok(current);
        }
        return Err(StoreError::facts_conflict());
    }
    let new_version = current
        .checked_add(1)
        .ok_or_else(|| StoreError::facts_corrupt(user, "fact_users.version is at its largest"))?;
    let version = to_i64(new_version, "facts version")?;
    {
        // Which stored facts the new set leaves as they are, and which it takes away.
        let mut writes: HashMap<i64, &str> = p.facts.iter().map(|(id, json)| (*id, json.as_str())).collect();
        let mut gone = Vec::new();
        let mut stored = tx
            .prepare_cached("SELECT id, json FROM facts WHERE user_id = ?1")
            .map_err(err)?;
        let mut rows = stored.query([user.as_str()]).map_err(err)?;
        while let Some(row) = rows.next().map_err(err)? {
            let id: i64 = row.get(0).map_err(err)?;
            match writes.get(&id) {
                None => gone.push(id),
                Some(json) if matches!(row.get_ref(1).map_err(err)?, ValueRef::Text(t) if t == json.as_bytes()) => {
                    writes.remove(&id);
                }
                // Changed (or unreadable, and written over).
                Some(_) => {}
            }
        }
        drop(rows);
        let mut delete = tx
            .prepare_cached("DELETE FROM facts WHERE user_id = ?1 AND id = ?2")
            .map_err(err)?;
        for id in gone {
            delete.execute(params![user.as_str(), id]).map_err(err)?;
        }
        let mut write = tx
            .prepare_cached(
                "INSERT INTO facts (user_id, id, json) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user_id, id) DO UPDATE SET json = excluded.json",
            )
            .map_err(err)?;
        for (id, json) in &p.facts {
            if writes.contains_key(id) {
                write.execute(params![user.as_str(), id, json]).map_err(err)?;
            }
        }
        let mut forget = tx
            .prepare_cached("DELETE FROM fact_history WHERE user_id = ?1 AND fact = ?2")
            .map_err(err)?;
        for id in &p.dropped {
            forget.execute(params![user.as_str(), id]).map_err(err)?;
        }
        let mut append = tx
            .prepare_cached("INSERT INTO fact_history (user_id, fact, version, n, json) VALUES (?1, ?2, ?3, ?4, ?5)")
            .map_err(err)?;
        for (n, (fact, json)) in p.history.iter().enumerate() {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            append
                .execute(params![user.as_str(), fact, version, n, json])
                .map_err(err)?;
        }
    }
    tx.prepare_cached(
        "INSERT INTO fact_users (user_id, version, next_id, commit_token) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET
             version = excluded.version,
             next_id = excluded.next_id,
             commit_token = excluded.commit_token",
    )
    .and_then(|mut s| s.execute(params![user.as_str(), version, p.next_id, p.token]))
    .map_err(err)?;
    tx.commit().map_err(err)?;
    Ok(new_version)
}

/// One statement: fact `fact`'s history entries, in the order committed.
pub(crate) fn history(conn: &Connection, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
    const WHAT: &str = "reading a fact's history";
    let err = |e| db_error(WHAT, e);
    // Ids above i64::MAX are never given.
    let Ok(id) = i64::try_from(fact) else {
        return Ok(Vec::new());
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT version, n, json FROM fact_history WHERE user_id = ?1 AND fact = ?2 ORDER BY version, n",
        )
        .map_err(err)?;
    let mut rows = stmt.query(params![user.as_str(), id]).map_err(err)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(err)? {
        let (version, n): (i64, i64) = (row.get(0).map_err(err)?, row.get(1).map_err(err)?);
        let what = format!("fact_history.json of fact {fact} (version {version}, entry {n})");
        let Some(json) = json_text(row, 2, WHAT)? else {
            return Err(StoreError::facts_corrupt(user, format!("{what} is not JSON text")));
        };
        out.push(read_change(user, json, fact, &what)?);
    }
    Ok(out)
}

/// One IMMEDIATE transaction: the user row (reporting whether there was one: a facts commit
/// applied since the user was last forgotten), the facts and all their history deleted.
pub(crate) fn forget(conn: &mut Connection, user: &UserId) -> Result<bool, StoreError> {
    let err = |e| db_error("forgetting a user's facts", e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let delete = |sql: &str| {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.execute([user.as_str()]))
            .map_err(err)
    };
    let kept = delete("DELETE FROM fact_users WHERE user_id = ?1")? > 0;
    delete("DELETE FROM facts WHERE user_id = ?1")?;
    delete("DELETE FROM fact_history WHERE user_id = ?1")?;
    tx.commit().map_err(err)?;
    Ok(kept)
}
