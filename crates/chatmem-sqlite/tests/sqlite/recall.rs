//! The recall index as this store keeps it: searched from a read-only store, written in the
//! commit's own transaction (a commit that fails leaves neither its messages nor their index
//! entries), and gone with an expired, purged or cleared conversation.

use std::path::Path;
use std::time::Duration;

use chatmem::store::{Commit, SearchQuery, SearchResult, Snapshot, StoreErrorKind};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_sqlite::SqliteStore;

/// A commit of `texts` (user messages) on `base`, indexed, keeping history.
fn indexed(base: &Snapshot, texts: impl IntoIterator<Item = String>) -> Commit {
    let mut builder = Commit::on(base).index(true).retention(Retention::KeepHistory);
    for text in texts {
        builder = builder.append(Message::user(text), 3);
    }
    builder.build().expect("a valid commit")
}

async fn search(store: &SqliteStore, id: &ConversationId, terms: &[&str], limit: usize) -> SearchResult {
    let query = SearchQuery::new(terms.iter().map(|t| (*t).to_string()).collect(), u64::MAX, limit);
    store.search(id, &query).await.expect("search")
}

fn seqs(found: &SearchResult) -> Vec<u64> {
    found.hits.iter().map(|h| h.message.seq).collect()
}

/// Rows of the index tables and indexed messages the file holds for `id`:
/// (segments, postings rows, indexed messages).
fn index_rows(path: &Path, id: &ConversationId) -> (i64, i64, i64) {
    let raw = rusqlite::Connection::open(path).expect("raw open");
    let count = |sql: &str| -> i64 {
        raw.query_row(sql, [id.as_str()], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    (
        count("SELECT count(*) FROM recall_segments WHERE conversation_id = ?1"),
        count("SELECT count(*) FROM recall_postings WHERE conversation_id = ?1"),
        count("SELECT count(*) FROM messages WHERE conversation_id = ?1 AND recall_terms IS NOT NULL"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_store_searches_what_another_wrote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ro-recall.db");
    let writer = SqliteStore::open(&path).await.expect("open");
    let id = chatmem_test::unique_id("ro-recall");
    // Enough for the older messages to be in a segment and the newer in the tail.
    let first = indexed(&Snapshot::empty(), (1..=200).map(|i| format!("walrus number{i}")));
    let then = first.then().index(true);
    writer.commit(&id, first).await.expect("commit");
    let second = then
        .append(Message::user("walrus at the end"), 3)
        .build()
        .expect("commit");
    writer.commit(&id, second).await.expect("commit");
    assert!(index_rows(&path, &id).0 >= 1, "a segment was written");

    let reader = SqliteStore::builder(&path)
        .read_only(true)
        .open()
        .await
        .expect("open read-only");
    assert!(reader.searches(), "a read-only store searches");
    let read = search(&reader, &id, &["walrus", "number7"], 5).await;
    let written = search(&writer, &id, &["walrus", "number7"], 5).await;
    assert_eq!(read, written);
    assert_eq!((read.docs, read.df.clone()), (201, vec![201, 1]));
    assert_eq!(seqs(&read)[0], 7);
    let e = reader
        .commit(&id, indexed(&reader.load(&id).await.expect("load"), ["x".to_string()]))
        .await
        .expect_err("a read-only store refuses commits");
    assert_eq!(e.kind(), StoreErrorKind::InvalidInput);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_that_fails_midway_leaves_neither_messages_nor_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fault.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let id = chatmem_test::unique_id("fault");
    store
        .commit(
            &id,
            indexed(&Snapshot::empty(), (1..=100).map(|i| format!("alpha {i}"))),
        )
        .await
        .expect("commit");
    let raw = rusqlite::Connection::open(&path).expect("raw open");

    // The second commit fills the tail, so it writes a segment, which fails on its last
    // term: after its messages and their index entries were written in the transaction.
    raw.execute_batch(
        "CREATE TRIGGER fault BEFORE INSERT ON recall_postings WHEN NEW.term = 'boom'
         BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
    )
    .expect("trigger");
    let snap = store.load(&id).await.expect("load");
    let batch = |snap: &Snapshot| indexed(snap, (1..=40).map(|i| format!("beta boom {i}")));
    store
        .commit(&id, batch(&snap))
        .await
        .expect_err("the injected fault fails the commit");
    let after = store.load(&id).await.expect("load");
    assert_eq!((after.version, after.next_seq), (snap.version, snap.next_seq));
    assert_eq!(store.history(&id, 0, 1000).await.expect("history").len(), 100);
    let found = search(&store, &id, &["beta", "alpha"], 200).await;
    assert_eq!(
        (found.docs, found.df.clone(), found.hits.len()),
        (100, vec![0, 100], 100)
    );
    assert_eq!(index_rows(&path, &id), (0, 0, 100), "no segment, no new entries");

    // Without the fault the same commit goes through, segment and all.
    raw.execute_batch("DROP TRIGGER fault").expect("drop trigger");
    store.commit(&id, batch(&snap)).await.expect("commit");
    let found = search(&store, &id, &["boom", "alpha"], 200).await;
    assert_eq!(
        (found.docs, found.df.clone(), found.hits.len()),
        (140, vec![40, 100], 140)
    );
    assert_eq!(seqs(&found)[0], 140);
    let (segments, postings, entries) = index_rows(&path, &id);
    assert_eq!((segments, entries), (1, 140));
    assert!(postings > 100, "{postings}");

    // A fault on the second of two messages: the first message's entry goes too.
    let snap = store.load(&id).await.expect("load");
    raw.execute(
        &format!(
            "CREATE TRIGGER fault BEFORE INSERT ON messages WHEN NEW.seq = {}
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
            snap.next_seq + 1
        ),
        [],
    )
    .expect("trigger");
    store
        .commit(&id, indexed(&snap, ["gamma first".into(), "gamma second".into()]))
        .await
        .expect_err("the injected fault fails the commit");
    let found = search(&store, &id, &["gamma"], 10).await;
    assert_eq!((found.docs, found.df.clone(), found.hits.len()), (140, vec![0], 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_purged_or_cleared_conversation_leaves_no_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("forget.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let ttl = |commit: chatmem::store::CommitBuilder| commit.ttl(Some(Duration::from_millis(300)));
    let expiring = |snap: &Snapshot, word: &str| {
        let mut builder = ttl(Commit::on(snap).index(true).retention(Retention::KeepHistory));
        for i in 1..=150 {
            builder = builder.append(Message::user(format!("{word} {i}")), 3);
        }
        builder.build().expect("commit")
    };
    let renewed = chatmem_test::unique_id("expired");
    let purged = chatmem_test::unique_id("purged");
    store
        .commit(&renewed, expiring(&Snapshot::empty(), "narwhal"))
        .await
        .expect("commit");
    store
        .commit(&purged, expiring(&Snapshot::empty(), "narwhal"))
        .await
        .expect("commit");
    assert!(index_rows(&path, &renewed).0 >= 1, "a segment was written");
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Expired reads as empty, although its rows are still there.
    assert_eq!(
        search(&store, &renewed, &["narwhal"], 10).await,
        SearchResult::default()
    );
    assert!(index_rows(&path, &renewed).0 >= 1);
    // Written anew, it starts with an empty index: the old rows do not count.
    store
        .commit(
            &renewed,
            indexed(&Snapshot::empty(), ["narwhal tusk".into(), "narwhal twice".into()]),
        )
        .await
        .expect("a new conversation");
    let found = search(&store, &renewed, &["narwhal", "150"], 10).await;
    assert_eq!(
        (found.docs, found.df.clone(), seqs(&found)),
        (2, vec![2, 0], vec![2, 1])
    );
    assert_eq!(index_rows(&path, &renewed), (0, 0, 2));

    // Purged: its index goes with it.
    assert_eq!(store.purge_expired().await.expect("purge"), 1);
    assert_eq!(index_rows(&path, &purged), (0, 0, 0));

    // Cleared: gone too, the segments included.
    let snap = store.load(&renewed).await.expect("load");
    store
        .commit(&renewed, indexed(&snap, (1..=200).map(|i| format!("narwhal {i}"))))
        .await
        .expect("commit");
    assert!(index_rows(&path, &renewed).0 >= 1, "a segment was written");
    assert!(store.clear(&renewed).await.expect("clear"));
    assert_eq!(index_rows(&path, &renewed), (0, 0, 0));
    assert_eq!(
        search(&store, &renewed, &["narwhal"], 10).await,
        SearchResult::default()
    );
}
