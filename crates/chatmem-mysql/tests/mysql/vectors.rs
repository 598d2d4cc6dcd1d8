//! Recall's vectors on MySQL/MariaDB beyond the shared conformance step: a version 3 database
//! upgraded (its indexed messages then embedded, the migration run again when interrupted),
//! model names that only a binary comparison tells apart, a vector written again still counted
//! (whatever the URL says of found rows), and vectors gone with their messages below a new
//! window start and when an expired conversation starts afresh.

use crate::common;

use std::time::Duration;

use chatmem::recall::{MessageVector, SearchQuery, Vector};
use chatmem::store::{Commit, Snapshot};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_mysql::{MysqlStore, SCHEMA_VERSION};
use mysql_async::prelude::Queryable;

fn id(name: &str) -> ConversationId {
    chatmem_test::unique_id(name)
}

fn vector(model: &str, values: &[f32]) -> Vector {
    Vector::new(model, values.to_vec()).expect("a valid test vector")
}

/// Commits `texts` as user messages, indexed, keeping history; their seqs and messages.
async fn commit_texts(store: &MysqlStore, id: &ConversationId, texts: &[&str]) -> Vec<(u64, Message)> {
    let base = store.load(id).await.expect("load");
    let mut builder = Commit::on(&base).retention(Retention::KeepHistory).index(true);
    let mut said = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        said.push((base.next_seq + i as u64, Message::user(*text)));
        builder = builder.append(Message::user(*text), 1);
    }
    let commit = builder
        .window_start(base.next_seq + texts.len() as u64 - 1)
        .build()
        .expect("a valid commit");
    store.commit(id, commit).await.expect("commit");
    said
}

async fn by_vector(store: &MysqlStore, id: &ConversationId, query: &Vector) -> Vec<u64> {
    let query = SearchQuery::new(Vec::new(), u64::MAX, 10).with_vector(query.clone());
    let found = store.search(id, &query).await.expect("search");
    found.vector_hits.iter().map(|h| h.message.seq).collect()
}

async fn unembedded(store: &MysqlStore, id: &ConversationId, model: &str, dim: usize) -> Vec<u64> {
    store
        .unembedded(id, model, dim, 0, 100)
        .await
        .expect("unembedded")
        .iter()
        .map(|m| m.message.seq)
        .collect()
}

/// Makes the tables of `prefix` as chatmem-mysql did at schema version 3, applied the way
/// `migrate.rs` applies them.
async fn schema_version_3(conn: &mut mysql_async::Conn, prefix: &str) {
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
async fn a_version_3_database_is_upgraded_and_its_indexed_messages_embedded() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("vectors_v3");
    let mut raw = common::raw_conn(&url).await;
    schema_version_3(&mut raw, &prefix).await;
    // One indexed message, committed as a version 3 process does.
    let conv = id("upgraded");
    let said = Message::user("walrus");
    let json = chatmem::store::StoredMessage::new(1, 1, said.clone())
        .message_json()
        .expect("json");
    let (applied, _): (i64, i64) = raw
        .exec_first(
            format!("CALL `{prefix}_commit_v3`(?, 0, NULL, NULL, NULL, NULL, 1, 2, NULL, NULL, 7, NULL, ?, ?, 1, 1)"),
            (
                conv.as_str().as_bytes(),
                serde_json::to_string(&[(1, 1, None::<String>, json)]).expect("batch"),
                r#"[[1, 1, [["walrus", 1]]]]"#,
            ),
        )
        .await
        .expect("a version 3 commit")
        .expect("a result row");
    assert_eq!(applied, 1);

    let store = common::store_in(&url, &prefix).await;
    let version: Option<i32> = raw
        .query_first(format!("SELECT MAX(version) FROM `{prefix}_schema_version`"))
        .await
        .expect("schema version");
    assert_eq!(version, Some(SCHEMA_VERSION));
    assert_eq!(unembedded(&store, &conv, "m", 2).await, [1], "indexed, not embedded");
    let v = vector("m", &[1.0, 0.0]);
    let kept = store
        .put_vectors(&conv, &[MessageVector::new(1, &said, v.clone())])
        .await
        .expect("put");
    assert_eq!(kept, 1);
    assert_eq!(by_vector(&store, &conv, &v).await, [1]);

    // Migrations interrupted before they were recorded run again over what they already did.
    raw.query_drop(format!("DELETE FROM `{prefix}_schema_version` WHERE version >= 4"))
        .await
        .expect("forget versions 4 and up");
    let again = common::store_in(&url, &prefix).await;
    assert_eq!(by_vector(&again, &conv, &v).await, [1], "the vector kept");
    let _ = raw.disconnect().await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn models_differing_in_case_or_trailing_spaces_are_never_compared() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("vectors_bin");
    let store = common::store_in(&url, &prefix).await;
    let conv = id("models");
    let said = commit_texts(&store, &conv, &["one", "two", "three", "four"]).await;
    // Equal under a PAD SPACE or case-insensitive collation; not as bytes.
    let models = ["e5", "e5 ", "E5", "é5"];
    let vectors: Vec<MessageVector> = said
        .iter()
        .zip(models)
        .map(|((seq, m), model)| MessageVector::new(*seq, m, vector(model, &[1.0, 0.0])))
        .collect();
    assert_eq!(store.put_vectors(&conv, &vectors).await.expect("put"), 4);
    for ((seq, _), model) in said.iter().zip(models) {
        let q = vector(model, &[1.0, 0.0]);
        assert_eq!(by_vector(&store, &conv, &q).await, [*seq], "{model:?}");
        let lacking: Vec<u64> = said.iter().map(|(s, _)| *s).filter(|s| s != seq).collect();
        assert_eq!(unembedded(&store, &conv, model, 2).await, lacking, "{model:?}");
    }
    assert!(by_vector(&store, &conv, &vector("e", &[1.0, 0.0])).await.is_empty());
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn a_vector_written_again_counts_as_kept() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("vectors_again");
    common::store_in(&url, &prefix).await;
    // The URL's own setting of found rows changes nothing.
    let store = MysqlStore::builder(&format!("{url}?client_found_rows=false"))
        .prefix(&prefix)
        .connect()
        .await
        .expect("connect");
    let conv = id("again");
    let said = commit_texts(&store, &conv, &["north", "south"]).await;
    let (seq, m) = &said[0];
    let east = MessageVector::new(*seq, m, vector("m", &[0.0, 1.0]));
    for _ in 0..2 {
        assert_eq!(
            store
                .put_vectors(&conv, std::slice::from_ref(&east))
                .await
                .expect("put"),
            1
        );
    }
    // Two vectors of one message in one call: it keeps the last, once.
    let north = MessageVector::new(*seq, m, vector("m", &[1.0, 0.0]));
    assert_eq!(store.put_vectors(&conv, &[east.clone(), north]).await.expect("put"), 1);
    let q = SearchQuery::new(Vec::new(), u64::MAX, 10).with_vector(vector("m", &[1.0, 0.0]));
    let found = store.search(&conv, &q).await.expect("search");
    assert_eq!(found.vector_hits.len(), 1);
    assert!(
        (found.vector_hits[0].similarity - 1.0).abs() < 1e-6,
        "the last one kept"
    );
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn vectors_go_below_a_new_window_start_and_with_an_expired_conversation() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("vectors_gone");
    let store = common::store_in(&url, &prefix).await;
    let v = vector("m", &[1.0, 0.0]);
    let put_all = |conv: ConversationId, said: Vec<(u64, Message)>| {
        let (store, v) = (store.clone(), v.clone());
        async move {
            let vectors: Vec<MessageVector> = said
                .iter()
                .map(|(seq, m)| MessageVector::new(*seq, m, v.clone()))
                .collect();
            store.put_vectors(&conv, &vectors).await.expect("put")
        }
    };

    // Deleted below a new window start: the vectors of what is deleted go with it.
    let dropping = id("dropping");
    let said = commit_texts(&store, &dropping, &["a", "b", "c"]).await;
    assert_eq!(put_all(dropping.clone(), said).await, 3);
    let snap = store.load(&dropping).await.expect("load");
    let evicting = Commit::on(&snap)
        .index(true)
        .retention(Retention::DropEvicted)
        .append(Message::user("d"), 1)
        .window_start(snap.next_seq)
        .build()
        .expect("commit");
    assert!(evicting.delete_below().is_some());
    store.commit(&dropping, evicting).await.expect("commit");
    assert_eq!(store.history(&dropping, 0, 10).await.expect("history").len(), 1);
    assert!(by_vector(&store, &dropping, &v).await.is_empty());
    assert_eq!(unembedded(&store, &dropping, "m", 2).await, [snap.next_seq]);

    // Expired, then started afresh: the new messages have no vector of the old ones.
    let expiring = id("expiring");
    let short = Commit::on(&Snapshot::empty())
        .index(true)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_millis(300)))
        .append(Message::user("walrus"), 1)
        .build()
        .expect("commit");
    store.commit(&expiring, short).await.expect("commit");
    assert_eq!(put_all(expiring.clone(), vec![(1, Message::user("walrus"))]).await, 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(by_vector(&store, &expiring, &v).await.is_empty(), "expired");
    assert_eq!(
        put_all(expiring.clone(), vec![(1, Message::user("walrus"))]).await,
        0,
        "nothing kept on an expired conversation"
    );
    commit_texts(&store, &expiring, &["walrus"]).await;
    assert!(by_vector(&store, &expiring, &v).await.is_empty(), "started afresh");
    assert_eq!(unembedded(&store, &expiring, "m", 2).await, [1]);
    common::drop_prefix(&url, &prefix).await;
}
