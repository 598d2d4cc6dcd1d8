//! Users' facts as stores keep them: each [`Fact`] and each [`FactChange`] as the JSON
//! serde_json writes of it, beside the ids the store selects by. The one place the rules of
//! writing and reading that JSON live, so every store checks stored facts alike:
//!
//! - [`fact_json`] and [`change_json`] write a fact and a history entry;
//! - [`read_fact`] and [`read_change`] read one back whole (one JSON value, nothing after
//!   it) and check it against the id the store keeps beside it;
//! - [`read_fact_set`] checks the facts read against [`FactSet::new`]'s rules.
//!
//! Every reading error is [`StoreError::facts_corrupt`]: it names the user and the record (a
//! row, a column, a hash field, as the store's `what` says) and, for JSON of the wrong shape,
//! the JSON field; it never quotes what the record holds and never carries serde_json's error
//! as its source. A fact's text is private, store errors are logged, and serde_json's message
//! can quote the value it could not read (`invalid type: string "Lives in Berlin"`).

use std::fmt;

use crate::error::{StoreError, StoreErrorKind};
use crate::facts::{Fact, FactChange, FactSet, UserId};
use crate::json_error::deserialize_json;

/// `fact` as the JSON a store keeps.
///
/// # Errors
/// A [`StoreError`] of kind `Other` if serde_json cannot write it (it always can: a fact holds
/// only strings and numbers), without serde_json's error, which could quote the fact.
pub fn fact_json(fact: &Fact) -> Result<String, StoreError> {
    written(serde_json::to_string(fact), "a fact")
}

/// `change` (a fact's history entry) as the JSON a store keeps.
///
/// # Errors
/// As [`fact_json`]'s.
pub fn change_json(change: &FactChange) -> Result<String, StoreError> {
    written(serde_json::to_string(change), "a fact's history entry")
}

fn written(json: serde_json::Result<String>, what: &str) -> Result<String, StoreError> {
    json.map_err(|_| StoreError::new(StoreErrorKind::Other, format!("writing {what} as JSON")))
}

/// The fact that `json`, stored as fact `id`'s, holds: `what` names where it was read (`fact
/// 3's row`, `facts.json of fact 3`), for the error.
///
/// ```
/// use chatmem::UserId;
/// use chatmem::facts::{FactLimits, FactSet, add};
/// use chatmem::store::{fact_json, read_fact};
/// let user = UserId::new("ada")?;
/// let (added, id) = add(&FactSet::default(), "Lives in Berlin", None, &FactLimits::default(), 1)?;
/// let json = fact_json(&added.set.facts()[0])?;
/// assert_eq!(read_fact(&user, json.as_bytes(), id, "fact 1's row")?, added.set.facts()[0]);
/// let e = read_fact(&user, br#"{"id": 1, "text": ["Lives in Berlin"]}"#, 1, "fact 1's row").unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "stored data is corrupt: user \"ada\"'s facts: fact 1's row is not valid JSON of a fact (field `text`)"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// A [`StoreError`] of kind `Corrupt` naming `user` and `what` when `json` is not one JSON
/// value, is not a fact's (the JSON field named when one is wrong) or is another fact's.
pub fn read_fact(user: &UserId, json: &[u8], id: u64, what: &str) -> Result<Fact, StoreError> {
    let fact: Fact = read_one(user, json, what, "a fact")?;
    if fact.id != id {
        return Err(StoreError::facts_corrupt(
            user,
            format!("{what} holds fact {}", fact.id),
        ));
    }
    Ok(fact)
}

/// The history entry that `json`, stored as one of fact `fact`'s, holds: `what` names where it
/// was read, for the error.
///
/// # Errors
/// A [`StoreError`] of kind `Corrupt` naming `user` and `what` when `json` is not one JSON
/// value, is not a history entry's (the JSON field named when one is wrong) or is an entry of
/// another fact.
pub fn read_change(user: &UserId, json: &[u8], fact: u64, what: &str) -> Result<FactChange, StoreError> {
    let change: FactChange = read_one(user, json, what, "a history entry")?;
    if change.fact != fact {
        return Err(StoreError::facts_corrupt(
            user,
            format!("{what} is of fact {}", change.fact),
        ));
    }
    Ok(change)
}

/// The set of `user`'s stored `facts` (in any order), whose next new fact gets `next_id`.
///
/// # Errors
/// A [`StoreError`] of kind `Corrupt` naming `user` and the rule of [`FactSet::new`] broken.
pub fn read_fact_set(user: &UserId, facts: Vec<Fact>, next_id: u64) -> Result<FactSet, StoreError> {
    // The rule's message names ids and keys, never a text.
    FactSet::new(facts, next_id).map_err(|e| StoreError::facts_corrupt(user, format!("the set breaks a rule: {e}")))
}

/// The one `T` (`kind` naming it) that `json` holds, nothing after it.
fn read_one<'a, T: serde::Deserialize<'a>>(
    user: &UserId,
    json: &'a [u8],
    what: &str,
    kind: &str,
) -> Result<T, StoreError> {
    let corrupt = |why: fmt::Arguments<'_>| StoreError::facts_corrupt(user, format!("{what} {why}"));
    let mut de = serde_json::Deserializer::from_slice(json);
    // The JSON field's path only: the reason can quote the value.
    let value = deserialize_json::<_, T>(&mut de).map_err(|e| match e.path() {
        Some(field) => corrupt(format_args!("is not valid JSON of {kind} (field `{field}`)")),
        None => corrupt(format_args!("is not valid JSON of {kind}")),
    })?;
    de.end()
        .map_err(|_| corrupt(format_args!("holds more than one JSON value")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{ChangeKind, FactLimits, add};

    const SECRET: &str = "Lives in Berlin";

    fn user() -> UserId {
        UserId::new("ada").unwrap()
    }

    /// The error's message and every source's, joined.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(source) = next {
            out.push_str(": ");
            out.push_str(&source.to_string());
            next = source.source();
        }
        out
    }

    /// A corrupt error naming the user, quoting no part of the secret text.
    fn corrupt(e: StoreError) -> String {
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        assert_eq!(e.user(), Some(&user()), "{e}");
        assert!(
            std::error::Error::source(&e).is_none(),
            "no serde_json error kept: {e:?}"
        );
        let all = chain(&e);
        // Its words too: a message that cut the text short would still quote it.
        for word in SECRET.split(' ').filter(|w| w.len() > 3) {
            assert!(!all.contains(word), "{word:?} quoted: {all}");
        }
        e.context().to_owned()
    }

    fn one() -> (Fact, FactChange) {
        let (added, _) = add(&FactSet::default(), SECRET, None, &FactLimits::default(), 7).unwrap();
        (added.set.facts()[0].clone(), added.changes[0].clone())
    }

    #[test]
    fn facts_and_entries_round_trip() {
        let (fact, change) = one();
        let json = fact_json(&fact).unwrap();
        assert_eq!(read_fact(&user(), json.as_bytes(), 1, "fact 1").unwrap(), fact);
        let json = change_json(&change).unwrap();
        assert!(!json.contains('\n'), "one line: {json}");
        let back = read_change(&user(), json.as_bytes(), 1, "an entry").unwrap();
        assert_eq!(back, change);
        assert!(matches!(back.kind, ChangeKind::Added { .. }));
        // Whitespace around the one value is no second value.
        let spaced = format!(" {json}\n");
        assert_eq!(read_change(&user(), spaced.as_bytes(), 1, "an entry").unwrap(), change);
        let set = read_fact_set(&user(), vec![fact.clone()], 2).unwrap();
        assert_eq!(set.facts(), [fact]);
    }

    #[test]
    fn bad_json_names_the_record_and_the_field_never_the_text() {
        let fact = |json: &str| read_fact(&user(), json.as_bytes(), 1, "fact 1's row");
        // The wrong type, the text being the value serde_json would quote.
        let why = corrupt(fact(&format!(r#"{{"id": 1, "text": ["{SECRET}"]}}"#)).unwrap_err());
        assert_eq!(why, "fact 1's row is not valid JSON of a fact (field `text`)");
        let why = corrupt(fact(&format!(r#"{{"id": "{SECRET}"}}"#)).unwrap_err());
        assert_eq!(why, "fact 1's row is not valid JSON of a fact (field `id`)");
        // An unknown variant quotes its name; a text there is never shown either.
        let (_, change) = one();
        let entry = change_json(&change)
            .unwrap()
            .replacen("\"added\"", &format!("\"{SECRET}\""), 1);
        assert!(entry.contains(SECRET), "{entry}");
        let why = corrupt(read_change(&user(), entry.as_bytes(), 1, "an entry").unwrap_err());
        assert!(
            why.starts_with("an entry is not valid JSON of a history entry"),
            "{why}"
        );
        // Not JSON at all, cut short, not UTF-8.
        for bad in [SECRET.to_owned(), format!("{{\"id\": 1, \"text\": \"{SECRET}")] {
            let why = corrupt(fact(&bad).unwrap_err());
            assert!(why.starts_with("fact 1's row is not valid JSON of a fact"), "{why}");
        }
        let why = corrupt(read_fact(&user(), b"{\"id\": 1, \"text\": \"\xff\"}", 1, "fact 1's row").unwrap_err());
        assert!(why.starts_with("fact 1's row is not valid JSON of a fact"), "{why}");
    }

    #[test]
    fn a_second_value_or_another_id_is_corrupt() {
        let (fact, change) = one();
        let json = fact_json(&fact).unwrap();
        let why = corrupt(read_fact(&user(), format!("{json} {json}").as_bytes(), 1, "fact 1's row").unwrap_err());
        assert_eq!(why, "fact 1's row holds more than one JSON value");
        let why = corrupt(read_fact(&user(), format!("{json} 1").as_bytes(), 1, "fact 1's row").unwrap_err());
        assert_eq!(why, "fact 1's row holds more than one JSON value");
        let why = corrupt(read_fact(&user(), json.as_bytes(), 2, "fact 2's row").unwrap_err());
        assert_eq!(why, "fact 2's row holds fact 1");
        let entry = change_json(&change).unwrap();
        let why = corrupt(read_change(&user(), entry.as_bytes(), 3, "an entry of fact 3").unwrap_err());
        assert_eq!(why, "an entry of fact 3 is of fact 1");
        let why = corrupt(read_change(&user(), format!("{entry}{entry}").as_bytes(), 1, "an entry").unwrap_err());
        assert_eq!(why, "an entry holds more than one JSON value");
    }

    #[test]
    fn a_set_breaking_a_rule_is_corrupt() {
        let (fact, _) = one();
        let why = corrupt(read_fact_set(&user(), vec![fact.clone()], 1).unwrap_err());
        assert_eq!(why, "the set breaks a rule: fact 1 is not below the next id 1");
        let why = corrupt(read_fact_set(&user(), vec![fact.clone(), fact], 5).unwrap_err());
        assert_eq!(why, "the set breaks a rule: two facts have id 1");
    }

    #[test]
    fn the_error_names_the_user_once_down_the_chain() {
        let e = read_fact(&user(), b"[1", 1, "fact 1's row").unwrap_err();
        assert_eq!(
            e.to_string(),
            "stored data is corrupt: user \"ada\"'s facts: fact 1's row is not valid JSON of a fact"
        );
        let e = crate::Error::Facts {
            user: user(),
            source: e,
        };
        let all = chain(&e);
        assert_eq!(all.matches("\"ada\"").count(), 1, "{all}");
    }
}
