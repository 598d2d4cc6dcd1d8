//! Recall on MySQL/MariaDB beyond the shared conformance steps: a version 2 database upgraded
//! (its data kept, new commits indexed, its processes' commits keeping the index in step),
//! terms that only a binary comparison tells apart, queries of many terms (several masks, and
//! the statement for any number of terms), an index staged for being too large for one
//! parameter, and the index of an expired conversation started afresh or purged.

use crate::common;

use std::time::Duration;

use chatmem::recall::{MAX_TERM_BYTES, MemoryIndex, SearchQuery, SearchResult};
use chatmem::store::{Commit, RecentQuery, Snapshot, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_mysql::{MysqlStore, SCHEMA_VERSION};
use mysql_async::prelude::Queryable;

fn id(name: &str) -> ConversationId {
    chatmem_test::unique_id(name)
}

/// A commit appending `texts` as user messages on `base`, indexed or not.
fn appending(base: &Snapshot, texts: &[String], index: bool, window_start: u64, retention: Retention) -> Commit {
    let mut builder = Commit::on(base).retention(retention).index(index);
    for text in texts {
        builder = builder.append(Message::user(text.as_str()), 3);
    }
    builder.window_start(window_start).build().expect("a valid test commit")
}

async fn search(store: &MysqlStore, id: &ConversationId, terms: &[&str], before: u64, limit: usize) -> SearchResult {
    let query = SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), before, limit);
    store.search(id, &query).await.expect("search")
}

fn seqs(found: &SearchResult) -> Vec<u64> {
    found.hits.iter().map(|h| h.message.seq).collect()
}

/// `found` is what the reference index answers for `query`, the messages from `history`.
fn agrees(found: &SearchResult, reference: &MemoryIndex, history: &[StoredMessage], query: &SearchQuery) {
    let want = reference.search(query, |seq| history.iter().find(|m| m.seq == seq).cloned());
    let what = format!(
        "{} terms before {} limit {}",
        query.terms.len(),
        query.before,
        query.limit
    );
    assert_eq!((found.docs, found.total_len), (want.docs, want.total_len), "{what}");
    assert_eq!(found.df, want.df, "{what}");
    assert_eq!(seqs(found), seqs(&want), "{what}");
    for (got, want) in found.hits.iter().zip(&want.hits) {
        assert_eq!(
            (got.len, &got.tf, &got.message),
            (want.len, &want.tf, &want.message),
            "{what}"
        );
    }
}

/// How many index rows of any kind the conversation's index number `key` has.
async fn index_rows(conn: &mut mysql_async::Conn, prefix: &str, key: u64) -> i64 {
    let mut total = 0;
    for table in ["index_terms", "index_docs", "index_df", "index_keys"] {
        let n: Option<i64> = conn
            .exec_first(
                format!("SELECT COUNT(*) FROM `{prefix}_{table}` WHERE ckey = ?"),
                (key,),
            )
            .await
            .expect("count");
        total += n.unwrap_or(0);
    }
    total
}

async fn index_key(conn: &mut mysql_async::Conn, prefix: &str, id: &ConversationId) -> Option<u64> {
    conn.exec_first::<Option<u64>, _, _>(
        format!("SELECT index_key FROM `{prefix}_conversations` WHERE id = ?"),
        (id.as_str().as_bytes(),),
    )
    .await
    .expect("index key")
    .flatten()
}

/// Makes the tables of `prefix` as chatmem-mysql did at schema version 2: its migration files,
/// applied the way `migrate.rs` applies them.
async fn schema_version_2(conn: &mut mysql_async::Conn, prefix: &str) {
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

/// Calls the commit procedure as a version 2 process does (13 parameters): appends
/// `messages` from `first`, moves the window to `window_start` and deletes below it.
async fn commit_as_version_2(
    conn: &mut mysql_async::Conn,
    prefix: &str,
    id: &ConversationId,
    expected: u64,
    messages: &[StoredMessage],
    window_start: u64,
    delete_below: Option<u64>,
) {
    let rows: Vec<(u64, u32, Option<String>, String)> = messages
        .iter()
        .map(|m| (m.seq, m.tokens, None, m.message_json().expect("json")))
        .collect();
    let next = messages.last().map_or(window_start, |m| m.seq + 1);
    let (applied, _): (i64, i64) = conn
        .exec_first(
            format!("CALL `{prefix}_commit`(?, ?, NULL, NULL, NULL, NULL, ?, ?, ?, NULL, ?, NULL, ?)"),
            (
                id.as_str().as_bytes(),
                expected,
                window_start,
                next,
                delete_below,
                fastrand::u64(1..),
                serde_json::to_string(&rows).expect("batch"),
            ),
        )
        .await
        .expect("a version 2 commit")
        .expect("a result row");
    assert_eq!(applied, 1);
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_version_2_database_is_upgraded_keeps_its_data_and_indexes_new_commits() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_v2");
    let mut raw = common::raw_conn(&url).await;
    schema_version_2(&mut raw, &prefix).await;
    let conv = id("upgraded");
    let old: Vec<StoredMessage> = (1..=3)
        .map(|seq| StoredMessage::new(seq, 3, Message::user(format!("walrus before {seq}"))))
        .collect();
    commit_as_version_2(&mut raw, &prefix, &conv, 0, &old, 1, None).await;

    let store = common::store_in(&url, &prefix).await;
    let version: Option<i32> = raw
        .query_first(format!("SELECT MAX(version) FROM `{prefix}_schema_version`"))
        .await
        .expect("schema version");
    assert_eq!(version, Some(SCHEMA_VERSION));
    assert_eq!(store.history(&conv, 0, 10).await.expect("history"), old, "data kept");
    let found = search(&store, &conv, &["walrus"], u64::MAX, 10).await;
    assert_eq!(
        (found.docs, found.df.clone(), found.hits.len()),
        (0, vec![0], 0),
        "old messages are not indexed"
    );

    // A new commit is indexed.
    let snap = store.load(&conv).await.expect("load");
    let texts = ["walrus tusk".to_string(), "narwhal tusk".to_string()];
    store
        .commit(&conv, appending(&snap, &texts, true, 1, Retention::KeepHistory))
        .await
        .expect("commit");
    let found = search(&store, &conv, &["walrus", "narwhal"], u64::MAX, 10).await;
    assert_eq!((found.docs, found.total_len, found.df.clone()), (2, 4, vec![1, 1]));
    assert_eq!(seqs(&found), [5, 4]);

    // A version 2 process still running commits through the old procedure: it indexes nothing,
    // and its delete below takes the index of what it deletes with it.
    let more = [StoredMessage::new(6, 3, Message::user("walrus from an old process"))];
    commit_as_version_2(&mut raw, &prefix, &conv, 2, &more, 5, Some(5)).await;
    let found = search(&store, &conv, &["walrus", "narwhal"], u64::MAX, 10).await;
    assert_eq!((found.docs, found.total_len, found.df.clone()), (1, 2, vec![0, 1]));
    assert_eq!(seqs(&found), [5]);
    assert_eq!(store.history(&conv, 0, 10).await.expect("history").len(), 2);

    // Migrations interrupted before they were recorded run again over what they already did.
    raw.query_drop(format!("DELETE FROM `{prefix}_schema_version` WHERE version >= 3"))
        .await
        .expect("forget versions 3 and up");
    let again = common::store_in(&url, &prefix).await;
    assert_eq!(seqs(&search(&again, &conv, &["narwhal"], u64::MAX, 10).await), [5]);
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn terms_differing_in_case_accents_or_trailing_spaces_stay_distinct() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_bin");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("binary");
    // "strasse" is indexed stemmed, as "strass"; "straße" is not stemmed (not plain ASCII).
    let texts = ["order été straße".to_string(), "ete strasse z".to_string()];
    store
        .commit(
            &conv,
            appending(&Snapshot::empty(), &texts, true, 1, Retention::KeepHistory),
        )
        .await
        .expect("commit");
    for (term, hits) in [
        ("order", vec![1]),
        ("été", vec![1]),
        ("straße", vec![1]),
        ("ete", vec![2]),
        ("strass", vec![2]),
        ("z", vec![2]),
        // Equal to a stored term under a case-insensitive, accent-insensitive or PAD SPACE
        // collation; not as bytes.
        ("Order", vec![]),
        ("ORDER", vec![]),
        ("order ", vec![]),
        (" order", vec![]),
        ("ordér", vec![]),
        ("Été", vec![]),
        ("ETE", vec![]),
        ("strasse", vec![]),
        ("z ", vec![]),
        ("Z", vec![]),
        ("strass ", vec![]),
    ] {
        let found = search(&store, &conv, &[term], u64::MAX, 10).await;
        assert_eq!(seqs(&found), hits, "{term:?}");
        assert_eq!(found.df, [hits.len() as u64], "{term:?}");
    }
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn queries_of_many_terms_agree_with_the_reference() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_many");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("many");
    // 400 words, each message holding a few of them (and "common" past the postings cap).
    let n = chatmem::recall::MAX_POSTINGS_PER_TERM as u64 + 60;
    let texts: Vec<String> = (1..=n)
        .map(|seq| {
            let words: Vec<String> = (0..4).map(|j| format!("w{}", (seq * 7 + j * 31) % 400)).collect();
            format!("common {} w{}", words.join(" "), seq % 400)
        })
        .collect();
    let commit = appending(&Snapshot::empty(), &texts, true, 1, Retention::KeepHistory);
    let mut reference = MemoryIndex::new();
    reference.add(commit.index(), 0);
    store.commit(&conv, commit).await.expect("commit");
    let history = store.history(&conv, 0, n as usize + 1).await.expect("history");
    let long = "x".repeat(MAX_TERM_BYTES + 1);
    for count in [1usize, 63, 64, 65, 100, 256, 257, 300] {
        // Distinct words, "common", a term in no message, a term too long to be stored and a
        // repeated one.
        let mut terms: Vec<String> = (0..count.saturating_sub(4))
            .map(|i| format!("w{}", (i * 3) % 400))
            .collect();
        terms.extend(["common".into(), "absent".into(), long.clone(), "w3".into()]);
        terms.truncate(count.max(1));
        for (before, limit) in [(u64::MAX, 20), (n - 30, 7), (200, 1000)] {
            let query = SearchQuery::new(terms.clone(), before, limit);
            let found = store.search(&conv, &query).await.expect("search");
            agrees(&found, &reference, &history, &query);
        }
    }
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn an_index_too_large_for_one_parameter_is_staged_and_lands_whole() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_big");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("big");
    // 4,096 distinct terms of 60 bytes per message: some 270 KB of index each, 6 MB in all.
    let texts: Vec<String> = (0..24)
        .map(|m| (0..4096).map(|i| format!("{}{m:04}w{i:05} ", "t".repeat(50))).collect())
        .collect();
    let commit = appending(&Snapshot::empty(), &texts, true, 1, Retention::KeepHistory);
    let mut reference = MemoryIndex::new();
    reference.add(commit.index(), 0);
    store.commit(&conv, commit).await.expect("a commit with a staged index");
    let history = store.history(&conv, 0, 100).await.expect("history");
    let first = format!("{}0000w00000", "t".repeat(50));
    let last = format!("{}0023w04095", "t".repeat(50));
    let query = SearchQuery::new(vec![first, last, "absent".into()], u64::MAX, 10);
    let found = store.search(&conv, &query).await.expect("search");
    assert_eq!((found.docs, seqs(&found)), (24, vec![24, 1]));
    agrees(&found, &reference, &history, &query);
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn an_expired_conversation_restarts_with_a_new_index_and_a_purge_takes_the_old() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_expiry");
    let store = common::store_in(&url, &prefix).await;
    let mut raw = common::raw_conn(&url).await;
    let (revive, purge) = (id("revive"), id("purge"));
    let short = Commit::on(&Snapshot::empty())
        .index(true)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_millis(300)))
        .append(Message::user("walrus one"), 1)
        .append(Message::user("walrus two"), 1)
        .build()
        .expect("commit");
    for conv in [&revive, &purge] {
        store.commit(conv, short.clone()).await.expect("commit");
    }
    let (old_revive, old_purge) = (
        index_key(&mut raw, &prefix, &revive).await.expect("an index number"),
        index_key(&mut raw, &prefix, &purge).await.expect("an index number"),
    );
    assert!(index_rows(&mut raw, &prefix, old_revive).await > 0);
    // The commit's time is the one the conversation records as its last commit.
    let found = search(&store, &revive, &["walrus"], u64::MAX, 10).await;
    let listed = store
        .recent(&RecentQuery::new(revive.as_str(), None, 1))
        .await
        .expect("recent");
    assert_eq!(found.hits[0].at_micros, listed.conversations[0].updated_micros);
    tokio::time::sleep(Duration::from_millis(600)).await;

    let again = appending(
        &Snapshot::empty(),
        &["narwhal three".to_string()],
        true,
        1,
        Retention::KeepHistory,
    );
    store.commit(&revive, again).await.expect("restart");
    let found = search(&store, &revive, &["walrus", "narwhal"], u64::MAX, 10).await;
    assert_eq!((found.docs, found.df.clone(), seqs(&found)), (1, vec![0, 1], vec![1]));
    let new_revive = index_key(&mut raw, &prefix, &revive).await.expect("a new index number");
    assert_ne!(new_revive, old_revive);
    assert_eq!(
        index_rows(&mut raw, &prefix, old_revive).await,
        0,
        "the old index is gone"
    );

    assert_eq!(store.purge_expired().await.expect("purge"), 1);
    assert_eq!(
        index_rows(&mut raw, &prefix, old_purge).await,
        0,
        "purged with its conversation"
    );
    assert!(store.clear(&revive).await.expect("clear"));
    assert_eq!(
        index_rows(&mut raw, &prefix, new_revive).await,
        0,
        "cleared with its conversation"
    );
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn an_indexed_commit_and_a_search_are_one_round_trip_each() {
    use chatmem_test::proxy::{Protocol, Proxy};
    use chatmem_test::sql_suite::SqlDb;
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("recall_rtt");
    common::store_in(&url, &prefix).await; // migrate outside the count
    let proxy = Proxy::start(common::Mysql::tcp_addr(&url), Protocol::Mysql).await;
    let store = MysqlStore::builder(&common::Mysql::url_via(&url, proxy.addr))
        .prefix(&prefix)
        .pool_size(1)
        .connect()
        .await
        .expect("connect through the proxy");
    let conv = id("rtt");
    let texts: Vec<String> = (0..40).map(|i| format!("order w{i} refund")).collect();
    // Warm up: each statement is prepared once per connection, at its first use.
    let warm = id("rtt-warm");
    store
        .commit(
            &warm,
            appending(&Snapshot::empty(), &texts, true, 1, Retention::KeepHistory),
        )
        .await
        .expect("warm commit");
    let terms: Vec<&str> = vec!["order", "w3", "absent", "refund", "w7"];
    search(&store, &warm, &terms, u64::MAX, 20).await;

    let before = proxy.round_trips();
    store
        .commit(
            &conv,
            appending(&Snapshot::empty(), &texts, true, 1, Retention::KeepHistory),
        )
        .await
        .expect("commit");
    assert_eq!(proxy.round_trips() - before, 1, "an indexed commit");
    let before = proxy.round_trips();
    let found = search(&store, &conv, &terms, u64::MAX, 20).await;
    assert_eq!(proxy.round_trips() - before, 1, "a search");
    assert_eq!((found.docs, found.hits.len()), (40, 20));
    common::drop_prefix(&url, &prefix).await;
}
