//! Users' [facts](chatmem::facts): three hashes per user under one hash tag of its own (see
//! [`crate::keys`]), read and written in one round trip each.
//!
//! - `<prefix>:{u:<tag>}:user`: `version`, `next_id` (the id the next new fact gets), `token`
//!   (the last facts commit's) and `id` (the raw user id). A user is this hash: without it
//!   (never committed, forgotten, evicted or deleted by hand) the user is unknown, whatever
//!   facts or history were left behind, and the next commit deletes those first.
//! - `<prefix>:{u:<tag>}:facts`: fact id (decimal) -> the fact as the JSON
//!   [`chatmem::store::fact_json`] writes of a [`Fact`].
//! - `<prefix>:{u:<tag>}:history`: fact id -> the fact's [`FactChange`]s as JSON
//!   ([`chatmem::store::change_json`]'s), each followed by a newline, in the order committed
//!   (that compact JSON escapes every control character, so an entry never holds a newline of
//!   its own).
//!
//! A load is a `MULTI`/`EXEC` of `HMGET` (version, next id) and `HGETALL`: no script, whose
//! reply would pass through Lua. A commit is one script ([`FACTS_COMMIT`](crate::scripts::FACTS_COMMIT)):
//! the version check, then only what changed is written (the facts the commit made or changed,
//! those no longer in the set deleted, the dropped facts' history deleted, each fact's new
//! entries appended to its field). A fact's history and forgetting a user are a `MULTI`/`EXEC`
//! each. None of these keys is ever given a TTL: facts belong to a user, not a conversation.
//!
//! Reading is chatmem's readers' ([`read_fact`], [`read_change`], [`read_fact_set`]): they
//! check the JSON against the field it is in and the set against
//! [`FactSet`](chatmem::facts::FactSet)'s rules. An error says which field is bad, never what
//! it holds: a fact's text is private.

use std::collections::{BTreeMap, BTreeSet};

use chatmem::UserId;
use chatmem::facts::{Fact, FactChange};
use chatmem::store::{
    FactsCommit, StoreError, StoredFacts, change_json, fact_json, read_change, read_fact, read_fact_set,
};
use redis::Value;

use crate::reply::{reply_bytes, reply_num};
use crate::store::RedisStore;

/// The facts commit script's `ARGV` (see [`FACTS_COMMIT`](crate::scripts::FACTS_COMMIT)).
///
/// Only the facts the commit made or changed are written: [`FactsCommit`] gives every such
/// fact a history entry and none to a fact it leaves as it was, and the version check makes
/// what was loaded the stored set.
pub(crate) fn commit_args(user: &UserId, commit: &FactsCommit) -> Result<Vec<String>, StoreError> {
    let expected = commit.expected_version();
    let version = expected
        .checked_add(1)
        .ok_or_else(|| StoreError::facts_corrupt(user, "the version is at its largest"))?;
    let set = commit.set();
    let history = commit.history();
    let changed: BTreeSet<u64> = history.iter().map(|c| c.fact).collect();
    let mut lines: BTreeMap<u64, String> = BTreeMap::new();
    for change in history {
        let line = lines.entry(change.fact).or_default();
        line.push_str(&change_json(change)?);
        line.push('\n');
    }
    let mut args = vec![
        expected.to_string(),
        version.to_string(),
        commit.token().to_string(),
        set.next_id().to_string(),
        user.as_str().to_owned(),
        set.len().to_string(),
    ];
    args.extend(set.facts().iter().map(|f| f.id.to_string()));
    let written: Vec<&Fact> = set.facts().iter().filter(|f| changed.contains(&f.id)).collect();
    args.push(written.len().to_string());
    for fact in written {
        args.push(fact.id.to_string());
        args.push(fact_json(fact)?);
    }
    args.push(commit.dropped().len().to_string());
    args.extend(commit.dropped().iter().map(u64::to_string));
    args.push(lines.len().to_string());
    for (fact, line) in lines {
        args.push(fact.to_string());
        args.push(line);
    }
    Ok(args)
}

/// A hash's fields and values as `HGETALL` answers them: a flat array (RESP2) or a map
/// (RESP3); nil or an empty reply for no key.
fn hash_pairs(reply: Value) -> Option<Vec<(Value, Value)>> {
    match reply {
        Value::Nil => Some(Vec::new()),
        Value::Map(pairs) => Some(pairs),
        Value::Array(items) if items.len() % 2 == 0 => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut items = items.into_iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                pairs.push((k, v));
            }
            Some(pairs)
        }
        _ => None,
    }
}

/// Reads a load's replies: the header's `version` and `next_id`, and the facts hash.
pub(crate) fn stored_facts(user: &UserId, header: &[Value], facts: Value) -> Result<StoredFacts, StoreError> {
    let [version, next_id] = header else {
        return Err(StoreError::facts_corrupt(user, "unexpected load reply"));
    };
    if matches!(version, Value::Nil) {
        // No header: an unknown user, whatever was left behind.
        return Ok(StoredFacts::default());
    }
    let version = reply_num(version).ok_or_else(|| StoreError::facts_corrupt(user, "field version is not a number"))?;
    let next_id = reply_num(next_id)
        .ok_or_else(|| StoreError::facts_corrupt(user, "field next_id is missing or not a number"))?;
    let pairs = hash_pairs(facts).ok_or_else(|| StoreError::facts_corrupt(user, "unexpected load reply"))?;
    let mut set = Vec::with_capacity(pairs.len());
    for (field, value) in pairs {
        let id = reply_num(&field).ok_or_else(|| StoreError::facts_corrupt(user, "a fact's field is not a fact id"))?;
        let what = format!("fact {id}");
        let text =
            reply_bytes(&value).ok_or_else(|| StoreError::facts_corrupt(user, format!("{what} is not a string")))?;
        set.push(read_fact(user, &text, id, &what)?);
    }
    let set = read_fact_set(user, set, next_id)?;
    Ok(StoredFacts { set, version })
}

/// Reads fact `fact`'s history field: its entries, one JSON a line.
pub(crate) fn history(user: &UserId, fact: u64, lines: &[u8]) -> Result<Vec<FactChange>, StoreError> {
    let what = format!("a history entry of fact {fact}");
    let lines = lines.strip_suffix(b"\n").unwrap_or(lines);
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    lines
        .split(|&b| b == b'\n')
        .map(|line| read_change(user, line, fact, &what))
        .collect()
}

impl RedisStore {
    /// The user's facts: `HMGET` of the header and `HGETALL` of the facts in one
    /// `MULTI`/`EXEC` (one round trip, one slot).
    pub(crate) async fn load_user_facts(&self, user: &UserId) -> Result<StoredFacts, StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HMGET")
            .arg(self.keys.user(user))
            .arg("version")
            .arg("next_id")
            .cmd("HGETALL")
            .arg(self.keys.facts(user));
        let pipe = &pipe;
        let (header, facts): (Vec<Value>, Value) = self
            .run("loading a user's facts", |mut conn| async move {
                pipe.query_async(&mut conn).await
            })
            .await?;
        stored_facts(user, &header, facts)
    }

    /// One `EVALSHA` of the facts commit script, resent once after a timeout (its token makes
    /// a resend of a commit that landed answer with the version it made).
    pub(crate) async fn commit_user_facts(&self, user: &UserId, commit: &FactsCommit) -> Result<u64, StoreError> {
        let mut inv = self.scripts.facts_commit.prepare_invoke();
        inv.key(self.keys.user(user))
            .key(self.keys.facts(user))
            .key(self.keys.fact_history(user));
        for arg in commit_args(user, commit)? {
            inv.arg(arg);
        }
        let inv = &inv;
        let (code, version): (i64, Value) = self
            .run_commit("committing a user's facts", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        match code {
            1 => reply_num(&version).ok_or_else(|| StoreError::facts_corrupt(user, "the commit returned no version")),
            0 => Err(StoreError::facts_conflict()),
            _ => Err(StoreError::facts_corrupt(user, "field version is not a number")),
        }
    }

    /// Fact `fact`'s history: the header's version (is there such a user?) and the fact's
    /// history field in one `MULTI`/`EXEC`.
    pub(crate) async fn user_fact_history(&self, user: &UserId, fact: u64) -> Result<Vec<FactChange>, StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HGET")
            .arg(self.keys.user(user))
            .arg("version")
            .cmd("HGET")
            .arg(self.keys.fact_history(user))
            .arg(fact);
        let pipe = &pipe;
        let (version, lines): (Value, Option<Vec<u8>>) = self
            .run("reading a fact's history", |mut conn| async move {
                pipe.query_async(&mut conn).await
            })
            .await?;
        match (version, lines) {
            // No header: an unknown user, whatever history was left behind.
            (Value::Nil, _) | (_, None) => Ok(Vec::new()),
            (_, Some(lines)) => history(user, fact, &lines),
        }
    }

    /// Deletes the user's three keys in one `MULTI`/`EXEC`, the header's version read first:
    /// whether there was a user to forget.
    pub(crate) async fn forget_user_facts(&self, user: &UserId) -> Result<bool, StoreError> {
        let mut pipe = redis::pipe();
        // The header's HGET first: a pipeline goes to the slot of its first single-key command
        // (DEL may name keys of several slots).
        pipe.atomic()
            .cmd("HGET")
            .arg(self.keys.user(user))
            .arg("version")
            .cmd("DEL")
            .arg(self.keys.user(user))
            .arg(self.keys.facts(user))
            .arg(self.keys.fact_history(user))
            .ignore();
        let pipe = &pipe;
        let (version,): (Value,) = self
            .run("forgetting a user's facts", |mut conn| async move {
                pipe.query_async(&mut conn).await
            })
            .await?;
        Ok(!matches!(version, Value::Nil))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chatmem::facts::{FactLimits, FactSet, add};
    use chatmem::store::StoreErrorKind;

    fn user() -> UserId {
        UserId::new("u{1}").unwrap()
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_commit_becomes_its_arguments() {
        let loaded = StoredFacts::default();
        let (one, _) = add(&loaded.set, "Prefers email", None, &FactLimits::default(), 7).unwrap();
        let (two, _) = add(&one.set, "Works nights", None, &FactLimits::default(), 8).unwrap();
        let commit = FactsCommit::new(&loaded, one.then(two)).unwrap().unwrap();
        let args = commit_args(&user(), &commit).unwrap();
        let facts: Vec<String> = commit.set().facts().iter().map(|f| fact_json(f).unwrap()).collect();
        let entries: Vec<String> = commit
            .history()
            .iter()
            .map(|c| change_json(c).unwrap() + "\n")
            .collect();
        let token = commit.token().to_string();
        let want = [
            "0",
            "1",
            &token,
            "3",
            "u{1}", // versions, token, next id, raw id
            "2",
            "1",
            "2", // the set's ids
            "2",
            "1",
            &facts[0],
            "2",
            &facts[1], // the facts written
            "0",       // nothing dropped
            "2",
            "1",
            &entries[0],
            "2",
            &entries[1], // each fact's new entries
        ];
        assert_eq!(args, want);

        // A pin writes the one fact it changed; a deletion writes none and drops history.
        let stored = StoredFacts {
            set: commit.set().clone(),
            version: 1,
        };
        let pinned = chatmem::facts::pin(&stored.set, 2, &FactLimits::default(), &chatmem::Heuristic, 9).unwrap();
        let pinning = FactsCommit::new(&stored, pinned).unwrap().unwrap();
        let args = commit_args(&user(), &pinning).unwrap();
        assert_eq!(
            args[..9],
            ["1", "2", &pinning.token().to_string(), "3", "u{1}", "2", "1", "2", "1"]
        );
        assert_eq!(args[9], "2");
        assert_eq!(
            read_fact(&user(), args[10].as_bytes(), 2, "a fact").unwrap(),
            pinning.set().facts()[1]
        );
        assert_eq!(args[11..14], ["0", "1", "2"]);
        let deleting = FactsCommit::deleting(&stored, &[1]).unwrap().unwrap();
        let args = commit_args(&user(), &deleting).unwrap();
        assert_eq!(
            args[..],
            [
                "1",
                "2",
                &deleting.token().to_string(),
                "3",
                "u{1}",
                "1",
                "2",
                "0",
                "1",
                "1",
                "0"
            ]
        );
    }

    #[test]
    fn a_load_reads_back_and_bad_data_is_corrupt_without_quoting_it() {
        let (added, _) = add(&FactSet::default(), "Lives in Berlin", None, &FactLimits::default(), 1).unwrap();
        let fact = fact_json(&added.set.facts()[0]).unwrap();
        let header = [bulk("4"), bulk("2")];
        let facts = || Value::Array(vec![bulk("1"), bulk(&fact)]);
        let loaded = stored_facts(&user(), &header, facts()).unwrap();
        assert_eq!((loaded.set, loaded.version), (added.set.clone(), 4));
        let map = Value::Map(vec![(bulk("1"), bulk(&fact))]);
        assert_eq!(stored_facts(&user(), &header, map).unwrap().set, added.set);
        assert_eq!(
            stored_facts(&user(), &[Value::Nil, Value::Nil], facts()).unwrap(),
            StoredFacts::default(),
            "no header: an unknown user"
        );
        let damaged = |header: &[Value], facts: Value| {
            let e = stored_facts(&user(), header, facts).unwrap_err();
            assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
            let text = e.to_string();
            assert!(!text.contains("Berlin"), "a fact's text is private: {text}");
            text
        };
        let text = damaged(
            &header,
            Value::Array(vec![bulk("1"), bulk(r#"{"id": 1, "text": ["Lives in Berlin"]}"#)]),
        );
        assert!(
            text.ends_with("fact 1 is not valid JSON of a fact (field `text`)"),
            "{text}"
        );
        assert!(text.contains("user \"u{1}\"'s facts"), "{text}");
        let text = damaged(&header, Value::Array(vec![bulk("2"), bulk(&fact)]));
        assert!(text.ends_with("fact 2 holds fact 1"), "{text}");
        let text = damaged(&header, Value::Array(vec![bulk("x"), bulk(&fact)]));
        assert!(text.ends_with("a fact's field is not a fact id"), "{text}");
        let text = damaged(&[bulk("4"), bulk("1")], facts());
        assert!(text.contains("the set breaks a rule"), "{text}");
        let text = damaged(&[bulk("-1"), bulk("2")], facts());
        assert!(text.ends_with("field version is not a number"), "{text}");
        let text = damaged(&header, Value::Array(vec![bulk("1"), bulk(&format!("{fact} {fact}"))]));
        assert!(text.ends_with("fact 1 holds more than one JSON value"), "{text}");
    }

    #[test]
    fn history_reads_one_entry_a_line() {
        let (one, _) = add(&FactSet::default(), "Lives in Berlin", None, &FactLimits::default(), 1).unwrap();
        let pinned = chatmem::facts::pin(&one.set, 1, &FactLimits::default(), &chatmem::Heuristic, 2).unwrap();
        let entries: Vec<FactChange> = one.changes.into_iter().chain(pinned.changes).collect();
        let lines: String = entries.iter().map(|c| change_json(c).unwrap() + "\n").collect();
        assert_eq!(history(&user(), 1, lines.as_bytes()).unwrap(), entries);
        assert!(history(&user(), 1, b"").unwrap().is_empty());
        let e = history(&user(), 2, lines.as_bytes()).unwrap_err().to_string();
        assert!(e.ends_with("a history entry of fact 2 is of fact 1"), "{e}");
        assert!(!e.contains("Berlin"), "{e}");
        let e = history(&user(), 1, format!("{lines}[1\n").as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("a history entry of fact 1 is not valid JSON of a history entry"),
            "{e}"
        );
    }
}
