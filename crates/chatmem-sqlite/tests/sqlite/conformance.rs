//! The shared conformance suite on a temporary SQLite file.

use std::sync::Arc;

use chatmem_sqlite::SqliteStore;

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A missing parent directory is created.
    let path = dir.path().join("nested/dir/chatmem.db");
    let store = SqliteStore::open(&path).await.expect("open");
    assert!(path.exists());
    chatmem_test::run_conformance(Arc::new(store.clone())).await;
    // Run it again on the same file, through a URL and a single connection.
    let store = SqliteStore::connect(&format!("sqlite:{}", path.display()))
        .await
        .expect("connect");
    chatmem_test::run_conformance(Arc::new(store)).await;
    let one = SqliteStore::builder(&path).pool_size(1).open().await.expect("open");
    chatmem_test::run_conformance(Arc::new(one)).await;
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_store_conforms_on_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::connect(&format!("sqlite://{}/c.db", dir.path().display()))
        .await
        .expect("connect");
    chatmem_test::run_conformance(Arc::new(store)).await;
}
