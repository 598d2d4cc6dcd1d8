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

/// Runs the parent's part in a fresh database file `file`: 16 children running
/// `stress::stress_child` append to one conversation, with summaries on when `summarizing`.
async fn sixteen_processes(file: &str, summarizing: bool) {
    if stress::child_env().is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join(file).display());
    let store = Arc::new(SqliteStore::connect(&url).await.expect("connect"));
    let (child, processes, turns) = ("stress::stress_child", stress::PROCESSES, stress::TURNS);
    let started = std::time::Instant::now();
    if summarizing {
        stress::run_parent_summarizing(store, child, &url, processes, turns).await;
    } else {
        stress::run_parent(store, child, &url, processes, turns).await;
    }
    eprintln!(
        "{processes} processes x {turns} turns committed and checked in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sixteen_processes_share_one_file() {
    sixteen_processes("stress.db", false).await;
}

/// The same with summaries on: evicted turns are summarized and dropped; no turn is lost (the
/// summary plus what it does not cover is the whole transcript) and the summary never moves
/// backwards.
#[tokio::test(flavor = "multi_thread")]
async fn sixteen_summarizing_processes_share_one_file() {
    sixteen_processes("stress-summary.db", true).await;
}
