//! Users' facts in PostgreSQL beyond the conformance steps and the shared SQL suite's (round
//! trips, a lost reply, racing writers; see `chatmem_test::sql_suite::facts`): corrupt rows
//! read as `Corrupt` errors.

use crate::common;

use chatmem::facts::{FactLimits, add};
use chatmem::store::{FactsCommit, StoreErrorKind, StoredFacts};
use chatmem::{Store, UserId};

fn user(name: &str) -> UserId {
    UserId::new(chatmem_test::unique_id(name).as_str()).expect("a conversation id is a user id")
}

/// The commit adding `text` by hand to `loaded`.
fn adding(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

/// `json` with its first `from` made `to`, which must be there.
fn changed(json: &str, from: &str, to: &str) -> String {
    let changed = json.replacen(from, to, 1);
    assert_ne!(changed, json, "{from} in {json}");
    changed
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn corrupt_fact_rows_are_corrupt_errors() {
    let url = common::pg_url();
    let schema = common::fresh_schema("facts_corrupt");
    let store = common::store_in(&url, &schema).await;
    let raw = common::raw_client(&url).await;
    let (users, facts, history) = (
        format!("\"{schema}\".chatmem_fact_users"),
        format!("\"{schema}\".chatmem_facts"),
        format!("\"{schema}\".chatmem_fact_history"),
    );
    let user = user("facts-corrupt");
    let mut loaded = StoredFacts::default();
    for text in ["Lives in Berlin", "Has a cat"] {
        store.commit_facts(&user, adding(&loaded, text)).await.expect("commit");
        loaded = store.load_facts(&user).await.expect("load");
    }
    let good: String = raw
        .query_one(
            &format!("SELECT json FROM {facts} WHERE user_id = $1 AND fact_id = 1"),
            &[&user.as_str()],
        )
        .await
        .expect("read a fact")
        .get(0);
    let entry: String = raw
        .query_one(
            &format!("SELECT json FROM {history} WHERE user_id = $1 AND fact_id = 1"),
            &[&user.as_str()],
        )
        .await
        .expect("read an entry")
        .get(0);
    // A SQL literal: the user id and the JSON hold no `'` of their own, but a test should not
    // depend on that.
    let lit = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let fact_2 = lit(&changed(&good, "\"id\":1,", "\"id\":2,"));
    let other_entry = lit(&changed(&entry, "\"fact\":1,", "\"fact\":2,"));
    let (who, good) = (lit(user.as_str()), lit(&good));
    let fact_1 = format!("user_id = {who} AND fact_id = 1");
    // Each damage, what the error says, and the repair.
    let cases = [
        (
            format!("UPDATE {facts} SET json = '{{\"id\": \"Lives in Berlin\"}}' WHERE {fact_1}"),
            "fact 1's row is not valid JSON",
            format!("UPDATE {facts} SET json = {good} WHERE {fact_1}"),
        ),
        (
            format!("UPDATE {facts} SET json = {fact_2} WHERE {fact_1}"),
            "fact 1's row holds fact 2",
            format!("UPDATE {facts} SET json = {good} WHERE {fact_1}"),
        ),
        (
            format!("UPDATE {users} SET next_id = 2 WHERE user_id = {who}"),
            "the set breaks a rule",
            format!("UPDATE {users} SET next_id = 3 WHERE user_id = {who}"),
        ),
        (
            format!("UPDATE {users} SET version = -1 WHERE user_id = {who}"),
            "version is -1",
            format!("UPDATE {users} SET version = 2 WHERE user_id = {who}"),
        ),
        (
            format!("UPDATE {facts} SET fact_id = -5 WHERE user_id = {who} AND fact_id = 2"),
            "a fact's id is -5",
            format!("UPDATE {facts} SET fact_id = 2 WHERE user_id = {who} AND fact_id = -5"),
        ),
        (
            format!(
                "DELETE FROM {users} WHERE user_id = {who}; ALTER TABLE {facts} DISABLE TRIGGER ALL; INSERT INTO {facts} VALUES ({who}, 1, {good}); ALTER TABLE {facts} ENABLE TRIGGER ALL"
            ),
            "facts without their user row",
            String::new(),
        ),
    ];
    for (i, (damage, says, repair)) in cases.iter().enumerate() {
        raw.batch_execute(damage).await.expect("damage");
        let e = store.load_facts(&user).await.expect_err("corrupt facts");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let text = e.to_string();
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("Berlin"), "a fact's text is private: {text}");
        assert!(text.contains(&format!("{user:?}")), "names the user: {text}");
        if !repair.is_empty() {
            raw.batch_execute(repair).await.expect("repair");
            assert_eq!(store.load_facts(&user).await.expect("repaired"), loaded, "case {i}");
        }
    }
    raw.batch_execute(&format!("DELETE FROM {facts} WHERE user_id = {who}"))
        .await
        .expect("clean up");

    // A history entry that is not JSON, and one of another fact.
    let user = self::user("facts-corrupt-history");
    store
        .commit_facts(&user, adding(&StoredFacts::default(), "Lives in Berlin"))
        .await
        .expect("commit");
    let who = lit(user.as_str());
    for (json, says) in [
        ("'[1'".to_owned(), "a history entry of fact 1 is not valid JSON"),
        (other_entry, "a history entry of fact 1 is of fact 2"),
    ] {
        raw.batch_execute(&format!(
            "UPDATE {history} SET json = {json} WHERE user_id = {who} AND fact_id = 1"
        ))
        .await
        .expect("damage");
        let e = store.fact_history(&user, 1).await.expect_err("corrupt history");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let text = e.to_string();
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("Berlin"), "a fact's text is private: {text}");
        assert!(text.contains(&format!("{user:?}")), "names the user: {text}");
    }
    common::drop_schema(&url, &schema).await;
}
