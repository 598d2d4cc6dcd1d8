//! `GET /metrics` and `GET /openapi.json`, driven in process (`chatmem_test::app`): requests, commits, version conflicts
//! and store errors show up in the counters of their own server; `/metrics` answers the
//! Prometheus text or OpenMetrics as the `Accept` header asks, each read back by the parsers of
//! the Python `prometheus_client`; the OpenAPI document lists every route the router serves,
//! documents the error body `ApiError` really writes, validates the memory API's real answers
//! (every content shape) and passes `openapi-spec-validator`.
//!
//! The tests with Python checks need `CHATMEM_TEST_PYTHON` (the venv of `examples/python/setup.sh`,
//! which CI sets) and are ignored without `--include-ignored`.

use crate::http::server;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chatmem::InMemoryStore;
use chatmem_server::{Auth, ServerConfig, metrics_app};
use chatmem_test::app::App;
use serde_json::{Value, json};

fn batch() -> Value {
    json!({"messages": [{"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
                        {"role": "assistant", "content": "收到。"}]})
}

/// What Prometheus 2.x sends when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

/// `GET /metrics` with the `Accept` header `accept`, if any.
async fn metrics(server: &App, accept: Option<&str>) -> chatmem_test::app::Answer {
    let mut request = Request::get("/metrics");
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    server.send(request.body(Body::empty()).expect("a request")).await
}

/// `/metrics` as OpenMetrics (asked for as Prometheus asks).
async fn metrics_text(server: &App) -> String {
    let r = metrics(server, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(r.status, StatusCode::OK);
    let kind = r.header("content-type").unwrap_or_default();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    r.text()
}

/// The Python of `CHATMEM_TEST_PYTHON` (a venv with `examples/python/requirements.txt`).
fn python() -> String {
    chatmem_test::required_env("CHATMEM_TEST_PYTHON", "run examples/python/setup.sh, which prints it,")
}

/// Runs `python -c script args...`; its stdout, or a panic with its stderr.
fn run_python(python: &str, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{python} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Parses `text` with `prometheus_client`'s parser for `format` (`text`: the 0.0.4 text
/// format, the one older scrapers and most tools read; `openmetrics`: the strict OpenMetrics
/// parser): each family's name to its type and samples (`name{labels}` to value).
fn parse_with_python(python: &str, format: &str, text: &str) -> Value {
    const SCRIPT: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families as text
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
parse = {"text": text, "openmetrics": openmetrics}[sys.argv[1]]
families = {}
for f in parse(open(sys.argv[2], encoding="utf-8").read()):
    samples = {s.name + json.dumps(s.labels, sort_keys=True): s.value for s in f.samples}
    families[f.name] = {"type": f.type, "samples": samples}
print(json.dumps(families))
"#;
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("metrics.txt");
    std::fs::write(&file, text).expect("written");
    let out = run_python(python, SCRIPT, &[format.as_ref(), file.as_os_str()]);
    serde_json::from_str(&out).expect("the script prints JSON")
}

/// The value of the sample `series` (name and labels exactly as printed), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn requests_commits_conflicts_and_store_errors_are_counted() {
    let store = Arc::new(chatmem_test::FailingStore::new());
    store.lose_commits(2);
    let server = server(store.clone(), ServerConfig::default());
    let url = "/v1/conversations/secret-user-id-42/messages";

    let r = server.post_json(url, &batch()).await;
    assert_eq!(r.status, StatusCode::OK, "the commit is retried past two conflicts");
    assert_eq!(server.get(url).await.status, StatusCode::OK);
    store.set_down(true);
    let r = server.get(url).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    store.set_down(false);
    assert_eq!(server.get("/no/such/route").await.status, StatusCode::NOT_FOUND);

    let text = metrics_text(&server).await;
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
    let other = crate::http::server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let text = metrics_text(&other).await;
    assert_eq!(sample(&text, "chatmem_commits_total"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "chatmem_version_conflicts_total"), Some(0.0), "{text}");
}

/// A write answered with an error is counted by route and code: a framework that swallows
/// its history's errors still leaves the lost turn visible here.
#[tokio::test]
async fn refused_writes_are_counted_by_route_and_code() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let url = "/v1/conversations/c1/messages";
    let big = "x".repeat(300 << 10);
    let r = server
        .post_json(url, &json!({"messages": [{"role": "user", "content": big}]}))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.json());
    let r = server
        .post_json(url, &json!({"messages": [{"role": "user", "content": 42}]}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = server
        .post_json(url, &json!({"messages": [{"role": "user", "content": "kept"}]}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.json());
    let r = server
        .post_json("/v1/chat/completions", &json!({"model": "m", "messages": []}))
        .await;
    assert!(
        r.status.is_client_error() || r.status.is_server_error(),
        "{:?}",
        r.status
    );
    let door_code = r.json()["error"]["code"].as_str().map(str::to_owned);
    assert_eq!(
        server.get("/v1/conversations/nope/messages").await.status,
        StatusCode::NOT_FOUND
    );

    let text = metrics_text(&server).await;
    let refused = |route: &str, code: &str| {
        sample(
            &text,
            &format!(r#"chatmem_writes_refused_total{{route="{route}",code="{code}"}}"#),
        )
    };
    let messages = "/v1/conversations/{id}/messages";
    assert_eq!(refused(messages, "too_large"), Some(1.0), "{text}");
    assert_eq!(refused(messages, "invalid_request"), Some(1.0), "{text}");
    assert_eq!(refused(messages, "not_found"), None, "a read is no write:\n{text}");
    let code = door_code.expect("the door answers in the one error shape");
    assert_eq!(refused("/v1/chat/completions", &code), Some(1.0), "{text}");
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
    let scrape = App::new(metrics_app(config.metrics.clone()));
    let server = server(Arc::new(InMemoryStore::new()), config);
    assert_eq!(server.get("/metrics").await.status, StatusCode::UNAUTHORIZED);
    let r = server.as_bearer("token-of-team-a-000").get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    let text = metrics_text(&scrape).await;
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
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
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
        ("POST", "/v1/conversations/{id}/prompt"),
        ("GET", "/v1/conversations/{id}/recall"),
        ("DELETE", "/v1/conversations/{id}"),
        ("GET", "/v1/users/{user}/facts"),
        ("POST", "/v1/users/{user}/facts"),
        ("DELETE", "/v1/users/{user}/facts"),
        ("PATCH", "/v1/users/{user}/facts/{fact}"),
        ("DELETE", "/v1/users/{user}/facts/{fact}"),
        ("GET", "/v1/users/{user}/facts/{fact}/history"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_owned(), p.to_owned()))
    .collect();
    assert_eq!(operations, expected);
    for (method, path) in &operations {
        let uri = path
            .replace("{id}", "a%2Fb")
            .replace("{user}", "a%2Fb")
            .replace("{fact}", "1");
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let r = server.send_json(method.clone(), &uri, &batch()).await;
        assert_ne!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        let body = r.text();
        assert!(
            !body.contains("no such route"),
            "{method} {path} reached no handler: {body}"
        );
    }

    // The documented error body is exactly the one a refused request carries.
    let schemas = &doc["components"]["schemas"];
    let real = server.get("/v1/conversations/unknown/messages").await.json();
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
    let responses = &doc["paths"]["/v1/conversations/{id}/messages"]["get"]["responses"];
    for status in ["400", "404"] {
        let schema = &responses[status]["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(schema, "#/components/schemas/Error", "{status}: {}", responses[status]);
    }
    // This server has no `--auth`: no token is asked for, and none is refused.
    assert!(responses["401"].is_null() && doc["security"].is_null(), "{responses}");

    // Every field a stored message comes back with is documented on Message.
    let url = "/v1/conversations/fields/messages";
    let full = json!({"messages": [
        {"role": "user", "content": "查一下订单", "name": "alice"},
        {"role": "assistant", "content": null, "reasoning_content": "先查", "metadata": {"k": "v"},
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "查询失败", "is_error": true},
    ]});
    let window = server.post_json(url, &full).await.json();
    assert_eq!(keys(&resolve(&doc, &schemas["Window"])["properties"]), keys(&window));
    // A message is one schema per role: its fields are theirs.
    let roles = resolve(&doc, &schemas["Message"])["oneOf"].clone();
    let roles = roles.as_array().expect("one schema per role");
    assert_eq!(roles.len(), 5, "{roles:?}");
    let documented: BTreeSet<String> = roles
        .iter()
        .flat_map(|r| keys(&resolve(&doc, r)["properties"]))
        .collect();
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

/// The answers of the memory API, for a conversation holding every content shape, validate
/// against the schemas `/openapi.json` declares for them (what a client generated from the
/// document, or schemathesis, checks).
#[tokio::test]
async fn real_answers_validate_against_the_documented_schemas() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let doc = server.get("/openapi.json").await.json();
    let text = |t: &str| json!({"type": "text", "text": t});
    let every_shape = json!({"messages": [
        {"role": "system", "content": [text("你是邻里仓售后。"), text("Answer briefly.")]},
        {"role": "user", "content": [text("这个包裹怎么了？"),
            {"type": "image_url", "image_url": {"url": "https://example.com/p.jpg", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}], "name": "alice"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't see images."}]},
        {"role": "user", "content": "我的订单是 LC202610060018，还没发货。", "metadata": {"channel": "app"}},
        {"role": "assistant", "content": null, "reasoning_content": "先查",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [text("查询失败")], "is_error": true},
        {"role": "assistant", "content": [text("稍后再查。")]},
    ]});
    let url = "/v1/conversations/shapes/messages";
    let posted = server.post_json(url, &every_shape).await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.text());
    let answers = [
        ("/v1/conversations/{id}/messages", "post", posted.json()),
        ("/v1/conversations/{id}/messages", "get", server.get(url).await.json()),
        (
            "/v1/conversations/{id}/history",
            "get",
            server.get("/v1/conversations/shapes/history").await.json(),
        ),
        ("/v1/conversations", "get", server.get("/v1/conversations").await.json()),
    ];
    for (path, method, body) in answers {
        let schema = &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{method} {path} documents no 200 body");
        // The whole document is the root, so the schema's `$ref`s resolve within it.
        let mut root = doc.clone();
        root["allOf"] = json!([schema]);
        let validator = jsonschema::validator_for(&root).expect("the document is a valid schema");
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{method} {path}: {errors:#?}\n{body}");
    }
    // The check can fail: text content typed as an object is refused.
    let mut wrong = doc.clone();
    wrong["components"]["schemas"]["TextContent"] = json!({"type": "object"});
    wrong["allOf"] = json!([
        doc["paths"]["/v1/conversations/{id}/messages"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    ]);
    let validator = jsonschema::validator_for(&wrong).expect("a valid schema");
    assert!(!validator.is_valid(&server.get(url).await.json()));
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

/// `/metrics` answers the Prometheus text format 0.0.4 unless the `Accept`
/// header prefers OpenMetrics (as Prometheus's own does), and each answer is what its format's
/// parser reads: fed the OpenMetrics text, a 0.0.4 parser (the Python client's, like
/// Prometheus's Go parser) finds every counter empty and an `unknown` `_total` beside it.
#[tokio::test]
#[ignore = "needs CHATMEM_TEST_PYTHON"]
async fn metrics_answer_the_format_the_accept_header_asks_for() {
    let config = ServerConfig::default();
    let scrape = App::new(metrics_app(config.metrics.clone()));
    let server = server(Arc::new(InMemoryStore::new()), config);
    let r = server.post_json("/v1/conversations/c1/messages", &batch()).await;
    assert_eq!(r.status, StatusCode::OK);

    for listener in [&server, &scrape] {
        let mut answers = Vec::new();
        for (accept, content_type) in [
            (None, "text/plain; version=0.0.4; charset=utf-8"),
            (
                Some("text/plain;version=0.0.4"),
                "text/plain; version=0.0.4; charset=utf-8",
            ),
            (Some("*/*"), "text/plain; version=0.0.4; charset=utf-8"),
            (
                Some(PROMETHEUS_ACCEPT),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
        ] {
            let r = metrics(listener, accept).await;
            assert_eq!(r.status, StatusCode::OK);
            assert_eq!(r.header("content-type"), Some(content_type), "{accept:?}");
            assert_eq!(r.header("vary"), Some("accept"), "{accept:?}");
            answers.push((content_type, r.text()));
        }
        for (content_type, text) in &answers {
            if content_type.starts_with("text/plain") {
                assert!(text.contains("# TYPE chatmem_commits_total counter\n"), "{text}");
                assert!(text.contains("\nchatmem_commits_total 1\n"), "{text}");
                assert!(!text.contains("# EOF"), "{text}");
            } else {
                assert!(text.contains("# TYPE chatmem_commits counter\n"), "{text}");
                assert!(text.ends_with("# EOF\n"), "{text}");
            }
        }
        let python = python();
        let (_, text) = &answers[0];
        let (_, openmetrics) = &answers[3];
        for (format, text) in [("text", text), ("openmetrics", openmetrics)] {
            let families = parse_with_python(&python, format, text);
            let commits = &families["chatmem_commits"];
            assert_eq!(commits["type"], "counter", "{format}: {families}");
            assert_eq!(
                commits["samples"]["chatmem_commits_total{}"], 1.0,
                "{format}: {families}"
            );
            let latency = &families["chatmem_http_request_duration_seconds"];
            assert_eq!(latency["type"], "histogram", "{format}: {families}");
            let requests = &families["chatmem_http_requests"];
            assert_eq!(requests["type"], "counter", "{format}: {families}");
            let post = r#"chatmem_http_requests_total{"method": "POST", "route": "/v1/conversations/{id}/messages", "status": "200"}"#;
            assert_eq!(requests["samples"][post], 1.0, "{format}: {families}");
            for (name, family) in families.as_object().expect("families") {
                assert_ne!(family["type"], "unknown", "{format}: {name} has no type");
            }
        }
    }
}

/// `/openapi.json` is a valid OpenAPI document by `openapi-spec-validator`
/// (with the Python of `CHATMEM_TEST_PYTHON`, as in CI), and every response is described.
#[tokio::test]
#[ignore = "needs CHATMEM_TEST_PYTHON"]
async fn the_openapi_document_passes_openapi_spec_validator() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let text = server.get("/openapi.json").await.text();
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            for (status, response) in operation["responses"].as_object().expect("responses") {
                assert!(
                    response["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{method} {path} {status} has no description"
                );
            }
        }
    }
    let python = python();
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &text).expect("written");
    let out = std::process::Command::new(&python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output()
        .expect("running openapi_spec_validator");
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
