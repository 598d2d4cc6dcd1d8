//! The conversation summary on a real Redis: kept as one JSON field of the meta hash,
//! data written before summaries (no such field) loads without one and takes one under the
//! same layout version, and a damaged summary is reported as corrupt.

use crate::common::{self, cleanup, meta_key, msgs_key, raw, store, unique_prefix, url};
use chatmem::store::{Commit, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Heuristic, Message, Retention, Store, Summary};
use redis::aio::MultiplexedConnection;

/// The `summary` field of `id`'s meta hash, as stored.
async fn summary_field(conn: &mut MultiplexedConnection, prefix: &str, id: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(meta_key(prefix, id))
        .arg("summary")
        .query_async(conn)
        .await
        .unwrap()
}

/// The sequences of every message kept for `id` (the window and below).
async fn kept(store: &chatmem_redis::RedisStore, id: &ConversationId) -> Vec<u64> {
    store.history(id, 0, 100).await.unwrap().iter().map(|m| m.seq).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn the_summary_is_one_json_field_of_the_meta_hash() {
    let url = url();
    let prefix = unique_prefix("summary-field");
    let store = store(&url, &prefix).await;
    let mut conn = raw(&url).await;
    let id = ConversationId::new("s").unwrap();
    let first = (1..=6).fold(Commit::on(&store.load(&id).await.unwrap()), |b, i| {
        b.append(Message::user(format!("m{i}")), 3)
    });
    store.commit(&id, first.build().unwrap()).await.unwrap();
    assert_eq!(
        summary_field(&mut conn, &prefix, "s").await,
        None,
        "no field until a summary"
    );
    assert_eq!(store.load(&id).await.unwrap().summary, None);

    // A summary up to 2 with the window from 5: 1-2 go, 3-4 wait for a summary.
    let s = Summary::new("订单 LC202610060018: \"not shipped\"\n{x}", 2, &Heuristic);
    let c = Commit::on(&store.load(&id).await.unwrap())
        .retention(Retention::DropEvicted)
        .keep_unsummarized()
        .summary(s.clone(), 0)
        .window_start(5)
        .build()
        .unwrap();
    assert_eq!(c.delete_below(), Some(3));
    store.commit(&id, c).await.unwrap();
    assert_eq!(
        summary_field(&mut conn, &prefix, "s").await.as_deref(),
        Some(s.to_json().as_str()),
        "stored as Summary::to_json writes it"
    );
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.summary.as_ref(), Some(&s));
    assert_eq!(snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [5, 6]);
    assert_eq!(kept(&store, &id).await, [3, 4, 5, 6], "deleted below 3, not below 5");

    // A commit without a summary leaves the field as it was.
    let c = Commit::on(&snap)
        .retention(Retention::DropEvicted)
        .keep_unsummarized()
        .append(Message::assistant("a7"), 3)
        .build()
        .unwrap();
    store.commit(&id, c).await.unwrap();
    assert_eq!(
        summary_field(&mut conn, &prefix, "s").await.as_deref(),
        Some(s.to_json().as_str())
    );
    assert_eq!(kept(&store, &id).await, [3, 4, 5, 6, 7]);

    // A damaged summary fails the load as corrupt, naming the conversation.
    let () = redis::cmd("HSET")
        .arg(meta_key(&prefix, "s"))
        .arg("summary")
        .arg("{not a summary")
        .query_async(&mut conn)
        .await
        .unwrap();
    let e = store.load(&id).await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
    assert_eq!(e.conversation(), Some(&id), "{e}");
    assert!(e.to_string().contains("summary"), "{e}");

    // Clearing forgets the summary with the conversation.
    assert!(store.clear(&id).await.unwrap());
    assert_eq!(summary_field(&mut conn, &prefix, "s").await, None);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn data_written_before_summaries_loads_without_one_and_takes_one() {
    let url = url();
    let prefix = unique_prefix("pre-summary");
    let mut conn = raw(&url).await;
    let (meta, msgs) = (meta_key(&prefix, "old"), msgs_key(&prefix, "old"));
    // What chatmem-redis with layout 2 wrote before summaries: no `summary` field.
    let mut pipe = redis::pipe();
    pipe.cmd("SET")
        .arg(format!("{prefix}:schema"))
        .arg(2)
        .cmd("HSET")
        .arg(&meta)
        .arg(&[
            ("id", "old"),
            ("version", "3"),
            ("window_start", "4"),
            ("next_seq", "8"),
            ("commit_token", "12345"),
            ("sys_seq", "1"),
            ("sys_tokens", "5"),
            ("sys_json", r#"{"role":"system","content":"after-sale"}"#),
            ("sys_counted_by", "heuristic"),
        ])
        .cmd("ZADD")
        .arg(format!("{prefix}:ids"))
        .arg(0)
        .arg("old");
    for seq in 2..8 {
        pipe.cmd("ZADD")
            .arg(&msgs)
            .arg(seq)
            .arg(format!(r#"{seq}:6@heuristic:{{"role":"user","content":"m{seq}"}}"#));
    }
    pipe.exec_async(&mut conn).await.unwrap();

    let store = store(&url, &prefix).await;
    let schema: u64 = common::layout_version(&mut conn, &prefix).await;
    assert_eq!(schema, 2, "summaries need no new layout version");
    assert_eq!(schema, chatmem_redis::SCHEMA_VERSION);

    let id = ConversationId::new("old").unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.summary, None, "a missing field is no summary");
    assert_eq!((snap.version, snap.window_start, snap.next_seq), (3, 4, 8));
    assert_eq!(snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [4, 5, 6, 7]);
    assert_eq!(
        snap.system.as_ref().map(|s| (s.seq, s.counted_by.as_deref())),
        Some((1, Some("heuristic")))
    );

    // The first summary covers 2-3 (evicted, kept under KeepHistory so far); the window moves
    // to 6, and 4-5 wait for the next summary.
    let s = Summary::new("m2 and m3 were small talk.", 3, &Heuristic);
    let c = Commit::on(&snap)
        .retention(Retention::DropEvicted)
        .keep_unsummarized()
        .summary(s.clone(), 0)
        .append(Message::assistant("a8"), 3)
        .window_start(6)
        .build()
        .unwrap();
    assert_eq!(c.delete_below(), Some(4));
    assert_eq!(store.commit(&id, c).await.unwrap(), 4);
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.summary, Some(s));
    assert_eq!(snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [6, 7, 8]);
    assert_eq!(kept(&store, &id).await, [4, 5, 6, 7, 8]);
    let old: Vec<StoredMessage> = store.history(&id, 5, 1).await.unwrap();
    assert_eq!(
        (
            old[0].tokens,
            old[0].counted_by.as_deref(),
            old[0].message.text().as_deref()
        ),
        (6, Some("heuristic"), Some("m6")),
        "old members read as they were written"
    );
    assert_eq!(snap.system.map(|s| s.seq), Some(1), "the system message is kept");
    cleanup(&url, &prefix).await;
}
