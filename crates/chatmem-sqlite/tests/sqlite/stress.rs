//! 16 processes append 50 turns each to one conversation in one file at once; no turn may
//! be lost, duplicated or split. The test binary spawns copies of itself as the children.

use std::sync::Arc;

use chatmem_sqlite::SqliteStore;
use chatmem_test::stress;

/// The child: does nothing unless started by `sixteen_processes_share_one_file`.
#[tokio::test(flavor = "multi_thread")]
async fn stress_child() {
    let Some(child) = stress::child_env() else { return };
    let store = SqliteStore::connect(&child.url).await.expect("child: connect");
    stress::run_child(Arc::new(store), &child).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sixteen_processes_share_one_file() {
    if stress::child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("stress.db").display());
    let store = SqliteStore::connect(&url).await.expect("connect");
    let started = std::time::Instant::now();
    stress::run_parent(
        Arc::new(store),
        "stress::stress_child",
        &url,
        stress::PROCESSES,
        stress::TURNS,
    )
    .await;
    eprintln!(
        "{} processes x {} turns committed and checked in {:?}",
        stress::PROCESSES,
        stress::TURNS,
        started.elapsed()
    );
}

/// The same with summaries on: evicted turns are summarized and dropped; no turn is lost (the
/// summary plus what it does not cover is the whole transcript) and the summary never moves
/// backwards.
#[tokio::test(flavor = "multi_thread")]
async fn sixteen_summarizing_processes_share_one_file() {
    if stress::child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("stress-summary.db").display());
    let store = SqliteStore::connect(&url).await.expect("connect");
    stress::run_parent_summarizing(
        Arc::new(store),
        "stress::stress_child",
        &url,
        stress::PROCESSES,
        stress::TURNS,
    )
    .await;
}
