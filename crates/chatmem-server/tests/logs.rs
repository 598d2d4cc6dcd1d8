//! The server's log lines (issue 25, finding 6): every request answered at `info` in a span
//! naming its id, method and route template; a store failure at `warn`/`error` in the same
//! span, so the `request_id` of an error body finds it; never a conversation id.

use std::io::Write;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chatmem::store::{Commit, Snapshot, StoreError, StoreErrorKind, StoredMessage};
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Page, Store};
use chatmem_server::{ServerConfig, app};
use serde_json::Value;

/// A store whose loads fail: unavailable for ids holding `down`, corrupt for the others; the
/// errors name the conversation, as the stores' errors do.
#[derive(Debug, Default)]
struct Broken(InMemoryStore);

#[async_trait]
impl Store for Broken {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        Err(if id.as_str().contains("down") {
            StoreError::new(StoreErrorKind::Unavailable, "the test took it down").for_conversation(id)
        } else {
            StoreError::corrupt(id, "message seq 9 is not a valid message")
        })
    }
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        self.0.commit(id, commit).await
    }
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.0.history(id, after, limit).await
    }
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.0.clear(id).await
    }
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.0.list(after, limit).await
    }
    async fn recent(&self, query: &chatmem::store::RecentQuery) -> Result<chatmem::store::RecentPage, StoreError> {
        self.0.recent(query).await
    }
}

/// Log output kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("not poisoned")).into_owned()
    }
}

// One thread: the subscriber set for this thread sees the server's tasks too.
#[tokio::test(flavor = "current_thread")]
async fn store_failures_are_logged_with_the_request_id_and_without_the_id() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let store: Arc<dyn Store> = Arc::new(Broken::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app(ChatMemory::new(store), ServerConfig::default())).await;
    });
    let http = reqwest::Client::new();
    let mut failures = Vec::new();
    for (id, status, level) in [("user-down-5a1c", 503, "WARN"), ("user-corrupt-77e0", 500, "ERROR")] {
        let r = http
            .get(format!("http://{addr}/v1/conversations/{id}/messages"))
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), status, "{id}");
        let body: Value = r.json().await.expect("json");
        let request_id = body["error"]["request_id"].as_str().expect("a request id").to_owned();
        failures.push((id, request_id, status, level));
    }

    let text = logs.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for (id, request_id, status, level) in failures {
        let of_request: Vec<&Value> = lines
            .iter()
            .filter(|l| l["span"]["request_id"] == request_id.as_str())
            .collect();
        let store_line = of_request
            .iter()
            .find(|l| l["message"] == "store failure")
            .unwrap_or_else(|| panic!("no store failure logged for {request_id}:\n{text}"));
        assert_eq!(store_line["level"], level, "{store_line}");
        assert!(store_line["context"].is_string(), "{store_line}");
        let answered = of_request
            .iter()
            .find(|l| l["status"] == status && l["level"] == "INFO")
            .unwrap_or_else(|| panic!("no answer line for {request_id}:\n{text}"));
        assert_eq!(
            answered["span"]["route"], "/v1/conversations/{id}/messages",
            "{answered}"
        );
        assert!(
            of_request
                .iter()
                .any(|l| l["level"] == "WARN" && l["status"] == status && l["code"].is_string()),
            "a 5xx answer is logged at warn: {text}"
        );
        assert!(!text.contains(id), "the logs name conversation {id}:\n{text}");
    }
}
