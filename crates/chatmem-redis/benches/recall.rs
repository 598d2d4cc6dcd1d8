//! What recall costs a turn on a Redis-backed store, at 1,000 and 100,000 indexed messages
//! in one conversation: the shared recall bench of [`chatmem_test::recall_bench`] (search
//! p50/p95, a turn's commit with and without its index entries, a whole turn with recall).
//! Needs `CHATMEM_TEST_REDIS_URL`; prints a skip line without it.
//!
//! Run: `CHATMEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p chatmem-redis --bench recall`
//! (`CHATMEM_BENCH_TURNS=50` for a quick run).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chatmem_redis::RedisStore;
use chatmem_test::bench;
use chatmem_test::recall_bench::{self, RecallBenchConfig};

fn main() {
    let Some(url) = bench::service_url("CHATMEM_TEST_REDIS_URL", "start Redis") else {
        return;
    };
    bench::block_on(run(&url));
}

async fn run(url: &str) {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let prefix = format!("chatmem-bench-recall-{millis}-{:08x}", fastrand::u32(..));
    let store = RedisStore::builder(url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connecting to Redis");
    let report = recall_bench::run(Arc::new(store), &RecallBenchConfig::default().samples_from_env())
        .await
        .expect("bench");
    print!("{}", report.table("chatmem-redis"));

    // The bench cleared its conversations; what is left are the store's own keys.
    let mut conn = redis::Client::open(url)
        .expect("valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection");
    redis::cmd("DEL")
        .arg(format!("{prefix}:schema"))
        .arg(format!("{prefix}:ids"))
        .arg(format!("{prefix}:{{{prefix}:ids}}:recent"))
        .exec_async(&mut conn)
        .await
        .expect("deleting the bench keys");
}
