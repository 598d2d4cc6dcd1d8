//! The shared conformance suite against PostgreSQL, in a throwaway schema.

mod common;

use std::sync::Arc;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn postgres_store_conforms() {
    let url = common::pg_url();
    let schema = common::fresh_schema("conformance");
    let store = common::store_in(&url, &schema).await;
    chatmem_test::run_conformance(Arc::new(store)).await;
    common::drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn connect_uses_the_public_schema() {
    use chatmem::store::StoredMessage;
    use chatmem::{Message, Retention, Store};
    let url = common::pg_url();
    let store = chatmem_postgres::PostgresStore::connect(&url).await.expect("connect");
    assert_eq!(store.schema(), "public");
    let id = chatmem_test::unique_id("default-schema");
    let commit = chatmem_test::commit(
        0,
        vec![StoredMessage::new(1, 1, Message::user("hello"))],
        1,
        Retention::DropEvicted,
    );
    assert_eq!(store.commit(&id, commit).await.expect("commit"), 1);
    assert_eq!(store.load(&id).await.expect("load").messages.len(), 1);
    // Leave nothing behind in the shared schema.
    assert!(store.clear(&id).await.expect("clear"));
}
