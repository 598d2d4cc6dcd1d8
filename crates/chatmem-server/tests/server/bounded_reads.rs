//! What one request may read or make the server keep is bounded:
//! `/history` answers in pages, and a request's own window policy stays within the operator's
//! caps. The router is driven in process.

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Retention, Store, WindowPolicy};
use chatmem_server::{Limits, PolicyCaps, ServerConfig, app};
use chatmem_test::app::App;
use serde_json::{Value, json};

/// The app keeping history, driven in process.
async fn serve(config: ServerConfig) -> App {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .retention(Retention::KeepHistory)
        .build()
        .expect("valid settings");
    App::new(app(memory, config))
}

async fn post(app: &App, url: &str, body: Value) -> (u16, Value) {
    let r = app.post_json(url, &body).await;
    (r.status.as_u16(), r.json())
}

async fn get(app: &App, url: &str) -> (u16, Value) {
    let r = app.get(url).await;
    (r.status.as_u16(), r.json())
}

fn texts(page: &Value) -> Vec<String> {
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn history_answers_in_pages_that_follow_a_cursor() {
    let app = serve(ServerConfig::default()).await;
    let url = "/v1/conversations/long/messages".to_owned();
    let mut said = vec!["be brief".to_owned()];
    let (status, _) = post(
        &app,
        &url,
        json!({"messages": [{"role": "system", "content": "be brief"}]}),
    )
    .await;
    assert_eq!(status, 200);
    for batch in 0..5 {
        let messages: Vec<Value> = (0..50)
            .map(|i| {
                let text = format!("m{}", batch * 50 + i);
                said.push(text.clone());
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": text})
            })
            .collect();
        let (status, body) = post(&app, &url, json!({"messages": messages})).await;
        assert_eq!(status, 200, "{body}");
    }

    // Pages of the default 100 messages (the system message rides on the first), then the
    // rest; the pages together are the transcript, in order.
    let history = "/v1/conversations/long/history".to_owned();
    let mut read = Vec::new();
    let mut sizes = Vec::new();
    let mut next = history.clone();
    loop {
        let (status, page) = get(&app, &next).await;
        assert_eq!(status, 200, "{page}");
        sizes.push(page["messages"].as_array().map_or(0, Vec::len));
        read.extend(texts(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => next = format!("{history}?cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(sizes, [101, 100, 50]);
    assert_eq!(read, said);

    let (status, page) = get(&app, &format!("{history}?limit=7")).await;
    assert_eq!((status, page["messages"].as_array().map(Vec::len)), (200, Some(8)));
    for bad in ["limit=0", "limit=1001", "cursor=abc", "cursor=0", "page=2"] {
        let (status, body) = get(&app, &format!("{history}?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, _) = get(&app, "/v1/conversations/never-written/history").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_history_page_stops_at_about_the_body_limit() {
    let app = serve(ServerConfig::default()).await;
    let url = "/v1/conversations/large/messages".to_owned();
    // Ten messages of 200 KiB: a page of 1,000 would be 2 MiB.
    let big = "x".repeat(200 << 10);
    for i in 0..10 {
        let (status, body) = post(
            &app,
            &url,
            json!({"messages": [{"role": "user", "content": format!("{i}{big}")}]}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let history = "/v1/conversations/large/history".to_owned();
    let (_, first) = get(&app, &format!("{history}?limit=1000")).await;
    assert_eq!(
        first["messages"].as_array().map(Vec::len),
        Some(5),
        "5 × 200 KiB fit in 1 MiB"
    );
    let cursor = first["next_cursor"].as_str().expect("a cursor");
    let (_, rest) = get(&app, &format!("{history}?limit=1000&cursor={cursor}")).await;
    assert_eq!(rest["messages"].as_array().map(Vec::len), Some(5));
    assert!(rest["next_cursor"].is_null());
    assert!(texts(&rest)[0].starts_with('5'));
}

#[tokio::test]
async fn a_request_cannot_lift_eviction_past_the_operators_caps() {
    let caps = PolicyCaps {
        max_messages: 50,
        max_tokens: 4_000,
        ..PolicyCaps::default()
    };
    let config = ServerConfig {
        limits: Limits {
            policy: caps,
            ..Limits::default()
        },
        ..ServerConfig::default()
    };
    let app = serve(config).await;
    let url = "/v1/conversations/capped/messages".to_owned();
    let turn = json!([{"role": "user", "content": "order LC202610060018"}]);

    let (status, body) = post(
        &app,
        &url,
        json!({"messages": turn, "policy": {"max_messages": 1_000_000}}),
    )
    .await;
    assert_eq!(status, 400);
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_messages") && message.contains("50"), "{message}");
    let (status, _) = post(&app, &url, json!({"messages": turn, "policy": {"max_tokens": 4_001}})).await;
    assert_eq!(status, 400);
    let (status, _) = get(&app, &format!("{url}?max_tokens=1000000")).await;
    assert_eq!(status, 400);
    // Within the caps, a request's own window still works.
    let (status, body) = post(&app, &url, json!({"messages": turn, "policy": {"max_messages": 50}})).await;
    assert_eq!(status, 200, "{body}");

    // An operator may refuse request policies altogether.
    let config = ServerConfig {
        limits: Limits {
            policy: PolicyCaps {
                allowed: false,
                ..PolicyCaps::default()
            },
            ..Limits::default()
        },
        ..ServerConfig::default()
    };
    let app = serve(config).await;
    let url = "/v1/conversations/fixed/messages".to_owned();
    let (status, body) = post(&app, &url, json!({"messages": turn, "policy": {"max_messages": 2}})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(&app, &url, json!({"messages": turn})).await;
    assert_eq!(status, 200, "{body}");
}
