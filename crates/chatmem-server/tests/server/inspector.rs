//! What the inspector's tests (`ui`, `ui_browser`) share: a memory that keeps history (served
//! on loopback for the browser), and the seed conversation.

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Retention, Store, WindowPolicy};
use chatmem_server::{ServerConfig, app};
use serde_json::Value;

/// A memory keeping history with a window of `max_messages`.
pub(crate) fn memory(max_messages: usize) -> ChatMemory<Arc<dyn Store>> {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    ChatMemory::builder(store)
        .policy(WindowPolicy::messages(max_messages))
        .retention(Retention::KeepHistory)
        .build()
        .expect("valid memory settings")
}

/// [`memory`] served on a free loopback port, for a browser; its base URL.
pub(crate) async fn serve(max_messages: usize, config: ServerConfig) -> String {
    chatmem_test::loopback::serve(app(memory(max_messages), config))
        .await
        .url()
}

/// The seed conversation (examples/aftersale.json): the order number, a tool call, a new
/// system message, the refund question.
pub(crate) fn seed_messages() -> Value {
    serde_json::from_str(include_str!("../../../../examples/aftersale.json")).expect("the seed conversation")
}
