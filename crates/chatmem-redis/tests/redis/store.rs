//! RedisStore against a real Redis: the shared conformance suite plus Redis-specific checks
//! (key layout, TTL on both keys, the id index, corruption, schema, awkward ids, many tasks).

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::{cleanup, hex, meta_key, msgs_key, raw, store, unique_prefix, url};
use chatmem::store::{Commit, Snapshot, StoreErrorKind, StoredMessage};
use chatmem::{ConversationId, Message, Retention, Store};
use chatmem_redis::RedisStore;
use chatmem_test::commit_full;

/// `texts` as alternating user/assistant messages stored from `from`.
fn turns(from: u64, texts: &[&str]) -> Vec<StoredMessage> {
    texts
        .iter()
        .zip(from..)
        .map(|(t, seq)| {
            let m = if seq % 2 == 1 {
                Message::user(*t)
            } else {
                Message::assistant(*t)
            };
            StoredMessage::new(seq, 3, m)
        })
        .collect()
}

/// A commit appending `texts` from `from` to a conversation at version `expected`.
fn append(expected: u64, from: u64, texts: &[&str], window_start: u64, retention: Retention) -> Commit {
    chatmem_test::commit(expected, turns(from, texts), window_start, retention)
}

/// [`append`] with a TTL.
fn append_ttl(expected: u64, from: u64, texts: &[&str], ttl: Duration) -> Commit {
    commit_full(
        expected,
        from,
        None,
        turns(from, texts),
        1,
        Retention::DropEvicted,
        Some(ttl),
    )
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn conformance() {
    let url = url();
    let prefix = unique_prefix("conformance");
    let store = store(&url, &prefix).await;
    chatmem_test::run_conformance(Arc::new(store)).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn keys_share_a_hash_tag_and_ttl_covers_both() {
    let url = url();
    let prefix = unique_prefix("layout");
    let store = store(&url, &prefix).await;
    let id = ConversationId::new("a{b}c").unwrap();
    let c = Commit::on(&Snapshot::empty())
        .system(Message::system("rules"), 5)
        .append(Message::user("u1"), 3)
        .append(Message::assistant("a1"), 3)
        .retention(Retention::KeepHistory)
        .ttl(Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    assert_eq!(store.commit(&id, c).await.unwrap(), 1);

    let mut conn = raw(&url).await;
    let meta = meta_key(&prefix, "a{b}c");
    let msgs = msgs_key(&prefix, "a{b}c");
    let raw_id: String = redis::cmd("HGET")
        .arg(&meta)
        .arg("id")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(raw_id, "a{b}c", "the raw id is kept in the meta hash");
    for key in [&meta, &msgs] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap();
        assert!((50_000..=60_000).contains(&ttl), "{key} has PTTL {ttl}");
    }
    let records = common::members(&mut conn, &msgs).await;
    assert_eq!(records[0], r#"1:3:{"role":"user","content":"u1"}"#);

    // ttl None clears the expiry of both keys.
    assert_eq!(
        store
            .commit(&id, append(1, 3, &["u2"], 1, Retention::KeepHistory))
            .await
            .unwrap(),
        2
    );
    for key in [&meta, &msgs] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap();
        assert_eq!(ttl, -1, "{key} still expires");
    }
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.system.as_ref().map(|s| (s.seq, s.tokens)), Some((1, 5)));
    assert_eq!(snap.messages.len(), 3);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_zero_ttl_expires_at_once_and_one_too_long_never_expires() {
    let url = url();
    let prefix = unique_prefix("ttl-edges");
    let store = store(&url, &prefix).await;
    let zero = ConversationId::new("zero").unwrap();
    assert_eq!(
        store
            .commit(&zero, append_ttl(0, 1, &["hi"], Duration::ZERO))
            .await
            .unwrap(),
        1
    );
    assert!(!store.load(&zero).await.unwrap().exists());

    let long = ConversationId::new("long").unwrap();
    assert_eq!(
        store
            .commit(&long, append_ttl(0, 1, &["hi"], Duration::MAX))
            .await
            .unwrap(),
        1
    );
    let mut conn = raw(&url).await;
    for key in ["meta", "msgs"] {
        let key = format!("{prefix}:{{{}}}:{key}", hex("long"));
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.unwrap();
        assert_eq!(ttl, -1, "{key} expires");
    }
    assert_eq!(store.load(&long).await.unwrap().messages.len(), 1);
    assert_eq!(store.list(None, 10).await.unwrap().ids, [long]);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn load_reads_only_the_window_and_drop_evicted_deletes() {
    let url = url();
    let prefix = unique_prefix("window");
    let store = store(&url, &prefix).await;
    let id = ConversationId::new("w").unwrap();
    let texts: Vec<String> = (1..=10).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    store
        .commit(&id, append(0, 1, &refs, 7, Retention::KeepHistory))
        .await
        .unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!(snap.window_start, 7);
    assert_eq!(snap.next_seq, 11);
    assert_eq!(snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [7, 8, 9, 10]);
    assert_eq!(
        store.history(&id, 0, 100).await.unwrap().len(),
        10,
        "KeepHistory keeps evicted messages"
    );

    // DropEvicted deletes below the window start the commit sets, stored as it is.
    store
        .commit(&id, append(1, 11, &["m11"], 9, Retention::DropEvicted))
        .await
        .unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!((snap.version, snap.window_start, snap.next_seq), (2, 9, 12));
    let seqs: Vec<u64> = store
        .history(&id, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, [9, 10, 11]);

    // A commit without messages moves only the window (next_seq stays, from the commit).
    let c = Commit::on(&snap).window_start(11).build().unwrap();
    assert_eq!(c.next_seq(), 12);
    store.commit(&id, c).await.unwrap();
    let snap = store.load(&id).await.unwrap();
    assert_eq!((snap.version, snap.window_start, snap.next_seq), (3, 11, 12));
    assert_eq!(snap.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [11]);

    // The version check is the store's only check: a stale commit changes nothing.
    assert!(
        store
            .commit(&id, append(2, 12, &["x"], 11, Retention::DropEvicted))
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert_eq!(store.load(&id).await.unwrap(), snap);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn expired_ids_leave_the_index_lazily() {
    let url = url();
    let prefix = unique_prefix("expiry");
    let store = store(&url, &prefix).await;
    let mut conn = raw(&url).await;
    let index = format!("{prefix}:ids");
    for name in ["a", "b", "c", "d", "e"] {
        let id = ConversationId::new(name).unwrap();
        let c = if ["c", "d"].contains(&name) {
            append(0, 1, &["hi"], 1, Retention::DropEvicted)
        } else {
            append_ttl(0, 1, &["hi"], Duration::from_millis(50))
        };
        store.commit(&id, c).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let indexed: u64 = redis::cmd("ZCARD").arg(&index).query_async(&mut conn).await.unwrap();
    assert_eq!(indexed, 5, "expired ids stay indexed until met");
    let a = ConversationId::new("a").unwrap();
    assert!(!store.load(&a).await.unwrap().exists());
    assert!(store.history(&a, 0, 10).await.unwrap().is_empty());

    let c = ConversationId::new("c").unwrap();
    let page = store.list(None, 1).await.unwrap();
    assert_eq!(page.ids, std::slice::from_ref(&c));
    assert_eq!(page.next, Some(c.clone()), "d is live after c");
    let left = common::members(&mut conn, &index).await;
    assert_eq!(
        left,
        ["c", "d", "e"],
        "a and b were removed when listing met them; e is past the page"
    );
    assert_eq!(store.purge_expired().await.unwrap(), 1, "purge removes e");
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(store.clear(&c).await.unwrap());
    assert!(store.clear(&ConversationId::new("d").unwrap()).await.unwrap());
    let indexed: u64 = redis::cmd("ZCARD").arg(&index).query_async(&mut conn).await.unwrap();
    assert_eq!(indexed, 0);
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn recency_is_backfilled_on_connect() {
    let url = url();
    let prefix = unique_prefix("recency-backfill");
    let mut conn = raw(&url).await;
    common::recency_is_backfilled_on_connect(&url, &mut conn, &prefix).await;
    let store = store(&url, &prefix).await;
    common::recent_scans_past_other_prefixes(&store).await;
    common::backfill_walks_batches(&url, &mut conn, &prefix).await;
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn a_conversation_without_meta_does_not_exist() {
    let url = url();
    let prefix = unique_prefix("orphan");
    let store = store(&url, &prefix).await;
    let mut conn = raw(&url).await;
    common::a_conversation_without_meta_does_not_exist(&store, &mut conn, &prefix).await;

    // Through ChatMemory: get and history agree that it is gone.
    let memory = chatmem::ChatMemory::new(store.clone());
    let id = ConversationId::new("evicted").unwrap();
    memory
        .add(&id, [Message::user("hi"), Message::assistant("hello")])
        .await
        .unwrap();
    let () = redis::cmd("DEL")
        .arg(meta_key(&prefix, "evicted"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(memory.get(&id).await.unwrap(), []);
    assert_eq!(memory.history(&id).await.unwrap(), []);
    assert!(!memory.clear(&id).await.unwrap());
    cleanup(&url, &prefix).await;
}

/// The longest a `PING` took, sent every 5 ms on its own connection until `stop` is set;
/// an error when one failed (the raw connection gives up after 500 ms).
async fn watch_pings(url: String, stop: Arc<std::sync::atomic::AtomicBool>) -> Result<Duration, String> {
    let mut conn = raw(&url).await;
    let mut worst = Duration::ZERO;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let started = std::time::Instant::now();
        redis::cmd("PING")
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| format!("a PING failed after {:?}: {e}", started.elapsed()))?;
        worst = worst.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(worst)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn chat_memory_refuses_a_batch_over_the_bound() {
    // Not beside a sixteen-process stress: the PINGs watched below must keep answering.
    let _timed = chatmem_test::stress::timed().await;
    let url = url();
    let prefix = unique_prefix("batch-bound");
    let store = store(&url, &prefix).await;
    let memory = chatmem::ChatMemory::builder(store.clone())
        .retention(Retention::KeepHistory)
        .counter(chatmem::Heuristic)
        .build()
        .unwrap();
    let batch = |n: usize| -> Vec<Message> {
        (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    Message::user(format!("question {i}"))
                } else {
                    Message::assistant(format!("answer {i}"))
                }
            })
            .collect()
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = tokio::spawn(watch_pings(url.clone(), stop.clone()));

    // 20,000 messages: refused before anything is sent, so Redis never runs a script that
    // size.
    let id = ConversationId::new("bulk").unwrap();
    let e = memory.add(&id, batch(20_000)).await.unwrap_err();
    assert!(
        matches!(
            e,
            chatmem::Error::BatchTooLarge {
                messages: 20_000,
                max_messages: chatmem::DEFAULT_MAX_BATCH_MESSAGES,
                ..
            }
        ),
        "{e}"
    );
    assert!(!store.load(&id).await.unwrap().exists(), "nothing stored");
    assert!(store.history(&id, 0, 100).await.unwrap().is_empty());
    assert!(store.list(None, 10).await.unwrap().ids.is_empty(), "not even listed");
    let mut conn = raw(&url).await;
    let keys: i64 = redis::cmd("EXISTS")
        .arg(meta_key(&prefix, "bulk"))
        .arg(msgs_key(&prefix, "bulk"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys, 0, "no key written");

    // A batch at the bound is one script, short enough that Redis keeps answering others.
    let started = std::time::Instant::now();
    memory
        .add(&id, batch(chatmem::DEFAULT_MAX_BATCH_MESSAGES))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        store.history(&id, 0, 20_000).await.unwrap().len(),
        chatmem::DEFAULT_MAX_BATCH_MESSAGES
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let worst_ping = watcher.await.unwrap().expect("Redis kept answering");
    eprintln!("a 10,000-message add took {took:?}; the slowest PING meanwhile took {worst_ping:?}");
    cleanup(&url, &prefix).await;
}

/// `e` is a `Corrupt` error naming conversation `id` exactly once and saying `what`.
fn assert_corrupt(e: &chatmem::store::StoreError, id: &ConversationId, what: &str) {
    assert_eq!(e.kind(), StoreErrorKind::Corrupt, "{e}");
    assert_eq!(e.conversation(), Some(id), "{e}");
    let shown = e.to_string();
    assert_eq!(shown.matches(&format!("{:?}", id.as_str())).count(), 1, "{shown}");
    assert!(e.context().contains(what), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn corrupt_records_name_conversation_and_seq() {
    let url = url();
    let prefix = unique_prefix("corrupt");
    let store = store(&url, &prefix).await;
    let bad = ConversationId::new("bad one").unwrap();
    let good = ConversationId::new("good one").unwrap();
    for id in [&bad, &good] {
        store
            .commit(id, append(0, 1, &["u1", "a1", "u2"], 1, Retention::KeepHistory))
            .await
            .unwrap();
    }
    let mut conn = raw(&url).await;
    let msgs = msgs_key(&prefix, "bad one");
    redis::cmd("ZREMRANGEBYSCORE")
        .arg(&msgs)
        .arg(2)
        .arg(2)
        .exec_async(&mut conn)
        .await
        .unwrap();
    redis::cmd("ZADD")
        .arg(&msgs)
        .arg(2)
        .arg(r#"2:1:{"role":"wizard","content":"x"}"#)
        .exec_async(&mut conn)
        .await
        .unwrap();
    // Read by a store that has not cached the messages it wrote (stored messages never
    // change, so the writer's cache does not read them again).
    let fresh = self::store(&url, &prefix).await;
    for e in [
        fresh.load(&bad).await.unwrap_err(),
        store.history(&bad, 0, 10).await.unwrap_err(),
    ] {
        assert_corrupt(&e, &bad, "seq 2");
    }
    redis::cmd("ZADD")
        .arg(&msgs)
        .arg(3)
        .arg("no json")
        .exec_async(&mut conn)
        .await
        .unwrap();
    assert_corrupt(&store.history(&bad, 2, 10).await.unwrap_err(), &bad, "seq:tokens:json");
    let meta = meta_key(&prefix, "bad one");
    redis::cmd("HSET")
        .arg(&meta)
        .arg("sys_seq")
        .arg(1)
        .arg("sys_tokens")
        .arg(1)
        .arg("sys_json")
        .arg("{")
        .exec_async(&mut conn)
        .await
        .unwrap();
    assert_corrupt(&store.load(&bad).await.unwrap_err(), &bad, "seq 1");
    let () = redis::cmd("HSET")
        .arg(&meta)
        .arg("version")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_corrupt(&store.load(&bad).await.unwrap_err(), &bad, "version");
    assert_corrupt(
        &store
            .commit(&bad, append(3, 4, &["u"], 1, Retention::KeepHistory))
            .await
            .unwrap_err(),
        &bad,
        "version",
    );

    // The other conversation is untouched, and listing still works.
    assert_eq!(store.load(&good).await.unwrap().messages.len(), 3);
    assert_eq!(store.list(None, 10).await.unwrap().ids, [bad.clone(), good.clone()]);
    assert!(store.clear(&bad).await.unwrap());
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn schema_is_created_and_newer_is_refused() {
    let url = url();
    let prefix = unique_prefix("schema");
    let mut conn = raw(&url).await;
    drop(store(&url, &prefix).await);
    drop(store(&url, &prefix).await);
    let v: u64 = common::layout_version(&mut conn, &prefix).await;
    assert_eq!(v, chatmem_redis::SCHEMA_VERSION);

    // A connect after the layout version is set to `version` fails as `kind`.
    let setter = conn.clone();
    let refused = |version: String, kind: StoreErrorKind| {
        let (url, prefix, mut conn) = (url.clone(), prefix.clone(), setter.clone());
        async move {
            let () = redis::cmd("SET")
                .arg(format!("{prefix}:schema"))
                .arg(&version)
                .query_async(&mut conn)
                .await
                .unwrap();
            let e = RedisStore::builder(&url)
                .key_prefix(&prefix)
                .connect()
                .await
                .unwrap_err();
            assert_eq!(e.kind(), kind, "{version}: {e}");
        }
    };
    refused(
        (chatmem_redis::SCHEMA_VERSION + 1).to_string(),
        StoreErrorKind::SchemaTooNew,
    )
    .await;
    let v: u64 = common::layout_version(&mut conn, &prefix).await;
    assert_eq!(
        v,
        chatmem_redis::SCHEMA_VERSION + 1,
        "a newer version is never overwritten"
    );
    // Garbage, and a version older than any chatmem wrote, are refused and left as found.
    for junk in ["garbage", "0"] {
        refused(junk.to_owned(), StoreErrorKind::Corrupt).await;
        let v: String = common::layout_version(&mut conn, &prefix).await;
        assert_eq!(v, junk);
    }
    cleanup(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn awkward_and_long_ids() {
    let url = url();
    let prefix = unique_prefix("ids");
    let store = store(&url, &prefix).await;
    let ids: Vec<ConversationId> = [
        "it's \"quoted\"".to_owned(),
        "100%".to_owned(),
        "*".to_owned(),
        "a:b:c".to_owned(),
        "{tag}".to_owned(),
        "}{".to_owned(),
        "x}".to_owned(),
        "(paren".to_owned(),
        "[-+]".to_owned(),
        "订单-LC202610060018".to_owned(),
        "{".repeat(256),
        "}".repeat(256),
        "é".repeat(128),
        format!("{}x", "%*:{}\"'".repeat(36)).chars().take(256).collect(),
    ]
    .into_iter()
    .map(|s| ConversationId::new(s).unwrap())
    .collect();
    assert!(ids.iter().any(|id| id.as_str().len() == 256));
    for (i, id) in ids.iter().enumerate() {
        let text = format!("message for {i}");
        store
            .commit(id, append(0, 1, &[&text], 1, Retention::KeepHistory))
            .await
            .unwrap();
    }
    for (i, id) in ids.iter().enumerate() {
        let snap = store.load(id).await.unwrap();
        assert_eq!(snap.messages.len(), 1, "{id:?}");
        assert_eq!(snap.messages[0].message.text().unwrap(), format!("message for {i}"));
    }
    let mut sorted = ids.clone();
    sorted.sort();
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = store.list(after.as_ref(), 3).await.unwrap();
        listed.extend(page.ids);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, sorted);
    // An id that is a prefix of another, or a cursor that is no id, pages correctly.
    let cursor = ConversationId::new("{").unwrap();
    let page = store.list(Some(&cursor), 1).await.unwrap();
    let first_after = sorted.iter().find(|id| **id > cursor).cloned();
    assert_eq!(page.ids, first_after.into_iter().collect::<Vec<_>>());
    for id in &ids {
        assert!(store.clear(id).await.unwrap(), "{id:?}");
        assert!(!store.clear(id).await.unwrap());
    }
    assert!(store.list(None, 10).await.unwrap().ids.is_empty());
    cleanup(&url, &prefix).await;
}
