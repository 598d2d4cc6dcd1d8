//! The conformance suite against the reference store.

use std::sync::Arc;

#[tokio::test(flavor = "multi_thread")]
async fn in_memory_store_conforms() {
    chatmem_test::run_conformance(Arc::new(chatmem::InMemoryStore::new())).await;
}

#[tokio::test(flavor = "current_thread")]
async fn in_memory_store_conforms_single_threaded() {
    chatmem_test::run_conformance(Arc::new(chatmem::InMemoryStore::new())).await;
}

#[test]
#[should_panic(expected = "is not followed by its answer")]
fn stress_check_catches_split_turns() {
    let mut ms: Vec<_> = (0..2).flat_map(|t| chatmem_test::stress::turn_messages(0, t)).collect();
    ms.swap(1, 2);
    chatmem_test::check_stress_history(&ms, 1, 2);
}
