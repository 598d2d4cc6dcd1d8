//! Users' facts on MySQL/MariaDB beyond the conformance steps and the shared SQL suite's
//! (round trips, a lost reply, racing writers; see `chatmem_test::sql_suite::facts`): user ids
//! that only a binary comparison tells apart, forgetting a user deleting every row, a version 4
//! database upgraded (the migration run again when interrupted), and damaged rows read as
//! `Corrupt` errors that never quote them.

use crate::common;

use chatmem::facts::{FactLimits, add};
use chatmem::store::{FactsCommit, StoreErrorKind, StoredFacts};
use chatmem::{Message, Retention, Store, UserId};
use chatmem_mysql::{MysqlStore, SCHEMA_VERSION};
use mysql_async::prelude::Queryable;

fn user(name: &str) -> UserId {
    UserId::new(chatmem_test::unique_id(name).as_str()).expect("a conversation id is a user id")
}

/// The commit adding `text` by hand to `loaded`.
fn adding(loaded: &StoredFacts, text: &str) -> FactsCommit {
    let (added, _) = add(&loaded.set, text, None, &FactLimits::default(), 1_000).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

/// Adds `text` to `user`'s facts; what loads after.
async fn add_fact(store: &MysqlStore, user: &UserId, text: &str) -> StoredFacts {
    let loaded = store.load_facts(user).await.expect("load");
    store.commit_facts(user, adding(&loaded, text)).await.expect("commit");
    store.load_facts(user).await.expect("load")
}

fn texts(facts: &StoredFacts) -> Vec<&str> {
    facts.set.facts().iter().map(|f| f.text.as_str()).collect()
}

/// `json` with its first `from` made `to`, which must be there.
fn changed(json: &str, from: &str, to: &str) -> String {
    let changed = json.replacen(from, to, 1);
    assert_ne!(changed, json, "{from} in {json}");
    changed
}

/// The rows `user` has in each facts table of `prefix`: users, facts, history.
async fn rows_of(raw: &mut mysql_async::Conn, prefix: &str, user: &UserId) -> [i64; 3] {
    let mut counts = [0; 3];
    for (count, table) in counts.iter_mut().zip(["fact_users", "facts", "fact_history"]) {
        *count = raw
            .exec_first(
                format!("SELECT COUNT(*) FROM `{prefix}_{table}` WHERE user_id = ?"),
                (user.as_str().as_bytes(),),
            )
            .await
            .expect("count")
            .expect("a row");
    }
    counts
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn users_differing_in_case_or_trailing_spaces_have_their_own_facts() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("facts_bin");
    let store = common::store_in(&url, &prefix).await;
    let base = chatmem_test::unique_id("facts-bin");
    // One user under a PAD SPACE or case-insensitive collation; four as bytes.
    let names = ["ada", "ada ", "Ada", "ádá"].map(|n| format!("{}/{n}", base.as_str()));
    let users: Vec<UserId> = names.iter().map(|n| UserId::new(n.as_str()).expect("id")).collect();
    for (i, user) in users.iter().enumerate() {
        add_fact(&store, user, &format!("Fact of user {i}")).await;
    }
    for (i, user) in users.iter().enumerate() {
        let facts = store.load_facts(user).await.expect("load");
        assert_eq!(
            (texts(&facts), facts.version),
            (vec![format!("Fact of user {i}").as_str()], 1)
        );
        assert_eq!(store.fact_history(user, 1).await.expect("history").len(), 1);
    }
    assert!(store.forget_user(&users[1]).await.expect("forget"));
    assert_eq!(store.load_facts(&users[1]).await.expect("load"), StoredFacts::default());
    for user in [&users[0], &users[2], &users[3]] {
        assert_eq!(store.load_facts(user).await.expect("load").set.len(), 1, "{user:?}");
    }
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn forgetting_a_user_deletes_every_row_and_nothing_else() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("facts_forget");
    let store = common::store_in(&url, &prefix).await;
    let mut raw = common::raw_conn(&url).await;
    let (gone, kept) = (user("facts-gone"), user("facts-kept"));
    for user in [&gone, &kept] {
        add_fact(&store, user, "Lives in Berlin").await;
        let loaded = add_fact(&store, user, "Has a cat").await;
        // A deleted fact's history goes with it; the other's stays.
        let deleting = FactsCommit::deleting(&loaded, &[1]).expect("valid").expect("a change");
        store.commit_facts(user, deleting).await.expect("delete");
        assert!(store.fact_history(user, 1).await.expect("history").is_empty());
        assert_eq!(store.fact_history(user, 2).await.expect("history").len(), 1);
        assert_eq!(rows_of(&mut raw, &prefix, user).await, [1, 1, 1]);
    }
    // A conversation of the same id is not the user's: clearing it leaves the facts.
    let conv = chatmem::ConversationId::new(gone.as_str()).expect("id");
    let base = store.load(&conv).await.expect("load");
    let commit = chatmem::store::Commit::on(&base)
        .append(Message::user("hi"), 1)
        .retention(Retention::KeepHistory)
        .build()
        .expect("commit");
    store.commit(&conv, commit).await.expect("commit");
    assert!(store.clear(&conv).await.expect("clear"));
    assert_eq!(rows_of(&mut raw, &prefix, &gone).await, [1, 1, 1]);

    assert!(store.forget_user(&gone).await.expect("forget"));
    assert_eq!(rows_of(&mut raw, &prefix, &gone).await, [0, 0, 0]);
    assert!(!store.forget_user(&gone).await.expect("forget again"), "nothing left");
    assert_eq!(rows_of(&mut raw, &prefix, &kept).await, [1, 1, 1]);
    // A forgotten user starts again at version 0, and a commit on the old version conflicts.
    let e = store
        .commit_facts(
            &gone,
            adding(
                &StoredFacts {
                    version: 3,
                    ..Default::default()
                },
                "Old",
            ),
        )
        .await
        .expect_err("stale");
    assert!(e.is_conflict(), "{e}");
    assert_eq!(add_fact(&store, &gone, "New").await.version, 1);
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

/// Makes the tables of `prefix` as chatmem-mysql did at schema version 4, applied the way
/// `migrate.rs` applies them.
async fn schema_version_4(conn: &mut mysql_async::Conn, prefix: &str) {
    conn.query_drop(format!(
        "CREATE TABLE `{prefix}_schema_version` (
             version    INT NOT NULL PRIMARY KEY,
             applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
         ) ENGINE = InnoDB"
    ))
    .await
    .expect("version table");
    for (version, sql) in [
        (1, include_str!("../../migrations/0001_init.sql")),
        (2, include_str!("../../migrations/0002_updated_at.sql")),
        (3, include_str!("../../migrations/0003_recall.sql")),
        (4, include_str!("../../migrations/0004_vectors.sql")),
    ] {
        for statement in sql.replace("{p}", prefix).split("-- next statement\n") {
            conn.query_drop(statement).await.expect("applying a migration");
        }
        conn.exec_drop(
            format!("INSERT INTO `{prefix}_schema_version` (version) VALUES (?)"),
            (version,),
        )
        .await
        .expect("recording the version");
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_version_4_database_is_upgraded_and_keeps_facts() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("facts_v4");
    let mut raw = common::raw_conn(&url).await;
    schema_version_4(&mut raw, &prefix).await;
    let conv = chatmem_test::unique_id("facts-v4");
    // A conversation committed as a version 4 process does.
    let json = chatmem::store::StoredMessage::new(1, 1, Message::user("hi"))
        .message_json()
        .expect("json");
    let (applied, _): (i64, i64) = raw
        .exec_first(
            format!(
                "CALL `{prefix}_commit_v3`(?, 0, NULL, NULL, NULL, NULL, 1, 2, NULL, NULL, 7, NULL, ?, '[]', 0, 0)"
            ),
            (
                conv.as_str().as_bytes(),
                serde_json::to_string(&[(1, 1, None::<String>, json)]).expect("batch"),
            ),
        )
        .await
        .expect("a version 4 commit")
        .expect("a result row");
    assert_eq!(applied, 1);

    let store = common::store_in(&url, &prefix).await;
    let version: Option<i32> = raw
        .query_first(format!("SELECT MAX(version) FROM `{prefix}_schema_version`"))
        .await
        .expect("schema version");
    assert_eq!((version, SCHEMA_VERSION), (Some(5), 5));
    assert_eq!(store.load(&conv).await.expect("load").messages.len(), 1, "kept");
    let user = UserId::new(conv.as_str()).expect("id");
    assert_eq!(store.load_facts(&user).await.expect("load"), StoredFacts::default());
    let facts = add_fact(&store, &user, "Prefers email").await;
    assert_eq!((texts(&facts), facts.version), (vec!["Prefers email"], 1));

    // A migration interrupted before it was recorded runs again over what it already did.
    raw.query_drop(format!("DELETE FROM `{prefix}_schema_version` WHERE version = 5"))
        .await
        .expect("forget version 5");
    let again = common::store_in(&url, &prefix).await;
    assert_eq!(again.load_facts(&user).await.expect("load"), facts, "the facts kept");
    assert_eq!(add_fact(&again, &user, "Works nights").await.version, 2);
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn corrupt_fact_rows_are_corrupt_errors() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("facts_corrupt");
    let store = common::store_in(&url, &prefix).await;
    let mut raw = common::raw_conn(&url).await;
    let (users, facts, history) = (
        format!("`{prefix}_fact_users`"),
        format!("`{prefix}_facts`"),
        format!("`{prefix}_fact_history`"),
    );
    let user = user("facts-corrupt");
    add_fact(&store, &user, "Lives in Berlin").await;
    let loaded = add_fact(&store, &user, "Has a cat").await;
    let who = user.as_str().as_bytes();
    let good: String = raw
        .exec_first(
            format!("SELECT json FROM {facts} WHERE user_id = ? AND fact_id = 1"),
            (who,),
        )
        .await
        .expect("read a fact")
        .expect("a row");
    let entry: String = raw
        .exec_first(
            format!("SELECT json FROM {history} WHERE user_id = ? AND fact_id = 1"),
            (who,),
        )
        .await
        .expect("read an entry")
        .expect("a row");
    let fact_2 = changed(&good, "\"id\":1,", "\"id\":2,");
    let other_entry = changed(&entry, "\"fact\":1,", "\"fact\":2,");
    let fact_1 = "user_id = ? AND fact_id = 1";
    let set_json = format!("UPDATE {facts} SET json = ? WHERE {fact_1}");
    // A statement with its text parameter, if any, before the user id.
    let with = |sql: &str, text: Option<&str>| {
        let mut params: Vec<mysql_async::Value> = text.map(Into::into).into_iter().collect();
        params.push(who.into());
        (sql.to_owned(), params)
    };
    // Each damage, what the error says, and the repair.
    let cases = [
        (
            with(&set_json, Some(r#"{"id": "Lives in Berlin"}"#)),
            "fact 1's row is not valid JSON",
            with(&set_json, Some(&good)),
        ),
        (
            with(&set_json, Some(&fact_2)),
            "fact 1's row holds fact 2",
            with(&set_json, Some(&good)),
        ),
        (
            with(&format!("UPDATE {users} SET next_id = 2 WHERE user_id = ?"), None),
            "the set breaks a rule",
            with(&format!("UPDATE {users} SET next_id = 3 WHERE user_id = ?"), None),
        ),
        (
            with(&format!("UPDATE {users} SET version = -1 WHERE user_id = ?"), None),
            "version is -1",
            with(&format!("UPDATE {users} SET version = 2 WHERE user_id = ?"), None),
        ),
        (
            with(
                &format!("UPDATE {facts} SET fact_id = -5 WHERE user_id = ? AND fact_id = 2"),
                None,
            ),
            "a fact's id is -5",
            with(
                &format!("UPDATE {facts} SET fact_id = 2 WHERE user_id = ? AND fact_id = -5"),
                None,
            ),
        ),
    ];
    for (i, ((damage, params), says, (repair, fixed))) in cases.into_iter().enumerate() {
        raw.exec_drop(damage, params).await.expect("damage");
        let e = store.load_facts(&user).await.expect_err("corrupt facts");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let message = e.to_string();
        assert!(message.contains(says), "case {i}: {message}");
        assert!(!message.contains("Berlin"), "a fact's text is private: {message}");
        assert!(message.contains(&format!("{user:?}")), "names the user: {message}");
        raw.exec_drop(repair, fixed).await.expect("repair");
        assert_eq!(store.load_facts(&user).await.expect("repaired"), loaded, "case {i}");
    }
    // Facts without their user row (only with the foreign keys off).
    raw.query_drop("SET SESSION foreign_key_checks = 0")
        .await
        .expect("fk off");
    raw.exec_drop(format!("DELETE FROM {users} WHERE user_id = ?"), (who,))
        .await
        .expect("damage");
    raw.query_drop("SET SESSION foreign_key_checks = 1")
        .await
        .expect("fk on");
    let e = store.load_facts(&user).await.expect_err("corrupt facts");
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("facts without their user row"), "{e}");
    raw.exec_drop(format!("DELETE FROM {facts} WHERE user_id = ?"), (who,))
        .await
        .expect("clean up");
    raw.exec_drop(format!("DELETE FROM {history} WHERE user_id = ?"), (who,))
        .await
        .expect("clean up");

    // A history entry that is not JSON, and one of another fact.
    let user = self::user("facts-corrupt-history");
    add_fact(&store, &user, "Lives in Berlin").await;
    for (json, says) in [
        ("[1", "a history entry of fact 1 is not valid JSON"),
        (other_entry.as_str(), "a history entry of fact 1 is of fact 2"),
    ] {
        raw.exec_drop(
            format!("UPDATE {history} SET json = ? WHERE user_id = ? AND fact_id = 1"),
            (json, user.as_str().as_bytes()),
        )
        .await
        .expect("damage");
        let e = store.fact_history(&user, 1).await.expect_err("corrupt history");
        assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
        let message = e.to_string();
        assert!(message.contains(says), "{message}");
        assert!(!message.contains("Berlin"), "a fact's text is private: {message}");
        assert!(message.contains(&format!("{user:?}")), "names the user: {message}");
    }
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}
