//! The shared conformance suite against MySQL/MariaDB, in throwaway tables.

mod common;

use std::sync::Arc;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn mysql_store_conforms() {
    let url = common::mysql_url();
    let prefix = common::fresh_prefix("conformance");
    let store = common::store_in(&url, &prefix).await;
    chatmem_test::run_conformance(Arc::new(store)).await;
    common::drop_prefix(&url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn connect_uses_the_default_prefix() {
    use chatmem::store::StoredMessage;
    use chatmem::{Message, Retention, Store};
    let url = common::mysql_url();
    let store = chatmem_mysql::MysqlStore::connect(&url).await.expect("connect");
    assert_eq!(store.prefix(), "chatmem");
    let id = chatmem_test::unique_id("default-prefix");
    let commit = chatmem_test::commit(
        0,
        vec![StoredMessage::new(1, 1, Message::user("hello"))],
        1,
        Retention::DropEvicted,
    );
    assert_eq!(store.commit(&id, commit).await.expect("commit"), 1);
    assert_eq!(store.load(&id).await.expect("load").messages.len(), 1);
    // Leave nothing behind in the shared tables.
    assert!(store.clear(&id).await.expect("clear"));
}
