//! Users' facts in the file: a restart loses none of them (set, history, version, the last
//! commit's token), a read-only store reads them, a commit writes only the facts it changed,
//! unreadable rows are typed errors naming the column, and a schema 6 file is upgraded to
//! keep them.

use std::time::Duration;

use chatmem::facts::{FactChange, FactKey, FactLimits, add, pin};
use chatmem::store::{Commit, FactsCommit, Snapshot, StoreErrorKind, StoredFacts};
use chatmem::{ConversationId, Heuristic, Message, Store, UserId};
use chatmem_sqlite::SqliteStore;

fn user(name: &str) -> UserId {
    UserId::new(chatmem_test::unique_id(name).as_str()).expect("a valid user id")
}

/// `text` (with `key`) added to `loaded`, as a commit.
fn adding(loaded: &StoredFacts, text: &str, key: Option<&str>, now: i64) -> FactsCommit {
    let key = key.map(|k| FactKey::new(k).expect("a valid key"));
    let (added, _) = add(&loaded.set, text, key, &FactLimits::default(), now).expect("add");
    FactsCommit::new(loaded, added).expect("valid").expect("a change")
}

/// Commits `commit` and returns what loads after.
async fn commit(store: &SqliteStore, user: &UserId, commit: FactsCommit) -> StoredFacts {
    store.commit_facts(user, commit).await.expect("commit_facts");
    store.load_facts(user).await.expect("load_facts")
}

/// Three commits for `user`: two facts, the first superseded by a third with its key, a pin.
async fn three_commits(store: &SqliteStore, user: &UserId) -> (StoredFacts, FactsCommit) {
    let one = commit(
        store,
        user,
        adding(&StoredFacts::default(), "Lives in Berlin", Some("home.city"), 1),
    )
    .await;
    let two = commit(store, user, adding(&one, "Has a cat 🐈 named \"Ö\"", None, 2)).await;
    let three = commit(store, user, adding(&two, "Lives in Hamburg", Some("home.city"), 3)).await;
    let pinned = pin(&three.set, 2, &FactLimits::default(), &Heuristic, 4).expect("pin");
    let last = FactsCommit::new(&three, pinned).expect("valid").expect("a change");
    let four = commit(store, user, last.clone()).await;
    (four, last)
}

/// The history of `user`'s facts 1 to 4.
async fn histories(store: &SqliteStore, user: &UserId) -> Vec<Vec<FactChange>> {
    let mut all = Vec::new();
    for fact in 1..=4 {
        all.push(store.fact_history(user, fact).await.expect("fact_history"));
    }
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_loses_no_fact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("facts.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let (u, other) = (user("restart"), user("restart-other"));
    let (kept, last) = three_commits(&store, &u).await;
    assert_eq!(kept.version, 4);
    assert_eq!(
        kept.set.facts().iter().map(|f| f.id).collect::<Vec<_>>(),
        [2, 3],
        "fact 1 was superseded"
    );
    commit(&store, &other, adding(&StoredFacts::default(), "Other", None, 1)).await;
    let before = histories(&store, &u).await;
    let kinds: Vec<Vec<&str>> = before
        .iter()
        .map(|h| h.iter().map(|c| c.kind.as_str()).collect())
        .collect();
    assert_eq!(
        kinds,
        [
            vec!["added", "superseded"],
            vec!["added", "pinned"],
            vec!["added"],
            vec![]
        ]
    );
    // A conversation named as the user, expired and purged: facts have no expiry and are
    // not a conversation's.
    let conversation = ConversationId::new(u.as_str()).expect("a conversation id");
    let created = Commit::on(&Snapshot::empty())
        .append(Message::user("hi"), 1)
        .ttl(Some(Duration::from_millis(1)))
        .build()
        .expect("commit");
    store.commit(&conversation, created).await.expect("commit");
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(store.purge_expired().await.expect("purge"), 1);
    assert!(!store.clear(&conversation).await.expect("clear"));
    drop(store);

    let store = SqliteStore::open(&path).await.expect("reopen");
    assert_eq!(store.load_facts(&u).await.expect("load"), kept);
    assert_eq!(histories(&store, &u).await, before);
    // The last commit's token survived too: sent again after the restart, it is answered
    // with the version it made and not applied twice.
    assert_eq!(store.commit_facts(&u, last.clone()).await.expect("resent"), 4);
    assert_eq!(store.load_facts(&u).await.expect("load"), kept);
    assert_eq!(histories(&store, &u).await, before);
    drop(store);

    // Read-only: facts read, and nothing of them is written.
    let ro = SqliteStore::builder(&path)
        .read_only(true)
        .open()
        .await
        .expect("read-only");
    assert!(ro.keeps_facts());
    assert_eq!(ro.load_facts(&u).await.expect("load"), kept);
    assert_eq!(ro.fact_history(&u, 1).await.expect("history"), before[0]);
    let e = ro
        .commit_facts(&u, adding(&kept, "New", None, 9))
        .await
        .expect_err("read-only");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
    let e = ro.forget_user(&u).await.expect_err("read-only");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput, "{e}");
    drop(ro);

    let store = SqliteStore::open(&path).await.expect("reopen");
    assert!(store.forget_user(&u).await.expect("forget"));
    drop(store);
    let store = SqliteStore::open(&path).await.expect("reopen");
    assert_eq!(store.load_facts(&u).await.expect("load"), StoredFacts::default());
    assert!(store.fact_history(&u, 1).await.expect("history").is_empty());
    assert_eq!(
        store.load_facts(&other).await.expect("load").set.facts()[0].text,
        "Other"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn facts_statement_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path().join("count.db")).await.expect("open");
    let u = user("count");
    let count = |before: u64| store.statements_executed() - before;
    let mut loaded = StoredFacts::default();
    for n in 0..20 {
        loaded = commit(&store, &u, adding(&loaded, &format!("Fact number {n}"), None, n)).await;
    }

    let before = store.statements_executed();
    assert_eq!(store.load_facts(&u).await.expect("load").set.len(), 20);
    assert_eq!(count(before), 1, "load_facts = 1 statement");
    let before = store.statements_executed();
    assert_eq!(store.fact_history(&u, 3).await.expect("history").len(), 1);
    assert_eq!(count(before), 1, "fact_history = 1 statement");

    // One fact changed among 20: only its row is written.
    let pinned = pin(&loaded.set, 7, &FactLimits::default(), &Heuristic, 30).expect("pin");
    let commit = FactsCommit::new(&loaded, pinned).expect("valid").expect("a change");
    let before = store.statements_executed();
    assert_eq!(store.commit_facts(&u, commit).await.expect("commit"), 21);
    // BEGIN IMMEDIATE, SELECT the user, SELECT the facts, 1 fact written, 1 history entry,
    // the user row, COMMIT.
    assert_eq!(count(before), 7, "commit_facts of one change = 7 statements");
    let after = store.load_facts(&u).await.expect("load");
    assert!(after.set.get(7).expect("fact 7").pinned);
    assert_eq!(after.set.len(), 20);

    // A deletion: the fact's row and its history go, no entry is written.
    let commit = FactsCommit::deleting(&after, &[7]).expect("valid").expect("a change");
    let before = store.statements_executed();
    assert_eq!(store.commit_facts(&u, commit).await.expect("commit"), 22);
    // BEGIN IMMEDIATE, SELECT the user, SELECT the facts, DELETE the fact, DELETE its
    // history, the user row, COMMIT.
    assert_eq!(count(before), 7, "commit_facts of a deletion = 7 statements");
    assert!(store.fact_history(&u, 7).await.expect("history").is_empty());

    let before = store.statements_executed();
    assert!(store.forget_user(&u).await.expect("forget"));
    assert_eq!(count(before), 5, "forget_user = 1 transaction of 5 statements");
}

/// Corrupts `sql` (with the user as `?1`) and checks that loading, or reading fact `fact`'s
/// history, is a `Corrupt` error naming the user and saying `says`, with no source (a JSON
/// error's message can quote what the row holds).
async fn refused(store: &SqliteStore, path: &std::path::Path, u: &UserId, sql: &str, fact: Option<u64>, says: &str) {
    let raw = rusqlite::Connection::open(path).expect("raw open");
    raw.execute(sql, [u.as_str()]).expect("corrupt");
    let e = match fact {
        None => store.load_facts(u).await.expect_err("corrupt facts"),
        Some(fact) => store.fact_history(u, fact).await.expect_err("corrupt history"),
    };
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{sql}: {e}");
    assert!(e.to_string().contains(&format!("{u:?}")), "names the user: {e}");
    assert!(e.to_string().contains(says), "{sql}: {e}");
    assert!(std::error::Error::source(&e).is_none(), "{sql}: {e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_facts_rows_name_the_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let cases: [(&str, Option<u64>, &str); 9] = [
        (
            "UPDATE facts SET json = '{not json' WHERE user_id = ?1 AND id = 2",
            None,
            "facts.json of fact 2 is not valid JSON of a fact",
        ),
        (
            "UPDATE facts SET json = x'7b7d' WHERE user_id = ?1 AND id = 2",
            None,
            "facts.json of fact 2 is not JSON text",
        ),
        (
            "UPDATE facts SET json = replace(json, '\"id\":2', '\"id\":3') WHERE user_id = ?1 AND id = 2",
            None,
            "facts.json of fact 2 holds fact 3",
        ),
        (
            "UPDATE facts SET id = -2 WHERE user_id = ?1 AND id = 2",
            None,
            "facts.id is -2",
        ),
        (
            "UPDATE fact_users SET version = -1 WHERE user_id = ?1",
            None,
            "fact_users.version is -1",
        ),
        (
            "UPDATE fact_users SET next_id = 2 WHERE user_id = ?1",
            None,
            "the set breaks a rule",
        ),
        (
            "UPDATE fact_history SET json = '[]' WHERE user_id = ?1 AND fact = 1 AND n = 0 AND version = 3",
            Some(1),
            "fact_history.json of fact 1 (version 3, entry 0) is not valid JSON of a history entry",
        ),
        (
            "UPDATE fact_history SET json = replace(json, '\"fact\":2', '\"fact\":4') WHERE user_id = ?1 AND fact = 2",
            Some(2),
            "fact_history.json of fact 2 (version 2, entry 0) is of fact 4",
        ),
        (
            "UPDATE fact_history SET json = x'00' WHERE user_id = ?1 AND fact = 3",
            Some(3),
            "fact_history.json of fact 3 (version 3, entry 1) is not JSON text",
        ),
    ];
    let good = user("corrupt-good");
    three_commits(&store, &good).await;
    let expected = store.load_facts(&good).await.expect("load");
    for (i, (sql, fact, says)) in cases.into_iter().enumerate() {
        let u = user(&format!("corrupt-{i}"));
        three_commits(&store, &u).await;
        refused(&store, &path, &u, sql, fact, says).await;
        // Forgetting the user clears it; others are untouched.
        assert!(store.forget_user(&u).await.expect("forget"));
        assert_eq!(store.load_facts(&u).await.expect("load"), StoredFacts::default());
    }
    assert_eq!(store.load_facts(&good).await.expect("load"), expected);
    // A corrupt row is written over by the commit that replaces it.
    let u = user("corrupt-healed");
    let (kept, _) = three_commits(&store, &u).await;
    let raw = rusqlite::Connection::open(&path).expect("raw open");
    raw.execute(
        "UPDATE facts SET json = '{not json' WHERE user_id = ?1 AND id = 3",
        [u.as_str()],
    )
    .expect("corrupt");
    let replaced = adding(&kept, "Lives in Munich", Some("home.city"), 9);
    let set = replaced.set().clone();
    assert_eq!(store.commit_facts(&u, replaced).await.expect("commit"), 5);
    assert_eq!(
        store.load_facts(&u).await.expect("load"),
        StoredFacts { set, version: 5 }
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_6_file_is_upgraded_to_keep_facts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v6.db");
    let id = chatmem_test::unique_id("v6");
    let store = SqliteStore::open(&path).await.expect("open");
    let created = Commit::on(&Snapshot::empty())
        .append(Message::user("hi"), 1)
        .build()
        .expect("commit");
    store.commit(&id, created).await.expect("commit");
    drop(store);
    // Schema 6 is schema 7 without the facts tables.
    rusqlite::Connection::open(&path)
        .expect("raw open")
        .execute_batch(
            "DROP TABLE fact_users; DROP TABLE facts; DROP TABLE fact_history;
             UPDATE chatmem_schema SET version = 6;",
        )
        .expect("back to schema 6");
    let e = SqliteStore::builder(&path)
        .read_only(true)
        .open()
        .await
        .expect_err("a read-only store does not upgrade");
    assert!(e.to_string().contains("schema version 6"), "{e}");

    let store = SqliteStore::open(&path).await.expect("open upgrades");
    let version: i64 = rusqlite::Connection::open(&path)
        .expect("raw open")
        .query_row("SELECT version FROM chatmem_schema", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, chatmem_sqlite::SCHEMA_VERSION);
    assert_eq!(store.load(&id).await.expect("load").messages.len(), 1, "data kept");
    let u = user("v6");
    assert_eq!(store.load_facts(&u).await.expect("load"), StoredFacts::default());
    let (kept, _) = three_commits(&store, &u).await;
    assert_eq!(kept.set.len(), 2);
    assert_eq!(kept.set.next_id(), 4);
}
