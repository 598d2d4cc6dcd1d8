//! Recall on the server: `GET /v1/conversations/{id}/recall` (what recall finds for a question
//! and why, its bad input in the one error shape, tenants kept apart), the prompt dry run and
//! the OpenAI door sending the recalled messages just before the question (and storing none of
//! them), `/metrics` counting what recall added, the store's search counted and bounded by the
//! store timeout, and the inspector's recall panel.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, Method, StatusCode};
use chatmem::recall::RECALL_HEADING;
use chatmem::{ChatMemory, InMemoryStore, Recall, Retention, Store, WindowPolicy};
use chatmem_server::{Auth, Limits, ServerConfig, app};
use chatmem_test::app::{App, json_request};
use chatmem_test::failing::FailingStore;
use chatmem_test::upstream::{MockUpstream, text};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::clearing::door_config;
use super::inspector::seed_messages;

const ORDER: &str = "我的订单是 LC202610060018，还没发货。";
const QUESTION: &str = "LC202610060018 能退吗？";

/// The order number said, then two turns about something else.
fn order_turns() -> Value {
    json!({"messages": [
        {"role": "user", "content": ORDER},
        {"role": "assistant", "content": "已为您催促发货。"},
        {"role": "user", "content": "谢谢"},
        {"role": "assistant", "content": "不客气"},
    ]})
}

/// A memory over `store` with a window of `max_messages` and `recall`.
fn recalling(store: Arc<dyn Store>, max_messages: usize, recall: Option<Recall>) -> ChatMemory<Arc<dyn Store>> {
    let builder = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(max_messages))
        .retention(Retention::KeepHistory);
    match recall {
        Some(recall) => builder.recall(recall),
        None => builder,
    }
    .build()
    .expect("valid memory settings")
}

/// A server over an in-memory store with a window of 2 messages, recalling up to 3.
fn server(config: ServerConfig) -> App {
    let recall = Recall::new(3).expect("k 3");
    App::new(app(recalling(Arc::new(InMemoryStore::new()), 2, Some(recall)), config))
}

fn q(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

async fn seed(server: &App, id: &str, body: &Value) {
    let r = server
        .post_json(&format!("/v1/conversations/{id}/messages"), body)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// A chat completion through the door on conversation `id`.
async fn door(server: &App, upstream: &MockUpstream, id: &str, content: &str) -> Value {
    upstream.push([text("未发货的订单可以退。")]);
    let mut call = json_request(
        Method::POST,
        "/v1/chat/completions",
        &json!({"model": "mock-model", "messages": [{"role": "user", "content": content}]}),
    );
    call.headers_mut()
        .insert("x-chatmem-conversation", HeaderValue::from_str(id).expect("a header"));
    let r = server.send(call).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    upstream.last_request()
}

/// A counter's value in `/metrics`'s OpenMetrics text.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// The recalled order message: the heading, then `[#1 user, <time>] ` and the order text.
fn assert_recalls_the_order(message: &Value) {
    assert_eq!(message["role"], "user", "{message}");
    let content = message["content"].as_str().expect("text");
    let (heading, line) = content.split_once('\n').expect("a heading and a line");
    assert_eq!(heading, RECALL_HEADING);
    assert!(line.starts_with("[#1 user, 20"), "{line}");
    assert!(line.ends_with(&format!("] {ORDER}")), "{line}");
}

/// The route: every hit with its seq, role, text, message, score, relevance, rank, time and
/// outcome, best first; the message recall would send and its tokens; `k` by default the
/// server's.
#[tokio::test]
async fn the_route_says_what_recall_finds_and_why() {
    let server = server(ServerConfig::default());
    seed(&server, "aftersale", &order_turns()).await;
    let r = server
        .get(&format!("/v1/conversations/aftersale/recall?q={}", q(QUESTION)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    assert_eq!(body["conversation"], "aftersale");
    assert_eq!(body["enabled"], true);
    assert_eq!(body["k"], 3, "the server's k");
    let hits = body["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{body}");
    let hit = &hits[0];
    assert_eq!(hit["seq"], 1);
    assert_eq!(hit["role"], "user");
    assert_eq!(hit["content"], ORDER);
    assert_eq!(hit["message"], json!({"role": "user", "content": ORDER}));
    assert_eq!(hit["lexical_rank"], 1);
    assert_eq!(hit["outcome"], "injected");
    assert!(hit["score"].as_f64().is_some_and(|s| s > 0.0), "{hit}");
    assert!(hit["relevance"].as_f64().is_some_and(|r| r > 0.1 && r <= 1.0), "{hit}");
    let at = hit["at"].as_str().expect("a time");
    assert!(humantime::parse_rfc3339(at).is_ok(), "{at}");
    assert_recalls_the_order(&body["injected"]);
    assert!(body["injected_tokens"].as_u64().is_some_and(|t| t > 10), "{body}");

    // What is still in the window is not recalled; words no message holds find nothing.
    for asked in ["不客气", "refund"] {
        let r = server
            .get(&format!("/v1/conversations/aftersale/recall?q={}", q(asked)))
            .await
            .json();
        assert_eq!(r["hits"], json!([]), "{asked}: {r}");
        assert_eq!(r["injected"], Value::Null);
        assert_eq!(r["injected_tokens"], 0);
    }
    // Nothing to search for (no word in it) is no error.
    let r = server.get("/v1/conversations/aftersale/recall?q=%3F%21").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["hits"], json!([]));
}

/// The route's and the dry run's answers, with hits and without, validate against the schemas
/// `/openapi.json` declares for them (as schemathesis checks); the check can fail.
#[tokio::test]
async fn the_answers_validate_against_the_document() {
    let server = server(ServerConfig::default());
    seed(&server, "c1", &json!({"messages": seed_messages()})).await;
    seed(&server, "c1", &order_turns()).await;
    let doc = server.get("/openapi.json").await.json();
    let schema = |path: &str, method: &str| {
        let mut root = doc.clone();
        root["allOf"] =
            json!([doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]]);
        jsonschema::validator_for(&root).expect("the document is a valid schema")
    };
    let recall = schema("/v1/conversations/{id}/recall", "get");
    let prompt = schema("/v1/conversations/{id}/prompt", "post");
    for asked in [QUESTION, "zzzz", "order_status"] {
        let body = server
            .get(&format!("/v1/conversations/c1/recall?q={}&k=2", q(asked)))
            .await
            .json();
        let errors: Vec<String> = recall
            .iter_errors(&body)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{asked}: {errors:#?}\n{body}");
        let dry = server
            .post_json(
                "/v1/conversations/c1/prompt",
                &json!({"messages": [{"role": "user", "content": asked}]}),
            )
            .await
            .json();
        let errors: Vec<String> = prompt
            .iter_errors(&dry)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{asked}: {errors:#?}\n{dry}");
    }
    let mut body = server
        .get(&format!("/v1/conversations/c1/recall?q={}", q(QUESTION)))
        .await
        .json();
    body["hits"][0]["outcome"] = json!("forgotten");
    assert!(!recall.is_valid(&body));
}

/// The outcomes: recalled, cut by `k`, by the relevance floor, by the token budget.
#[tokio::test]
async fn each_hit_says_why_it_was_or_was_not_recalled() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let recall = Recall::new(3).expect("k 3").min_relevance(0.12).expect("a floor");
    let server = App::new(app(
        recalling(Arc::clone(&store), 2, Some(recall)),
        ServerConfig::default(),
    ));
    seed(&server, "c1", &json!({"messages": seed_messages()})).await;
    seed(&server, "c1", &order_turns()).await;
    let url = format!("/v1/conversations/c1/recall?q={}", q(QUESTION));
    let body = server.get(&url).await.json();
    let hits = body["hits"].as_array().expect("hits");
    assert!(hits.len() >= 4, "{body}");
    let ranks: Vec<u64> = hits
        .iter()
        .map(|h| h["lexical_rank"].as_u64().expect("a rank"))
        .collect();
    assert_eq!(ranks, (1..=hits.len() as u64).collect::<Vec<_>>(), "best first");
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().expect("a score")).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    let outcomes = |body: &Value| -> Vec<String> {
        body["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| h["outcome"].as_str().expect("an outcome").to_owned())
            .collect()
    };
    let seen = outcomes(&body);
    assert_eq!(seen.iter().filter(|o| *o == "injected").count(), 3, "k is 3: {seen:?}");
    assert!(seen.iter().any(|o| o == "past_k"), "{seen:?}");
    for h in hits {
        let relevant = h["relevance"].as_f64().expect("relevance") >= 0.12;
        assert_eq!(h["outcome"] == "below_threshold", !relevant, "{h}");
    }
    assert!(seen.iter().any(|o| o == "below_threshold"), "{seen:?}");
    // One at most: the others relevant enough are past k.
    let one = server.get(&format!("{url}&k=1")).await.json();
    assert_eq!(one["k"], 1);
    let seen = outcomes(&one);
    assert_eq!(seen.iter().filter(|o| *o == "injected").count(), 1, "{seen:?}");
    assert!(seen.iter().any(|o| o == "past_k"), "{seen:?}");

    // A budget too small for any line: over it.
    let tight = Recall::new(3).expect("k 3").max_tokens(20);
    let server = App::new(app(recalling(store, 2, Some(tight)), ServerConfig::default()));
    let body = server.get(&url).await.json();
    let seen = outcomes(&body);
    assert!(
        seen.iter().all(|o| o == "over_budget" || o == "below_threshold"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|o| o == "over_budget"), "{seen:?}");
    assert_eq!(body["injected"], Value::Null);
}

/// Bad input in the one error shape, naming the parameter; an unknown conversation is 404.
#[tokio::test]
async fn bad_input_is_refused_naming_the_parameter() {
    let server = server(ServerConfig::default());
    seed(&server, "c1", &order_turns()).await;
    let base = "/v1/conversations/c1/recall";
    for (query, status, param) in [
        ("", StatusCode::BAD_REQUEST, "q"),
        ("?k=3", StatusCode::BAD_REQUEST, "q"),
        ("?q=", StatusCode::BAD_REQUEST, "q"),
        ("?q=order&k=0", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=101", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=-1", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=abc", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=%2B5", StatusCode::BAD_REQUEST, "k"),
        ("?q=order&k=99999999999999999999999", StatusCode::BAD_REQUEST, "k"),
    ] {
        let r = server.get(&format!("{base}{query}")).await;
        assert_eq!(r.status, status, "{query}: {}", r.text());
        assert_eq!(r.error_code(), "invalid_request", "{query}");
        assert_eq!(r.json()["error"]["param"], param, "{query}: {}", r.text());
    }
    let r = server.get(&format!("{base}?q=order&colour=red")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("colour"), "{}", r.text());
    for k in [1, 100] {
        let r = server.get(&format!("{base}?q=order&k={k}")).await;
        assert_eq!(r.status, StatusCode::OK, "k={k}: {}", r.text());
        assert_eq!(r.json()["k"], k);
    }
    let r = server.get("/v1/conversations/nobody/recall?q=order").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "not_found");
    let r = server
        .get(&format!("/v1/conversations/{}/recall?q=order", "i".repeat(300)))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    // A `/` in an id is sent as %2F, as on every route.
    seed(&server, "a%2Fb", &order_turns()).await;
    let r = server
        .get(&format!("/v1/conversations/a%2Fb/recall?q={}", q(QUESTION)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["conversation"], "a/b");
    assert_eq!(r.json()["hits"][0]["seq"], 1);
    // Another method: 405.
    let r = server.post_json(&format!("{base}?q=order"), &json!({})).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);

    // A question over the body limit is 413 (the URI limit, 414, is met first by default).
    let r = server.get(&format!("{base}?q={}", "a".repeat(9 << 10))).await;
    assert_eq!(r.status, StatusCode::URI_TOO_LONG, "{}", r.text());
    let config = ServerConfig {
        limits: Limits {
            max_body_bytes: 1 << 10,
            max_uri_bytes: 64 << 10,
            ..Limits::default()
        },
        ..ServerConfig::default()
    };
    let small = self::server(config);
    seed(&small, "c1", &order_turns()).await;
    let r = small.get(&format!("{base}?q={}", "a".repeat(1 << 10))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let r = small.get(&format!("{base}?q={}", "a".repeat((1 << 10) + 1))).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!(r.error_code(), "too_large");
    assert_eq!(r.json()["error"]["param"], "q");
}

/// Two tenants with the same conversation id: each recalls only its own messages; a read-only
/// token may ask; no token is 401.
#[tokio::test]
async fn recall_never_returns_another_tenants_messages() {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\n\
         [[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\n\n\
         [[token]]\ntoken = \"reader-of-team-b-00\"\ntenant = \"team-b\"\nwrite = false\n",
    )
    .expect("auth");
    let server = server(ServerConfig {
        auth: Some(auth),
        ..ServerConfig::default()
    });
    let a = server.as_bearer("token-of-team-a-000");
    let b = server.as_bearer("token-of-team-b-000");
    let reader = server.as_bearer("reader-of-team-b-00");
    seed(&a, "aftersale", &order_turns()).await;
    let other = json!({"messages": [
        {"role": "user", "content": "我的订单是 LC202699990000，能改地址吗？"},
        {"role": "assistant", "content": "可以。"},
        {"role": "user", "content": "谢谢"},
        {"role": "assistant", "content": "不客气"},
    ]});
    seed(&b, "aftersale", &other).await;

    let url = format!(
        "/v1/conversations/aftersale/recall?q={}",
        q("LC202610060018 LC202699990000 订单")
    );
    let mine = a.get(&url).await.json();
    let theirs = b.get(&url).await.json();
    let texts = |body: &Value| -> Vec<String> {
        body["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| h["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(texts(&mine), [ORDER], "{mine}");
    assert_eq!(texts(&theirs), ["我的订单是 LC202699990000，能改地址吗？"], "{theirs}");
    assert!(!theirs.to_string().contains("LC202610060018 "), "{theirs}");
    assert_eq!(reader.get(&url).await.json(), theirs);
    // A conversation only the other tenant has is no conversation.
    seed(&a, "only-a", &order_turns()).await;
    let r = b
        .get(&format!("/v1/conversations/only-a/recall?q={}", q(QUESTION)))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = server.get(&url).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.error_code(), "unauthorized");
}

/// A server that does not recall answers all the same: `enabled` false, and nothing found (its
/// commits indexed nothing); its dry run and door add nothing.
#[tokio::test]
async fn a_server_without_recall_finds_nothing_and_says_so() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let server = App::new(app(
        recalling(Arc::new(InMemoryStore::new()), 2, None),
        door_config(&upstream),
    ));
    seed(&server, "c1", &order_turns()).await;
    let body = server
        .get(&format!("/v1/conversations/c1/recall?q={}", q(QUESTION)))
        .await
        .json();
    assert_eq!(body["enabled"], false);
    assert_eq!(body["k"], 5, "the default k");
    assert_eq!(body["hits"], json!([]));
    let ask = json!({"messages": [{"role": "user", "content": QUESTION}]});
    let dry = server.post_json("/v1/conversations/c1/prompt", &ask).await.json();
    assert_eq!(dry["recalled"], json!({"seqs": [], "tokens": 0}));
    let sent = door(&server, &upstream, "c1", QUESTION).await;
    assert_eq!(sent["messages"], dry["messages"]);
    assert!(!sent.to_string().contains(RECALL_HEADING));
}

/// Over a store that does not search, the route answers nothing found, and 404 for a
/// conversation that does not exist; the store is never asked to search.
#[tokio::test]
async fn a_store_that_does_not_search_finds_nothing() {
    let store = FailingStore::blind();
    let server = App::new(app(recalling(Arc::new(store), 2, None), ServerConfig::default()));
    seed(&server, "c1", &order_turns()).await;
    let r = server
        .get(&format!("/v1/conversations/c1/recall?q={}", q(QUESTION)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["hits"], json!([]));
    let r = server.get("/v1/conversations/nobody/recall?q=order").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let html = server.get(&format!("/ui/conversations/c1?q={}", q(QUESTION))).await;
    assert_eq!(html.status, StatusCode::OK, "{}", html.text());
    assert!(html.text().contains("0 found"));
}

/// The dry run recalls as the door does: the order message just before the question, its seq
/// and tokens in `recalled`, and its `messages` exactly what the door then sends; the door's
/// turn stores the question and the answer, never the recalled message; `/metrics` counts the
/// search, the message recalled and its tokens.
#[tokio::test]
async fn the_door_and_the_dry_run_send_the_recalled_order_just_before_the_question() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let config = door_config(&upstream);
    let metrics = config.metrics.clone();
    let server = server(config);
    seed(&server, "aftersale", &order_turns()).await;
    let before = server.get("/v1/conversations/aftersale/history").await.json();

    let ask = json!({"messages": [{"role": "user", "content": QUESTION}]});
    let dry = server.post_json("/v1/conversations/aftersale/prompt", &ask).await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.text());
    let dry = dry.json();
    assert_eq!(dry["recalled"]["seqs"], json!([1]), "{dry}");
    let recalled_tokens = dry["recalled"]["tokens"].as_u64().expect("tokens");
    assert!(recalled_tokens > 10, "{dry}");
    let messages = dry["messages"].as_array().expect("messages");
    let n = messages.len();
    assert_eq!(messages[n - 1], json!({"role": "user", "content": QUESTION}));
    assert_recalls_the_order(&messages[n - 2]);
    // The order message itself left the window: only recall brings it back.
    assert!(
        messages[..n - 2]
            .iter()
            .all(|m| !m.to_string().contains("LC202610060018")),
        "{dry}"
    );
    // The dry run commits nothing, and counts nothing sent upstream.
    assert_eq!(server.get("/v1/conversations/aftersale/history").await.json(), before);
    assert_eq!(counter(&metrics.render(), "chatmem_recalls_total"), 0);

    let sent = door(&server, &upstream, "aftersale", QUESTION).await;
    assert_eq!(sent["messages"], dry["messages"], "the dry run is what the door sends");

    // Memory holds the question and the answer, nothing recalled.
    let history = server.get("/v1/conversations/aftersale/history").await.json();
    let stored = history["messages"].as_array().expect("messages");
    assert_eq!(stored.len(), 6, "{history}");
    assert_eq!(stored[4], json!({"role": "user", "content": QUESTION}));
    assert_eq!(stored[5]["role"], "assistant");
    assert!(!history.to_string().contains(RECALL_HEADING), "{history}");

    let text = metrics.render();
    assert_eq!(counter(&text, "chatmem_recalls_total"), 1);
    assert_eq!(counter(&text, "chatmem_recall_hits_injected_total"), 1);
    assert_eq!(counter(&text, "chatmem_recall_tokens_added_total"), recalled_tokens);

    // A question with no word to search for: no search, nothing added.
    let sent = door(&server, &upstream, "aftersale", "？").await;
    assert!(!sent.to_string().contains(RECALL_HEADING), "{sent}");
    // One that finds nothing: a search, nothing added.
    let sent = door(&server, &upstream, "aftersale", "天气怎么样").await;
    assert!(!sent.to_string().contains(RECALL_HEADING), "{sent}");
    let text = metrics.render();
    assert_eq!(counter(&text, "chatmem_recalls_total"), 2);
    assert_eq!(counter(&text, "chatmem_recall_hits_injected_total"), 1);
    assert_eq!(counter(&text, "chatmem_recall_tokens_added_total"), recalled_tokens);
}

/// A streamed door call recalls as a whole one does.
#[tokio::test]
async fn a_streamed_door_call_recalls_too() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let server = server(door_config(&upstream));
    seed(&server, "aftersale", &order_turns()).await;
    upstream.push([text("可以退。")]);
    let mut call = json_request(
        Method::POST,
        "/v1/chat/completions",
        &json!({"model": "mock-model", "stream": true, "messages": [{"role": "user", "content": QUESTION}]}),
    );
    call.headers_mut()
        .insert("x-chatmem-conversation", HeaderValue::from_static("aftersale"));
    let r = server.send(call).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let messages = upstream.last_request()["messages"].clone();
    let messages = messages.as_array().expect("messages");
    assert_recalls_the_order(&messages[messages.len() - 2]);
}

/// The store's search is bounded by the store timeout like every store call, and counted: a
/// search that does not answer in time is 503 on the route, the dry run and the door (which
/// sends nothing upstream), counted as `op="search"`.
#[tokio::test]
async fn a_slow_search_is_cut_by_the_store_timeout_and_counted() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let mut config = door_config(&upstream);
    config.limits.store_timeout = Duration::from_millis(100);
    let metrics = config.metrics.clone();
    let store = FailingStore::new();
    store.set_search_delay(Duration::from_secs(5));
    let memory = recalling(Arc::new(store), 2, Some(Recall::new(3).expect("k 3")));
    let server = App::new(app(memory, config));
    seed(&server, "c1", &order_turns()).await;

    let started = std::time::Instant::now();
    let r = server
        .get(&format!("/v1/conversations/c1/recall?q={}", q(QUESTION)))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    assert_eq!(r.error_code(), "store_unavailable");
    let ask = json!({"messages": [{"role": "user", "content": QUESTION}]});
    let r = server.post_json("/v1/conversations/c1/prompt", &ask).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    let mut call = json_request(
        Method::POST,
        "/v1/chat/completions",
        &json!({"model": "mock-model", "messages": [{"role": "user", "content": QUESTION}]}),
    );
    call.headers_mut()
        .insert("x-chatmem-conversation", HeaderValue::from_static("c1"));
    let r = server.send(call).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert!(upstream.requests().is_empty(), "nothing was sent upstream");
    let text = metrics.render();
    assert!(
        text.contains(r#"chatmem_store_errors_total{op="search",kind="timeout"} 3"#),
        "{text}"
    );
    assert_eq!(counter(&text, "chatmem_recalls_total"), 0);
}

/// The inspector's recall panel: the form, and for a question each hit with its seq, role,
/// text, rank, score, relevance and outcome in words, and the message recall would send;
/// message text escaped; a tenant sees only its own.
#[tokio::test]
async fn the_inspector_shows_what_recall_would_inject_and_why() {
    let server = server(ServerConfig::default());
    seed(&server, "aftersale", &json!({"messages": seed_messages()})).await;
    let page = server.get("/ui/conversations/aftersale").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    assert!(
        html.contains("<form class=\"filter\" method=\"get\" action=\"/ui/conversations/aftersale\""),
        "{html}"
    );
    assert!(html.contains("name=\"q\""));
    assert!(!html.contains("<table class=\"recall\">"), "no question, no table");

    let page = server
        .get(&format!("/ui/conversations/aftersale?q={}", q(QUESTION)))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    let html = page.text();
    let api = server
        .get(&format!("/v1/conversations/aftersale/recall?q={}", q(QUESTION)))
        .await
        .json();
    let table = &html[html.find("<table class=\"recall\">").expect("the hits")..];
    let table = &table[..table.find("</table>").expect("its end")];
    let hits = api["hits"].as_array().expect("hits");
    assert!(hits.len() >= 3, "{api}");
    assert_eq!(table.matches("<tr class=\"hit ").count(), hits.len(), "{table}");
    for hit in hits {
        let outcome = hit["outcome"].as_str().expect("an outcome");
        let seq = hit["seq"].as_u64().expect("a seq");
        assert!(
            table.contains(&format!(
                "<tr class=\"hit {outcome}\"><td class=\"num\" data-label=\"#\"><a href=\"#m{seq}\">#{seq}</a>"
            )),
            "{seq} {outcome}: {table}"
        );
    }
    assert!(
        table.contains("<code>injected</code> sent just before the question"),
        "{table}"
    );
    assert!(table.contains("past_k") || table.contains("below_threshold"), "{table}");
    assert!(
        html.contains(&format!("value=\"{QUESTION}\"")),
        "the question stays in the form"
    );
    let shown = &html[html.find("<details class=\"recalled\" open>").expect("what is sent")..];
    assert!(shown.contains(RECALL_HEADING), "{shown}");
    let tokens = api["injected_tokens"].as_u64().expect("tokens");
    assert!(shown.contains(&format!("({tokens} tokens)")), "{shown}");

    // Hostile text is text in the panel too.
    let hostile = "LC202610060018 <script>alert(1)</script>";
    seed(
        &server,
        "hostile",
        &json!({"messages": [
            {"role": "user", "content": hostile},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"},
            {"role": "assistant", "content": "ok"},
        ]}),
    )
    .await;
    let html = server
        .get(&format!("/ui/conversations/hostile?q={}", q("LC202610060018 <script>")))
        .await
        .text();
    assert!(html.contains("<table class=\"recall\">"), "{html}");
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    // Nothing found says so.
    let html = server.get("/ui/conversations/aftersale?q=zzzz").await.text();
    assert!(html.contains("0 found · 0 recalled"), "{html}");
    assert!(html.contains("Nothing would be recalled"), "{html}");
}

/// On the inspector too, a tenant's question finds only its own messages.
#[tokio::test]
async fn the_inspectors_recall_keeps_tenants_apart() {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\n\
         [[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\n",
    )
    .expect("auth");
    let server = server(ServerConfig {
        auth: Some(auth),
        ..ServerConfig::default()
    });
    let a = server.as_bearer("token-of-team-a-000");
    let b = server.as_bearer("token-of-team-b-000");
    seed(&a, "aftersale", &order_turns()).await;
    seed(
        &b,
        "aftersale",
        &json!({"messages": [
            {"role": "user", "content": "我的订单是 LC202699990000"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"},
            {"role": "assistant", "content": "ok"},
        ]}),
    )
    .await;
    let url = format!("/ui/conversations/aftersale?q={}", q("LC202610060018 订单"));
    let theirs = b.get(&url).await.text();
    assert!(theirs.contains("1 found"), "{theirs}");
    assert!(!theirs.contains("LC202610060018，"), "{theirs}");
    let mine = a.get(&url).await.text();
    assert!(mine.contains("LC202610060018，"), "{mine}");
    let r = server.get(&url).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}
