//! The server's log lines: every request answered at `info` in a span
//! naming its id, method and route template; a store failure at `warn`/`error` in the same
//! span, so the `request_id` of an error body finds it; never a conversation id. Driven in
//! process (`chatmem_test::app`): the spans are the router's, not the listener's.
//!
//! A binary of its own: tracing's callsite interest cache is process-wide, so other tests'
//! spans and subscribers in the same process could change what this one captures.

use std::io::Write;
use std::sync::{Arc, Mutex};

use chatmem::{ChatMemory, Store};
use chatmem_server::{ServerConfig, app};
use chatmem_test::app::App;
use serde_json::Value;

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

    let store: Arc<dyn Store> = Arc::new(chatmem_test::FailingStore::broken());
    let server = App::new(app(ChatMemory::new(store), ServerConfig::default()));
    let mut failures = Vec::new();
    for (id, status, level) in [("user-down-5a1c", 503, "WARN"), ("user-corrupt-77e0", 500, "ERROR")] {
        let r = server.get(&format!("/v1/conversations/{id}/messages")).await;
        assert_eq!(r.status, status, "{id}");
        let body: Value = r.json();
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
