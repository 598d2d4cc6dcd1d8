//! What the inspector's tests (`ui`, `ui_browser`) share: a server on loopback that
//! keeps history, and the seed conversation.

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Retention, Store, WindowPolicy};
use chatmem_server::{ServerConfig, app};
use serde_json::Value;

/// `memory` served on a free loopback port; its base URL.
pub(crate) async fn serve_memory(memory: ChatMemory<Arc<dyn Store>>, config: ServerConfig) -> String {
    chatmem_test::loopback::serve(app(memory, config)).await.url()
}

/// A server keeping history with a window of `max_messages`; its base URL.
pub(crate) async fn serve(max_messages: usize, config: ServerConfig) -> String {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(max_messages))
        .retention(Retention::KeepHistory)
        .build()
        .expect("valid memory settings");
    serve_memory(memory, config).await
}

/// The seed conversation (examples/aftersale.json): the order number, a tool call, a new
/// system message, the refund question.
pub(crate) fn seed_messages() -> Value {
    serde_json::from_str(include_str!("../../../../examples/aftersale.json")).expect("the seed conversation")
}
