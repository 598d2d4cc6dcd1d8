//! `GET /metrics` and `GET /openapi.json` over real HTTP: requests, commits, version conflicts
//! and store errors show up in the counters of their own server; the OpenAPI document lists
//! every route the router serves and documents the error body `ApiError` really writes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use chatmem::store::{Commit, Snapshot, StoreError, StoreErrorKind, StoredMessage};
use chatmem::{ChatMemory, ConversationId, InMemoryStore, Page, Store, WindowPolicy};
use chatmem_server::{Auth, ServerConfig, app, metrics_app};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A server on a free loopback port; its base URL.
async fn serve(store: Arc<dyn Store>, config: ServerConfig) -> String {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    spawn(app(memory, config)).await
}

async fn spawn(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// An in-memory store whose next `conflicts` commits lose a version check, and whose loads
/// fail as unavailable while `down` is set.
#[derive(Debug, Default)]
struct Flaky {
    inner: InMemoryStore,
    conflicts: AtomicUsize,
    down: AtomicBool,
}

#[async_trait]
impl Store for Flaky {
    async fn load(&self, id: &ConversationId) -> Result<Snapshot, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Unavailable, "the test took it down"));
        }
        self.inner.load(id).await
    }
    async fn commit(&self, id: &ConversationId, commit: Commit) -> Result<u64, StoreError> {
        let lose = self
            .conflicts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if lose {
            return Err(StoreError::conflict());
        }
        self.inner.commit(id, commit).await
    }
    async fn history(&self, id: &ConversationId, after: u64, limit: usize) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.history(id, after, limit).await
    }
    async fn clear(&self, id: &ConversationId) -> Result<bool, StoreError> {
        self.inner.clear(id).await
    }
    async fn list(&self, after: Option<&ConversationId>, limit: usize) -> Result<Page, StoreError> {
        self.inner.list(after, limit).await
    }
}

fn batch() -> Value {
    json!({"messages": [{"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
                        {"role": "assistant", "content": "收到。"}]})
}

async fn metrics_text(http: &reqwest::Client, url: &str) -> String {
    let r = http.get(url).send().await.expect("metrics");
    assert_eq!(r.status(), StatusCode::OK);
    let kind = r.headers()["content-type"].to_str().expect("ascii").to_owned();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    r.text().await.expect("text")
}

/// The value of the sample `series` (name and labels exactly as printed), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn requests_commits_conflicts_and_store_errors_are_counted() {
    let store = Arc::new(Flaky::default());
    store.conflicts.store(2, Ordering::SeqCst);
    let base = serve(store.clone(), ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/conversations/secret-user-id-42/messages");

    let r = http.post(&url).json(&batch()).send().await.expect("post");
    assert_eq!(r.status(), StatusCode::OK, "the commit is retried past two conflicts");
    assert_eq!(http.get(&url).send().await.expect("get").status(), StatusCode::OK);
    store.down.store(true, Ordering::SeqCst);
    let r = http.get(&url).send().await.expect("get");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    store.down.store(false, Ordering::SeqCst);
    http.get(format!("{base}/no/such/route")).send().await.expect("get");

    let text = metrics_text(&http, &format!("{base}/metrics")).await;
    let messages = r#"route="/v1/conversations/{id}/messages""#;
    for (series, value) in [
        (
            format!("chatmem_http_requests_total{{{messages},method=\"POST\",status=\"200\"}}"),
            1.0,
        ),
        (
            format!("chatmem_http_requests_total{{{messages},method=\"GET\",status=\"200\"}}"),
            1.0,
        ),
        (
            format!("chatmem_http_requests_total{{{messages},method=\"GET\",status=\"503\"}}"),
            1.0,
        ),
        (
            r#"chatmem_http_requests_total{route="unmatched",method="GET",status="404"}"#.to_owned(),
            1.0,
        ),
        (
            format!("chatmem_http_request_duration_seconds_count{{{messages}}}"),
            3.0,
        ),
        ("chatmem_commits_total".to_owned(), 1.0),
        ("chatmem_version_conflicts_total".to_owned(), 2.0),
        (
            r#"chatmem_store_errors_total{op="load",kind="unavailable"}"#.to_owned(),
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, &series), Some(value), "{series} in\n{text}");
    }
    assert!(!text.contains("secret-user-id-42"), "ids never become labels");
    assert!(!text.contains("no/such"), "nor do unknown paths");

    // Another server in the same process counts on its own.
    let other = serve(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let text = metrics_text(&http, &format!("{other}/metrics")).await;
    assert_eq!(sample(&text, "chatmem_commits_total"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "chatmem_version_conflicts_total"), Some(0.0), "{text}");
}

/// With `--auth`, `/metrics` on the main listener needs a token like every route; the
/// metrics-only router (for `--metrics-listen`) serves the same registry without one.
#[tokio::test]
async fn metrics_need_the_token_on_the_main_listener_only() {
    let auth = Auth::from_toml("[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n").expect("auth");
    let config = ServerConfig {
        auth: Some(auth),
        ..ServerConfig::default()
    };
    let scrape = spawn(metrics_app(config.metrics.clone())).await;
    let base = serve(Arc::new(InMemoryStore::new()), config).await;
    let http = reqwest::Client::new();
    let r = http.get(format!("{base}/metrics")).send().await.expect("get");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .get(format!("{base}/metrics"))
        .bearer_auth("token-of-team-a-000")
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::OK);
    let text = metrics_text(&http, &format!("{scrape}/metrics")).await;
    assert_eq!(
        sample(
            &text,
            r#"chatmem_http_requests_total{route="/metrics",method="GET",status="401"}"#
        ),
        Some(1.0),
        "the scrape listener shows the main listener's counts:\n{text}"
    );
}

/// Every documented operation reaches a handler of the router (not the fallback, not 405),
/// and the documented error body is the one the server writes.
#[tokio::test]
async fn the_openapi_document_matches_the_router_and_the_error_shape() {
    let base = serve(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let doc: Value = http
        .get(format!("{base}/openapi.json"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("the document is JSON");
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "{}",
        doc["openapi"]
    );

    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if ["get", "post", "delete", "put", "patch"].contains(&method.as_str()) {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let expected: BTreeSet<(String, String)> = [
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/conversations"),
        ("GET", "/v1/conversations/{id}/messages"),
        ("POST", "/v1/conversations/{id}/messages"),
        ("GET", "/v1/conversations/{id}/history"),
        ("DELETE", "/v1/conversations/{id}"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_owned(), p.to_owned()))
    .collect();
    assert_eq!(operations, expected);
    for (method, path) in &operations {
        let url = format!("{base}{}", path.replace("{id}", "a/b"));
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let r = http
            .request(method.clone(), &url)
            .json(&batch())
            .send()
            .await
            .expect("send");
        assert_ne!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        let body = r.text().await.expect("body");
        assert!(
            !body.contains("no such route"),
            "{method} {path} reached no handler: {body}"
        );
    }

    // The documented error body is exactly the one a refused request carries.
    let schemas = &doc["components"]["schemas"];
    let real: Value = http
        .get(format!("{base}/v1/conversations/unknown/messages"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let documented = resolve(&doc, &schemas["Error"]);
    assert_eq!(keys(&documented["properties"]), keys(&real));
    let detail = resolve(&doc, &documented["properties"]["error"]);
    assert_eq!(keys(&detail["properties"]), keys(&real["error"]));
    assert_eq!(
        keys(&detail["properties"]),
        ["code", "message", "param", "request_id", "type"]
            .map(String::from)
            .into()
    );
    for status in ["400", "401", "404"] {
        let response = &doc["paths"]["/v1/conversations/{id}/messages"]["get"]["responses"][status];
        let schema = &response["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(schema, "#/components/schemas/Error", "{status}: {response}");
    }

    // Every field a stored message comes back with is documented on Message.
    let url = format!("{base}/v1/conversations/fields/messages");
    let full = json!({"messages": [
        {"role": "user", "content": "查一下订单", "name": "alice"},
        {"role": "assistant", "content": null, "reasoning_content": "先查", "metadata": {"k": "v"},
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "查询失败", "is_error": true},
    ]});
    let window: Value = http
        .post(&url)
        .json(&full)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert_eq!(keys(&resolve(&doc, &schemas["Window"])["properties"]), keys(&window));
    let documented = keys(&resolve(&doc, &schemas["Message"])["properties"]);
    let mut seen = BTreeSet::new();
    for m in window["messages"].as_array().expect("messages") {
        seen.extend(keys(m));
    }
    assert!(seen.len() >= 8, "{seen:?}");
    assert!(
        seen.is_subset(&documented),
        "undocumented: {:?}",
        seen.difference(&documented)
    );
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// `schema`, or what its `$ref` points at.
fn resolve(doc: &Value, schema: &Value) -> Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.trim_start_matches("#/components/schemas/");
            doc["components"]["schemas"][name].clone()
        }
        None => schema.clone(),
    }
}
