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
