//! Helpers shared by the Redis tests: the server URL, unique key prefixes, raw access.
#![allow(dead_code, unreachable_pub)]

use std::time::{SystemTime, UNIX_EPOCH};

use chatmem_redis::RedisStore;

/// The variable naming the test server.
pub const URL_VAR: &str = "CHATMEM_TEST_REDIS_URL";

/// The test server's URL, which every test marked `#[ignore = "needs CHATMEM_TEST_REDIS_URL"]` needs.
pub fn url() -> String {
    chatmem_test::required_env(URL_VAR, "start Redis")
}

/// A key prefix unique to this call, so parallel tests and runs never meet.
pub fn unique_prefix(what: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("chatmem-test-{what}-{millis}-{:08x}", fastrand::u32(..))
}

/// A store on the test server under `prefix`.
pub async fn store(url: &str, prefix: &str) -> RedisStore {
    RedisStore::builder(url)
        .key_prefix(prefix)
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "connecting to the test Redis: {e} ({:?})",
                std::error::Error::source(&e)
            )
        })
}

/// A plain connection for poking at keys directly.
pub async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("valid test URL")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection to the test Redis")
}

/// Deletes every key under `prefix` (test clean-up only: uses SCAN, which the store never does).
pub async fn cleanup(url: &str, prefix: &str) {
    delete_keys(&mut raw(url).await, prefix).await;
}

/// Deletes every key under `prefix` that the server behind `conn` holds (on a Cluster: one
/// node's keys, through a plain connection to it).
pub async fn delete_keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("SCAN");
        // One key per DEL, sent as one pipeline: the keys of one Cluster node may still
        // sit in different slots.
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("DEL").arg(key).ignore();
            }
            let () = pipe.query_async(conn).await.expect("DEL");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}

/// The variable naming the test Redis Cluster.
pub const CLUSTER_VAR: &str = "CHATMEM_TEST_REDIS_CLUSTER_URL";

/// The test cluster's URL, which every test marked
/// `#[ignore = "needs CHATMEM_TEST_REDIS_CLUSTER_URL"]` needs.
pub fn cluster_url() -> String {
    chatmem_test::required_env(CLUSTER_VAR, "start a Redis Cluster, e.g. with tests/cluster/start.sh,")
}

/// The stress child's part: connects to the store its parent named (`<url>#<key prefix>`)
/// and writes its turns; does nothing unless a parent started this process as a child.
pub async fn stress_child() {
    let Some(child) = chatmem_test::stress::child_env() else {
        return;
    };
    let (url, prefix) = child.url.rsplit_once('#').expect("stress URL carries a key prefix");
    chatmem_test::stress::run_child(std::sync::Arc::new(store(url, prefix).await), &child).await;
}

/// The stress parent's part: 16 processes running the test `child` (which calls
/// [`stress_child`]) append to one conversation of a store at `url` under `prefix`, with
/// summaries on when `summarizing`; `cleanup` then removes the keys. Waits for the tests
/// that measure time to finish first, and they for it.
pub async fn stress_parent<F: std::future::Future<Output = ()>>(
    url: &str,
    prefix: &str,
    child: &str,
    summarizing: bool,
    cleanup: F,
) {
    use chatmem_test::stress;

    if stress::child_env().is_some() {
        return;
    }
    let _timed = stress::timed().await;
    let store = std::sync::Arc::new(store(url, prefix).await);
    let children = format!("{url}#{prefix}");
    let started = std::time::Instant::now();
    if summarizing {
        stress::run_parent_summarizing(store, child, &children, stress::PROCESSES, stress::TURNS).await;
    } else {
        stress::run_parent(store, child, &children, stress::PROCESSES, stress::TURNS).await;
    }
    eprintln!(
        "stress: {} processes x {} turns in {:?}",
        stress::PROCESSES,
        stress::TURNS,
        started.elapsed()
    );
    cleanup.await;
}

/// Every member of the sorted set `key`, lowest score first.
pub async fn members(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("ZRANGE")
}

/// The layout version recorded under `prefix` (`{prefix}:schema`), read as a `T`.
pub async fn layout_version<T: redis::FromRedisValue>(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> T {
    redis::cmd("GET")
        .arg(format!("{prefix}:schema"))
        .query_async(conn)
        .await
        .expect("GET the layout version")
}

/// Lower-case hex of `s`'s bytes (the hash tag the store uses).
pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The key of conversation `id`'s meta hash under key prefix `prefix`, as the store writes it.
pub fn meta_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:{{{}}}:meta", hex(id))
}

/// The key of conversation `id`'s message sorted set under `prefix`.
pub fn msgs_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:{{{}}}:msgs", hex(id))
}

/// A conversation whose `:meta` hash is gone while its `:msgs` remain (evicted under
/// `maxmemory`, or deleted by hand) does not exist for any operation: checked on `store`
/// (key prefix `prefix`) by deleting meta keys through `conn`, a raw connection to the same
/// Redis or Cluster.
pub async fn a_conversation_without_meta_does_not_exist(
    store: &RedisStore,
    conn: &mut impl redis::aio::ConnectionLike,
    prefix: &str,
) {
    use chatmem::store::StoredMessage;
    use chatmem::{ConversationId, Message, Retention, Store};

    let turn = |seq: u64, text: &str| {
        vec![
            StoredMessage::new(seq, 1, Message::user(format!("u-{text}"))),
            StoredMessage::new(seq + 1, 1, Message::assistant(format!("a-{text}"))),
        ]
    };
    let keys = |name: &str| (meta_key(prefix, name), msgs_key(prefix, name));
    async fn exists(conn: &mut impl redis::aio::ConnectionLike, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<i64>(conn)
            .await
            .expect("EXISTS")
            == 1
    }
    async fn del(conn: &mut impl redis::aio::ConnectionLike, key: &str) {
        let deleted: i64 = redis::cmd("DEL").arg(key).query_async(conn).await.expect("DEL");
        assert_eq!(deleted, 1, "{key} was there to delete");
    }

    let kept = ConversationId::new("kept").unwrap();
    let orphan = ConversationId::new("orphan").unwrap();
    for id in [&kept, &orphan] {
        let c = chatmem_test::commit(0, turn(1, "old"), 1, Retention::KeepHistory);
        assert_eq!(store.commit(id, c).await.unwrap(), 1);
    }
    let (meta, msgs) = keys("orphan");
    del(conn, &meta).await;
    assert!(exists(conn, &msgs).await, "the messages outlive their meta hash");

    let snap = store.load(&orphan).await.unwrap();
    assert_eq!((snap.version, snap.messages.len()), (0, 0), "load: {snap:?}");
    assert_eq!(
        store.history(&orphan, 0, 100).await.unwrap(),
        [],
        "history of a conversation without meta"
    );
    let page = store.list(None, 10).await.unwrap();
    assert_eq!(page.ids, std::slice::from_ref(&kept), "list");

    // A commit creating it anew starts from nothing: the stale messages are gone.
    let c = chatmem_test::commit(0, turn(1, "new"), 1, Retention::KeepHistory);
    assert_eq!(store.commit(&orphan, c).await.unwrap(), 1);
    let texts: Vec<String> = store
        .history(&orphan, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.message.text().unwrap_or_default().into_owned())
        .collect();
    assert_eq!(texts, ["u-new", "a-new"], "recreated");
    assert_eq!(store.list(None, 10).await.unwrap().ids, [kept.clone(), orphan.clone()]);

    // Clear of a conversation without meta: it did not exist, and its stale messages go.
    del(conn, &meta).await;
    assert!(!store.clear(&orphan).await.unwrap(), "clear says it did not exist");
    assert!(!exists(conn, &msgs).await, "clear removed the stale messages");
    assert_eq!(
        store.load(&kept).await.unwrap().messages.len(),
        2,
        "the other one is untouched"
    );
    assert!(store.clear(&kept).await.unwrap());
    assert!(store.list(None, 10).await.unwrap().ids.is_empty());
}

/// A commit of no messages at `expected`, with `ttl`.
pub fn bare(expected: u64, ttl: Option<std::time::Duration>) -> chatmem::store::Commit {
    chatmem_test::commit_full(expected, 1, None, Vec::new(), 1, chatmem::Retention::KeepHistory, ttl)
}

/// Conversations committed before the recency index existed are listed by
/// [`recent`](chatmem::Store::recent) with time 0 once a store connects, after those with a
/// recorded time, by id descending, and paged through like the others; a connect keeps
/// recorded times. The recency index is deleted through `conn` (a raw connection to the
/// store's Redis or Cluster at `url`) to make the data as an older chatmem left it.
pub async fn recency_is_backfilled_on_connect(url: &str, conn: &mut impl redis::aio::ConnectionLike, prefix: &str) {
    use chatmem::{ConversationId, Store};

    let old = store(url, prefix).await;
    let ids: Vec<ConversationId> = ["t/a", "t/b", "t/c", "u/x"]
        .iter()
        .map(|s| ConversationId::new(*s).unwrap())
        .collect();
    for id in &ids {
        let c = bare(0, None);
        assert_eq!(old.commit(id, c).await.unwrap(), 1);
    }
    let recent_key = format!("{prefix}:{{{prefix}:ids}}:recent");
    let deleted: i64 = redis::cmd("DEL").arg(&recent_key).query_async(conn).await.unwrap();
    assert_eq!(deleted, 1, "{recent_key} was there to delete");
    assert!(
        old.recent(&chatmem::store::RecentQuery::new("", None, 10))
            .await
            .unwrap()
            .conversations
            .is_empty()
    );
    // One commit by this version before the upgrade: its time is kept.
    let b = &ids[1];
    let c = bare(1, None);
    assert_eq!(old.commit(b, c).await.unwrap(), 2);

    let new = store(url, prefix).await;
    let listed = |page: chatmem::store::RecentPage| -> Vec<(String, bool)> {
        page.conversations
            .iter()
            .map(|c| (c.id.as_str().to_owned(), c.updated_micros > 0))
            .collect()
    };
    let all = new
        .recent(&chatmem::store::RecentQuery::new("", None, 10))
        .await
        .unwrap();
    let expected = [("t/b", true), ("u/x", false), ("t/c", false), ("t/a", false)]
        .map(|(id, timed)| (id.to_owned(), timed))
        .to_vec();
    assert_eq!(listed(all.clone()), expected);
    assert!(all.conversations.iter().all(|c| c.expires_micros.is_none()));
    assert_eq!(
        listed(
            new.recent(&chatmem::store::RecentQuery::new("t/", None, 10))
                .await
                .unwrap()
        ),
        [expected[0].clone(), expected[2].clone(), expected[3].clone()]
    );
    // A page at a time through the conversations of time 0.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = new
            .recent(&chatmem::store::RecentQuery::new("", before.as_ref(), 1))
            .await
            .unwrap();
        seen.extend(listed(page.clone()));
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    // Connecting again changes nothing; a commit gives a conversation its time.
    let again = store(url, prefix).await;
    assert_eq!(
        again
            .recent(&chatmem::store::RecentQuery::new("", None, 10))
            .await
            .unwrap(),
        all
    );
    let c = bare(1, None);
    assert_eq!(again.commit(&ids[3], c).await.unwrap(), 2);
    assert_eq!(
        listed(
            again
                .recent(&chatmem::store::RecentQuery::new("", None, 10))
                .await
                .unwrap()
        ),
        [("u/x", true), ("t/b", true), ("t/c", false), ("t/a", false)].map(|(id, timed)| (id.to_owned(), timed))
    );
    for id in &ids {
        assert!(again.clear(id).await.unwrap());
    }
    assert!(
        again
            .recent(&chatmem::store::RecentQuery::new("", None, 10))
            .await
            .unwrap()
            .conversations
            .is_empty()
    );
}

/// A prefix whose conversations are far down the recency index is found through several
/// batches of the index (1,000 entries each), and expired conversations met on the way
/// leave it.
pub async fn recent_scans_past_other_prefixes(store: &RedisStore) {
    use chatmem::{ConversationId, Store};
    use std::time::Duration;

    let needle = ConversationId::new("needle/1").unwrap();
    let expiring = ConversationId::new("needle/0").unwrap();
    let c = bare(0, None);
    store.commit(&needle, c).await.unwrap();
    let c = bare(0, Some(Duration::from_millis(1)));
    store.commit(&expiring, c).await.unwrap();
    let hay: Vec<ConversationId> = (0..1200)
        .map(|i| ConversationId::new(format!("hay/{i:04}")).unwrap())
        .collect();
    for chunk in hay.chunks(100) {
        futures_util::future::join_all(chunk.iter().map(|id| async move {
            let c = bare(0, None);
            store.commit(id, c).await.unwrap();
        }))
        .await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let page = store
        .recent(&chatmem::store::RecentQuery::new("needle/", None, 10))
        .await
        .unwrap();
    assert_eq!(page.conversations.iter().map(|c| &c.id).collect::<Vec<_>>(), [&needle]);
    assert_eq!(page.next, None);
    assert_eq!(
        store.list(None, 2000).await.unwrap().ids.len(),
        1201,
        "the expired one left the index"
    );

    let page = store
        .recent(&chatmem::store::RecentQuery::new("hay/", None, 1100))
        .await
        .unwrap();
    assert_eq!(page.conversations.len(), 1100);
    assert!(
        page.conversations
            .windows(2)
            .all(|w| w[0].cursor().comes_before(w[1].updated_micros, &w[1].id)),
        "newest first"
    );
    let rest = store
        .recent(&chatmem::store::RecentQuery::new("hay/", page.next.as_ref(), 1100))
        .await
        .unwrap();
    assert_eq!((rest.conversations.len(), rest.next), (100, None));
    let mut all: Vec<ConversationId> = page
        .conversations
        .into_iter()
        .chain(rest.conversations)
        .map(|c| c.id)
        .collect();
    all.sort();
    assert_eq!(all, hay);
}

/// The backfill on connect walks the id index in several batches: after
/// [`recent_scans_past_other_prefixes`] (1,201 conversations under `prefix`), with the
/// recency index deleted through `conn`, every conversation is listed again, with time 0.
pub async fn backfill_walks_batches(url: &str, conn: &mut impl redis::aio::ConnectionLike, prefix: &str) {
    use chatmem::Store;

    let recent_key = format!("{prefix}:{{{prefix}:ids}}:recent");
    let () = redis::cmd("DEL").arg(&recent_key).query_async(conn).await.unwrap();
    let store = store(url, prefix).await;
    let page = store
        .recent(&chatmem::store::RecentQuery::new("", None, 2000))
        .await
        .unwrap();
    assert_eq!(page.conversations.len(), 1201);
    assert!(page.conversations.iter().all(|c| c.updated_micros == 0));
    assert!(
        page.conversations.windows(2).all(|w| w[0].id > w[1].id),
        "by id, descending"
    );
}
