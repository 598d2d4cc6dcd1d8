//! Users' facts in PostgreSQL beyond the conformance steps: one round trip per call on the
//! wire, a facts commit whose reply is lost applied once, writers at one version of whom
//! exactly one wins, and corrupt rows read as `Corrupt` errors.

use crate::common;

use std::sync::Arc;

use chatmem::facts::{FactLimits, FactSet, add};
use chatmem::store::{FactsCommit, StoreErrorKind, StoredFacts};
use chatmem::{Store, UserId};
use chatmem_postgres::PostgresStore;
use chatmem_test::proxy::{Protocol, Proxy, ReplyLoss};
use chatmem_test::sql_suite::SqlDb;

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

fn texts(facts: &StoredFacts) -> Vec<&str> {
    facts.set.facts().iter().map(|f| f.text.as_str()).collect()
}

/// A store in a fresh schema, through a loopback proxy, with one pooled connection.
async fn proxied(tag: &str) -> (String, Proxy, PostgresStore) {
    let url = common::pg_url();
    let schema = common::fresh_schema(tag);
    common::store_in(&url, &schema).await; // migrate outside the count
    let proxy = Proxy::start(common::Pg::tcp_addr(&url), Protocol::Postgres).await;
    let store = PostgresStore::builder(&common::Pg::url_via(&url, proxy.addr))
        .schema(&schema)
        .pool_size(1)
        .connect()
        .await
        .expect("connect through the proxy");
    (schema, proxy, store)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn every_facts_call_is_one_round_trip() {
    let (schema, proxy, store) = proxied("facts_rtt").await;
    let user = user("facts-rtt");
    macro_rules! trips {
        ($op:expr) => {{
            let before = proxy.round_trips();
            let out = $op.await;
            (proxy.round_trips() - before, out)
        }};
    }
    let (n, loaded) = trips!(store.load_facts(&user));
    assert_eq!(
        (n, loaded.expect("load")),
        (1, StoredFacts::default()),
        "an unknown user"
    );
    // A commit making 200 facts at once.
    let mut set = FactSet::default();
    let mut changes = Vec::new();
    for i in 0..200 {
        let (added, _) = add(&set, &format!("Fact number {i}"), None, &FactLimits::default(), i).expect("add");
        set = added.set;
        changes.extend(added.changes);
    }
    let create = FactsCommit::new(&StoredFacts::default(), chatmem::facts::Changed { set, changes })
        .expect("valid")
        .expect("a change");
    let (n, v) = trips!(store.commit_facts(&user, create));
    assert_eq!((n, v.expect("create")), (1, 1), "a commit of 200 facts");
    let (n, loaded) = trips!(store.load_facts(&user));
    let loaded = loaded.expect("load");
    assert_eq!(
        (n, loaded.set.len(), loaded.version),
        (1, 200, 1),
        "a load of 200 facts"
    );
    let (n, v) = trips!(store.commit_facts(&user, adding(&loaded, "One more")));
    assert_eq!((n, v.expect("update")), (1, 2), "a commit on them");
    let (n, e) = trips!(store.commit_facts(&user, adding(&loaded, "Stale")));
    assert!(e.expect_err("stale").is_conflict());
    assert_eq!(n, 1, "a lost version check");
    let (n, history) = trips!(store.fact_history(&user, 201));
    assert_eq!((n, history.expect("history").len()), (1, 1));
    let (n, forgot) = trips!(store.forget_user(&user));
    assert_eq!((n, forgot.expect("forget")), (1, true));
    common::drop_schema(&common::pg_url(), &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn a_facts_commit_whose_reply_is_lost_is_applied_once() {
    let (schema, proxy, store) = proxied("facts_lost").await;
    let user = user("facts-lost");
    let mut loaded = StoredFacts::default();
    // Creating the user's row, then updating it.
    for (text, version) in [("Prefers email", 1), ("Works nights", 2)] {
        proxy.lose_next_reply(ReplyLoss::Close);
        let before = proxy.statements();
        let v = store
            .commit_facts(&user, adding(&loaded, text))
            .await
            .unwrap_or_else(|e| panic!("a facts commit that landed is reported as failed: {e}"));
        assert!(proxy.reply_lost(), "the proxy did not see the reply");
        assert_eq!(proxy.statements() - before, 2, "sent, then resent once");
        assert_eq!(v, version);
        loaded = store.load_facts(&user).await.expect("load");
        assert_eq!(loaded.version, version);
    }
    assert_eq!(texts(&loaded), ["Prefers email", "Works nights"]);
    for fact in [1, 2] {
        let history = store.fact_history(&user, fact).await.expect("history");
        assert_eq!(history.len(), 1, "fact {fact}'s history written once");
    }
    common::drop_schema(&common::pg_url(), &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn of_writers_at_one_version_exactly_one_wins() {
    let url = common::pg_url();
    let schema = common::fresh_schema("facts_race");
    let store = Arc::new(common::store_in(&url, &schema).await);
    for expected in [0, 1] {
        let user = user(&format!("facts-race-{expected}"));
        let mut loaded = StoredFacts::default();
        if expected == 1 {
            store
                .commit_facts(&user, adding(&loaded, "First"))
                .await
                .expect("first");
            loaded = store.load_facts(&user).await.expect("load");
        }
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let (store, user, commit) = (store.clone(), user.clone(), adding(&loaded, &format!("Writer {w}")));
                tokio::spawn(async move { store.commit_facts(&user, commit).await })
            })
            .collect();
        let mut won = Vec::new();
        for (w, task) in tasks.into_iter().enumerate() {
            match task.await.expect("a writer") {
                Ok(version) => won.push((w, version)),
                Err(e) => assert!(e.is_conflict(), "writer {w}: {e}"),
            }
        }
        assert_eq!(won.len(), 1, "expecting {expected}: {won:?}");
        let (w, version) = won[0];
        assert_eq!(version, expected + 1);
        let now = store.load_facts(&user).await.expect("load");
        assert_eq!(now.version, expected + 1);
        assert_eq!(texts(&now).last().copied(), Some(format!("Writer {w}").as_str()));
        let history = store.fact_history(&user, expected + 1).await.expect("history");
        assert_eq!(history.len(), 1, "only the winner's entry");
    }
    common::drop_schema(&url, &schema).await;
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
    }
    common::drop_schema(&url, &schema).await;
}
