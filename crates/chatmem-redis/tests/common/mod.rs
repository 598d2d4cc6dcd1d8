//! Helpers shared by the Redis tests: the server URL, unique key prefixes, raw access.
#![allow(dead_code, unreachable_pub)]

use std::time::{SystemTime, UNIX_EPOCH};

use chatmem_redis::RedisStore;

/// The variable naming the test server.
pub const URL_VAR: &str = "CHATMEM_TEST_REDIS_URL";

/// The test server's URL, or `None` after printing the skip line.
pub fn url() -> Option<String> {
    chatmem_test::service_url(URL_VAR, "start Redis")
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
    let mut conn = raw(url).await;
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("SCAN");
        if !keys.is_empty() {
            let () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.expect("DEL");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
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
