//! Sixteen processes append turns to one conversation at once; no turn may be lost,
//! duplicated or split. The test binary spawns copies of itself as the children.

mod common;

use std::sync::Arc;

use chatmem_redis::RedisStore;
use chatmem_test::stress;
use common::{cleanup, unique_prefix, url};

/// The children get `<redis url>#<key prefix>` as their store URL.
fn split(url: &str) -> (&str, &str) {
    url.rsplit_once('#').expect("stress URL carries a key prefix")
}

async fn connect(url: &str, prefix: &str) -> RedisStore {
    RedisStore::builder(url)
        .key_prefix(prefix)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connecting to the test Redis: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn stress_child() {
    let Some(child) = stress::child_env() else { return };
    let (url, prefix) = split(&child.url);
    stress::run_child(Arc::new(connect(url, prefix).await), &child).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn sixteen_processes_one_conversation() {
    if stress::child_env().is_some() {
        return;
    }
    let url = url();
    let prefix = unique_prefix("stress");
    let store = connect(&url, &prefix).await;
    let started = std::time::Instant::now();
    stress::run_parent(
        Arc::new(store),
        "stress_child",
        &format!("{url}#{prefix}"),
        stress::PROCESSES,
        stress::TURNS,
    )
    .await;
    eprintln!(
        "stress: {} processes x {} turns in {:?}",
        stress::PROCESSES,
        stress::TURNS,
        started.elapsed()
    );
    cleanup(&url, &prefix).await;
}
