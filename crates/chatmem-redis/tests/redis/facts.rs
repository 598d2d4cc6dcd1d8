//! Users' facts on one Redis and on a Cluster, beyond the conformance suite's steps: where
//! they live (three hashes under a tag of their own, in one slot, apart from a conversation
//! of the same id), that they never expire, that a user is its header hash, that bad data is a
//! `Corrupt` error that never quotes a fact, and that of writers at one version exactly one
//! wins.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, hex, meta_key, store, unique_prefix};
use chatmem::facts::{FactLimits, add};
use chatmem::store::{FactsCommit, StoreErrorKind, StoredFacts, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store, UserId};
use chatmem_redis::RedisStore;
use redis::aio::ConnectionLike;

fn user(name: &str) -> UserId {
    UserId::new(name).expect("a valid user id")
}

/// `text` added by hand to `loaded`, as a commit.
fn adding(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

fn texts(facts: &StoredFacts) -> Vec<&str> {
    facts.set.facts().iter().map(|f| f.text.as_str()).collect()
}

/// The user's three keys under `prefix`, as the store writes them: header, facts, history.
fn user_keys(prefix: &str, user: &UserId) -> [String; 3] {
    let tag = hex(user.as_str());
    ["user", "facts", "history"].map(|k| format!("{prefix}:{{u:{tag}}}:{k}"))
}

async fn pttl(conn: &mut impl ConnectionLike, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.expect("PTTL")
}

async fn hset(conn: &mut impl ConnectionLike, key: &str, field: &str, value: &str) {
    let _: i64 = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query_async(conn)
        .await
        .expect("HSET");
}

async fn hget(conn: &mut impl ConnectionLike, key: &str, field: &str) -> String {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(conn)
        .await
        .expect("HGET")
}

/// Commits `texts` one at a time to `user`; returns what loads after.
async fn commit_texts(store: &RedisStore, user: &UserId, texts: &[&str]) -> StoredFacts {
    let mut loaded = store.load_facts(user).await.expect("load");
    for text in texts {
        store.commit_facts(user, adding(&loaded, text)).await.expect("commit");
        loaded = store.load_facts(user).await.expect("load");
    }
    loaded
}

/// A user and a conversation of the same id: the user's three keys (one slot, a tag no
/// conversation has) carry no TTL while the conversation's expire, and outlive it, its
/// clearing and a purge. `conn` is a raw connection to the store's Redis or Cluster
/// (`cluster`: where key slots are checked).
async fn facts_never_expire_and_live_apart(
    store: &RedisStore,
    conn: &mut impl ConnectionLike,
    prefix: &str,
    cluster: bool,
) {
    let name = "same-{x}:*";
    let (user, id) = (user(name), ConversationId::new(name).unwrap());
    let message = |seq| StoredMessage::new(seq, 1, Message::user("hi"));
    let ttl = Some(Duration::from_millis(300));
    let c = chatmem_test::commit_full(0, 1, None, vec![message(1)], 1, Retention::KeepHistory, ttl);
    assert_eq!(store.commit(&id, c).await.unwrap(), 1);
    let loaded = commit_texts(store, &user, &["Prefers email", "Works nights"]).await;
    let c = chatmem_test::commit_full(1, 2, None, vec![message(2)], 1, Retention::KeepHistory, ttl);
    assert_eq!(
        store.commit(&id, c).await.unwrap(),
        2,
        "a conversation commit after the facts'"
    );
    assert!(
        pttl(conn, &meta_key(prefix, name)).await > 0,
        "the conversation expires"
    );
    let keys = user_keys(prefix, &user);
    for key in &keys {
        assert_eq!(pttl(conn, key).await, -1, "{key} exists and never expires");
        assert!(key.contains(&format!("{{u:{}}}", hex(name))), "{key}");
    }
    if cluster {
        // One slot for the three: a pipeline and a script of them work on a Cluster.
        let mut slots = Vec::new();
        for key in &keys {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query_async(conn)
                .await
                .expect("CLUSTER KEYSLOT");
            slots.push(slot);
        }
        assert!(slots.iter().all(|s| *s == slots[0]), "{slots:?}");
    }

    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.load(&id).await.unwrap().version, 0, "the conversation expired");
    store.purge_expired().await.unwrap();
    assert_eq!(store.load_facts(&user).await.unwrap(), loaded, "the facts did not");
    let c = chatmem_test::commit(0, vec![message(1)], 1, Retention::KeepHistory);
    assert_eq!(store.commit(&id, c).await.unwrap(), 1);
    assert!(store.clear(&id).await.unwrap());
    assert_eq!(store.load_facts(&user).await.unwrap(), loaded, "clearing leaves them");
    for key in &keys {
        assert_eq!(pttl(conn, key).await, -1, "{key}");
    }
    assert!(store.forget_user(&user).await.unwrap());
    for key in &keys {
        assert_eq!(pttl(conn, key).await, -2, "{key} is gone");
    }
}

/// A user is its header hash: deleted (by hand, or evicted), the user is unknown whatever
/// facts and history are left, and the next commit starts from nothing.
async fn a_user_without_its_header_is_unknown(store: &RedisStore, conn: &mut impl ConnectionLike, prefix: &str) {
    let user = user("headless");
    let [header, facts, history] = user_keys(prefix, &user);
    commit_texts(store, &user, &["Lives in Berlin", "Has a cat"]).await;
    let _: i64 = redis::cmd("DEL").arg(&header).query_async(conn).await.unwrap();
    assert_eq!(store.load_facts(&user).await.unwrap(), StoredFacts::default());
    assert!(store.fact_history(&user, 1).await.unwrap().is_empty());
    assert!(!store.forget_user(&user).await.unwrap(), "nothing to forget");
    // forget_user deleted the leftovers too; leave some again.
    commit_texts(store, &user, &["Lives in Berlin", "Has a cat"]).await;
    let _: i64 = redis::cmd("DEL").arg(&header).query_async(conn).await.unwrap();
    let now = commit_texts(store, &user, &["Works nights"]).await;
    assert_eq!((texts(&now), now.version), (vec!["Works nights"], 1));
    let len: i64 = redis::cmd("HLEN").arg(&facts).query_async(conn).await.unwrap();
    assert_eq!(len, 1, "the facts left behind are gone");
    let kinds: Vec<&str> = store
        .fact_history(&user, 1)
        .await
        .unwrap()
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert_eq!(kinds, ["added"], "fact 1's history is the new fact's only");
    let len: i64 = redis::cmd("HLEN").arg(&history).query_async(conn).await.unwrap();
    assert_eq!(len, 1, "the history left behind is gone");
    assert!(store.fact_history(&user, u64::MAX).await.unwrap().is_empty());
    assert!(store.forget_user(&user).await.unwrap());
}

/// Bad data is a `Corrupt` error naming the field, never quoting a fact; repaired, the facts
/// load again.
async fn corrupt_facts_are_corrupt_errors(store: &RedisStore, conn: &mut impl ConnectionLike, prefix: &str) {
    let user = user("corrupt");
    let [header, facts, history] = user_keys(prefix, &user);
    let loaded = commit_texts(store, &user, &["Lives in Berlin", "Has a cat"]).await;
    let good = hget(conn, &facts, "1").await;
    let entry = hget(conn, &history, "1").await;
    assert!(entry.ends_with('\n') && entry.matches('\n').count() == 1, "{entry:?}");
    let cases = [
        (
            &facts,
            "1",
            r#"{"id": "Lives in Berlin"}"#.to_owned(),
            "fact 1 is not valid JSON",
            good.clone(),
        ),
        (
            &facts,
            "1",
            good.replacen("\"id\":1,", "\"id\":2,", 1),
            "fact 1 holds fact 2",
            good.clone(),
        ),
        (
            &header,
            "next_id",
            "2".to_owned(),
            "the set breaks a rule",
            "3".to_owned(),
        ),
        (
            &header,
            "version",
            "-1".to_owned(),
            "field version is not a number",
            "2".to_owned(),
        ),
    ];
    for (key, field, damage, says, repair) in &cases {
        hset(conn, key, field, damage).await;
        let e = store.load_facts(&user).await.expect_err("corrupt facts");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let text = e.to_string();
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("Berlin"), "a fact's text is private: {text}");
        assert!(text.contains(&format!("{user:?}")), "names the user: {text}");
        if *field == "version" {
            // The commit script reads it too.
            let e = store
                .commit_facts(&user, adding(&loaded, "More"))
                .await
                .expect_err("corrupt");
            assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        }
        hset(conn, key, field, repair).await;
        assert_eq!(store.load_facts(&user).await.unwrap(), loaded, "repaired: {says}");
    }
    for (damage, says) in [
        (format!("{entry}[1\n"), "a history entry of fact 1 is not valid JSON"),
        (
            entry.replacen("\"fact\":1,", "\"fact\":2,", 1),
            "a history entry of fact 1 is of fact 2",
        ),
    ] {
        hset(conn, &history, "1", &damage).await;
        let e = store.fact_history(&user, 1).await.expect_err("corrupt history");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let text = e.to_string();
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("Berlin"), "a fact's text is private: {text}");
        assert!(text.contains(&format!("{user:?}")), "names the user: {text}");
    }
    assert!(store.forget_user(&user).await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn facts_on_one_redis() {
    let url = common::url();
    let prefix = unique_prefix("facts");
    let store = store(&url, &prefix).await;
    assert!(store.keeps_facts());
    let mut conn = common::raw(&url).await;
    facts_never_expire_and_live_apart(&store, &mut conn, &prefix, false).await;
    a_user_without_its_header_is_unknown(&store, &mut conn, &prefix).await;
    corrupt_facts_are_corrupt_errors(&store, &mut conn, &prefix).await;
    chatmem_test::check_one_facts_writer_wins(Arc::new(store.clone())).await;
    common::cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]
async fn facts_on_a_cluster() {
    let url = common::cluster_url();
    let prefix = unique_prefix("cluster-facts");
    let store = store(&url, &prefix).await;
    assert!(store.keeps_facts());
    let mut conn = crate::cluster::raw_cluster(&url).await;
    facts_never_expire_and_live_apart(&store, &mut conn, &prefix, true).await;
    a_user_without_its_header_is_unknown(&store, &mut conn, &prefix).await;
    corrupt_facts_are_corrupt_errors(&store, &mut conn, &prefix).await;
    chatmem_test::check_one_facts_writer_wins(Arc::new(store.clone())).await;
    crate::cluster::cleanup(&url, &prefix).await;
}
