//! Per-turn latency of a Redis-backed `ChatMemory` as the stored history grows from 10 to
//! 100,000 messages: the shared flat-cost bench of [`chatmem_test::bench`]. Needs
//! `CHATMEM_TEST_REDIS_URL`; prints a skip line without it.
//!
//! Run: `CHATMEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p chatmem-redis --bench turn`
//! (`CHATMEM_BENCH_TURNS` sets the measured turns per history, default 300).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chatmem_redis::RedisStore;
use chatmem_test::bench::{self, FlatCostConfig};

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
    let prefix = format!("chatmem-bench-{millis}-{:08x}", fastrand::u32(..));
    let store = RedisStore::builder(url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connecting to Redis");
    let config = FlatCostConfig {
        warmup: 100,
        ..FlatCostConfig::default()
    }
    .turns_from_env();
    let report = bench::flat_cost(Arc::new(store), &config).await.expect("bench");
    print!("{}", report.table("chatmem-redis"));

    // The harness cleared its conversations; what is left are the store's own keys.
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
