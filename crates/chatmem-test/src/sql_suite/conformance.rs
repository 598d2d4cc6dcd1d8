//! The shared conformance suite against a SQL store, in a throwaway namespace, and the
//! store connected without settings.

use std::sync::Arc;

use chatmem::store::StoredMessage;
use chatmem::{Message, Retention, Store};

use super::SqlDb;

/// [`run_conformance`](crate::run_conformance) in a fresh namespace.
pub async fn store_conforms<D: SqlDb>() {
    let url = D::url();
    let namespace = D::fresh_namespace("conformance");
    let store = D::store_in(&url, &namespace).await;
    crate::run_conformance(Arc::new(store)).await;
    D::drop_namespace(&url, &namespace).await;
}

/// A store connected without settings uses the default namespace, and works there.
pub async fn connect_uses_the_default_namespace<D: SqlDb>() {
    let url = D::url();
    let (store, namespace) = D::connect_default(&url).await;
    assert_eq!(namespace, D::DEFAULT_NAMESPACE);
    let id = crate::unique_id("default-namespace");
    let commit = crate::commit(
        0,
        vec![StoredMessage::new(1, 1, Message::user("hello"))],
        1,
        Retention::DropEvicted,
    );
    assert_eq!(store.commit(&id, commit).await.expect("commit"), 1);
    assert_eq!(store.load(&id).await.expect("load").messages.len(), 1);
    // Leave nothing behind in the shared namespace.
    assert!(store.clear(&id).await.expect("clear"));
}
