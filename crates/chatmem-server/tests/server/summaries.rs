//! A slow summary model does not cost REST turns: the store timeout
//! bounds store calls only, a turn waits for its summary at most the summarizer's wait, and a
//! late summary is counted as the summary's, not the store's.
//! Driven in process (`chatmem_test::app`): what is checked is the handlers and the memory, not a socket.

use std::sync::Arc;
use std::time::Duration;

use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, InMemoryStore, Message, ModelError, Store, Summarizer,
    WindowPolicy,
};
use chatmem_server::{Limits, ServerConfig, app};
use chatmem_test::app::App;
use serde_json::{Value, json};

/// A summary model that answers after `delay` (longer than the server's store timeout).
#[derive(Debug)]
struct Slow {
    delay: Duration,
}

#[async_trait::async_trait]
impl ChatModel for Slow {
    async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        tokio::time::sleep(self.delay).await;
        Ok(ChatResponse {
            message: Message::assistant("the order is LC202610060018"),
            usage: None,
            finish_reason: None,
        })
    }
}

fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_summary_model_slower_than_the_store_timeout_loses_no_turn() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let summarizer = Summarizer::new(Slow {
        delay: Duration::from_millis(1500),
    })
    .wait(Duration::from_millis(100));
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(3))
        .summarizer(summarizer)
        .build()
        .expect("valid settings");
    let config = ServerConfig {
        limits: Limits {
            store_timeout: Duration::from_millis(500),
            ..Limits::default()
        },
        ..ServerConfig::default()
    };
    let server = App::new(app(memory, config));
    let url = "/v1/conversations/slow-summary/messages";

    // Every turn from the second on evicts; each must commit although the summary model
    // takes three store timeouts to answer.
    for turn in 0..4 {
        let body = json!({"messages": [
            {"role": "user", "content": format!("turn {turn}: order LC202610060018")},
            {"role": "assistant", "content": "noted"},
        ]});
        let r = server.post_json(url, &body).await;
        assert_eq!(r.status, 200, "turn {turn}: {}", r.text());
    }
    let history = server.get("/v1/conversations/slow-summary/history").await.json();
    let stored = history["messages"].as_array().map_or(0, Vec::len);
    assert_eq!(stored, 8, "every turn is stored (none summarized yet): {history}");

    // The late summary lands in a later commit once the model has answered.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let window: Value = server
        .post_json(
            url,
            &json!({"messages": [{"role": "user", "content": "can it be refunded?"}]}),
        )
        .await
        .json();
    let first = &window["messages"][0];
    assert_eq!(first["role"], "system", "{window}");
    assert!(
        first["content"].as_str().is_some_and(|t| t.contains("LC202610060018")),
        "{window}"
    );

    let metrics = server.get("/metrics").await.text();
    assert!(
        sample(&metrics, "chatmem_summaries_total{outcome=\"late\"}") >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "chatmem_summaries_total{outcome=\"made\"}"),
        1.0,
        "{metrics}"
    );
    assert!(
        !metrics.lines().any(|l| l.starts_with("chatmem_store_errors_total{")),
        "a slow summary is not a store error: {metrics}"
    );
}
