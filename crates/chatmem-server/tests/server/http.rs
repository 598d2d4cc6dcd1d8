//! The server over real HTTP on loopback, driven by reqwest, on every store: the memory API,
//! the one error shape, limits, odd ids (every id that can be written can be read, listed and
//! deleted), and tenant isolation.

use crate::requests::{get_json, post_json};

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{Auth, DEFAULT_MAX_ID_BYTES, Limits, MAX_TENANT_BYTES, ServerConfig, Upstream, app};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A server on a free loopback port; its base URL.
async fn serve(store: Arc<dyn Store>, config: ServerConfig) -> String {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    chatmem_test::loopback::serve(app(memory, config)).await.url()
}

/// The conversations `GET /v1/conversations` lists for the `authorization` header `bearer`.
async fn listed(http: &reqwest::Client, base: &str, bearer: &str) -> Value {
    let page: Value = http
        .get(format!("{base}/v1/conversations"))
        .header("authorization", bearer)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    page["conversations"].clone()
}

/// `POST url` with the JSON `body` and the `authorization` header `bearer`.
async fn post_as(http: &reqwest::Client, url: impl reqwest::IntoUrl, bearer: &str, body: &Value) -> reqwest::Response {
    http.post(url)
        .header("authorization", bearer)
        .json(body)
        .send()
        .await
        .expect("post")
}

/// [`serve`] with `auth` and the default settings otherwise.
async fn serve_with_auth(store: Arc<dyn Store>, auth: Auth) -> String {
    serve(
        store,
        ServerConfig {
            auth: Some(auth),
            ..ServerConfig::default()
        },
    )
    .await
}

fn aftersale() -> Value {
    json!({"messages": [
        {"role": "system", "content": "你是邻里仓售后。未发货可退。"},
        {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
        {"role": "assistant", "content": "收到，订单 LC202610060018 尚未发货。"},
    ]})
}

/// The error body's code, after checking its shape.
async fn error_code(response: reqwest::Response) -> String {
    assert!(response.headers().contains_key("x-request-id"));
    let body: Value = response.json().await.expect("an error is JSON");
    let error = &body["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(error["request_id"].as_str().is_some_and(|id| id.len() == 16), "{body}");
    error["code"].as_str().expect("code").to_owned()
}

/// The roles of a window answer's messages.
fn roles_of(window: &Value) -> Vec<&str> {
    window["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect()
}

async fn the_memory_api(store: Arc<dyn Store>, prefix: &str) {
    let base = serve(store, ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let id = format!("{prefix}-app-user-42-aftersale");
    let url = format!("{base}/v1/conversations/{id}");

    let (status, body) = post_json(&http, format!("{url}/messages"), &aftersale()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["conversation"], id.as_str());
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));

    let r = http
        .post(format!("{url}/messages"))
        .json(&json!({"messages": [{"role": "user", "content": "那单能退吗？"}, {"role": "assistant", "content": "可以退。"},
            {"role": "user", "content": "多久到账？"}, {"role": "assistant", "content": "三天。"}]}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let window = get_json(&http, format!("{url}/messages")).await;
    assert_eq!(
        roles_of(&window),
        ["system", "user", "assistant", "user", "assistant"],
        "a window of 6, starting on a user message"
    );

    // A request may ask for its own window: a smaller one on read...
    let small = get_json(&http, format!("{url}/messages?max_messages=3")).await;
    assert_eq!(roles_of(&small), ["system", "user", "assistant"], "{small}");
    assert_eq!(small["messages"][2]["content"], "三天。");
    let tiny = get_json(&http, format!("{url}/messages?max_tokens=1&tokenizer=heuristic")).await;
    assert_eq!(roles_of(&tiny), ["system"], "the system message alone fills 1 token");
    // ...and on write, where it moves the stored window start.
    let r = http
        .post(format!("{url}/messages"))
        .json(&json!({"messages": [{"role": "user", "content": "还有别的单吗？"}, {"role": "assistant", "content": "没有了。"}],
                      "policy": {"max_messages": 3}}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let after: Value = r.json().await.expect("json");
    assert_eq!(roles_of(&after), ["system", "user", "assistant"], "{after}");
    let window = get_json(&http, format!("{url}/messages")).await;
    assert_eq!(
        window["messages"], after["messages"],
        "the server's policy reads what it left"
    );

    let history = get_json(&http, format!("{url}/history")).await;
    assert!(history["messages"].as_array().is_some_and(|m| !m.is_empty()));

    let page = get_json(&http, format!("{base}/v1/conversations?limit=1000")).await;
    assert!(
        page["conversations"]
            .as_array()
            .expect("ids")
            .iter()
            .any(|c| c == id.as_str()),
        "{page}"
    );

    assert_eq!(
        http.delete(&url).send().await.expect("delete").status(),
        StatusCode::NO_CONTENT
    );
    let r = http.get(format!("{url}/messages")).send().await.expect("get");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(r).await, "not_found");
    assert_eq!(
        http.delete(&url).send().await.expect("delete").status(),
        StatusCode::NOT_FOUND
    );

    let health = http.get(format!("{base}/healthz")).send().await.expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn memory_api_in_memory() {
    the_memory_api(Arc::new(InMemoryStore::new()), "mem").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_api_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = chatmem_sqlite::SqliteStore::open(dir.path().join("server.db"))
        .await
        .expect("open");
    the_memory_api(Arc::new(store), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn memory_api_postgres() {
    let url = chatmem_test::required_env("CHATMEM_TEST_PG_URL", "start PostgreSQL");
    let store = chatmem_postgres::PostgresStore::connect(&url).await.expect("connect");
    the_memory_api(Arc::new(store), chatmem_test::unique_id("server").as_str()).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn memory_api_redis() {
    let url = chatmem_test::required_env("CHATMEM_TEST_REDIS_URL", "start Redis");
    let store = chatmem_redis::RedisStore::connect(&url).await.expect("connect");
    the_memory_api(Arc::new(store), chatmem_test::unique_id("server").as_str()).await;
}

#[tokio::test]
async fn bad_requests_get_one_error_shape() {
    let limits = Limits {
        max_body_bytes: 4096,
        batch: chatmem::BatchLimits {
            messages: 3,
            message_bytes: 100,
            ..Limits::default().batch
        },
        ..Limits::default()
    };
    let base = serve(
        Arc::new(InMemoryStore::new()),
        ServerConfig {
            limits,
            ..ServerConfig::default()
        },
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/conversations/c1/messages");
    let post = |body: String| {
        http.post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };

    let r = post(r#"{"messages": [{"role":"user","content":"a"},{"role":"robot","content":"b"}]}"#.into())
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("messages[1].role")),
        "{body}"
    );
    assert_eq!(
        body["error"]["param"], "messages[1].role",
        "OpenAI's param names the field too"
    );

    for (body, status, code) in [
        ("not json".to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        (
            r#"{"messages": []}"#.to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            r#"{"messages": [], "extra": 1}"#.to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            json!({"messages": vec![json!({"role":"user","content":"x"}); 4]}).to_string(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            json!({"messages": [{"role":"user","content":"x".repeat(101)}]}).to_string(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        ("x".repeat(5000), StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
    ] {
        let r = post(body.clone()).await.expect("post");
        assert_eq!(r.status(), status, "{body:.80}");
        assert_eq!(error_code(r).await, code, "{body:.80}");
    }
    let r = http.get(format!("{base}/nowhere")).send().await.expect("get");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(error_code(r).await, "not_found");
    // Found by the `server_request` fuzz target: a known route with another method answered
    // axum's bare 405 (no body); a path that percent-decodes to bytes that are not UTF-8
    // answered axum's plain-text 400. Both are the one error shape now.
    let r = http.put(&url).send().await.expect("put");
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.headers().contains_key("allow"), "{:?}", r.headers());
    assert_eq!(error_code(r).await, "method_not_allowed");
    for (method, suffix) in [
        (reqwest::Method::GET, "/messages"),
        (reqwest::Method::POST, "/messages"),
        (reqwest::Method::GET, "/history"),
        (reqwest::Method::DELETE, ""),
    ] {
        let r = http
            .request(method.clone(), format!("{base}/v1/conversations/%FF%FE{suffix}"))
            .header("content-type", "application/json")
            .body(aftersale().to_string())
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{method}");
        assert_eq!(error_code(r).await, "invalid_request", "{method}");
    }
    let r = http
        .get(format!("{base}/v1/conversations?limit=0"))
        .send()
        .await
        .expect("list");
    assert_eq!(error_code(r).await, "invalid_request");
    // Nothing of the refused requests was stored.
    assert_eq!(
        http.get(&url).send().await.expect("get").status(),
        StatusCode::NOT_FOUND
    );
}

/// An id as one path segment: everything but letters and digits percent-encoded, so a `/`
/// is `%2F` and `.`/`..` cannot be normalised away by the client.
fn segment(id: &str) -> String {
    utf8_percent_encode(id, NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn odd_ids_are_data() {
    let base = serve(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let long = "订".repeat(63); // 189 bytes, within the default limit of 191
    for (path, id) in [
        ("a%2Fb", "a/b"),
        ("a%2fc", "a/c"),
        ("a..b", "a..b"),
        ("it's%20%22quoted%22", "it's \"quoted\""),
        ("100%25", "100%"),
        (long.as_str(), long.as_str()),
    ] {
        let url = format!("{base}/v1/conversations/{path}/messages");
        let r = http.post(&url).json(&aftersale()).send().await.expect("post");
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let body: Value = r.json().await.expect("json");
        assert_eq!(body["conversation"], id, "{path}");
        assert_eq!(
            http.get(&url).send().await.expect("get").status(),
            StatusCode::OK,
            "{path}"
        );
    }
    // `..` as a whole segment: HTTP clients normalise it away, so send the request by hand.
    let addr = base.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let body = aftersale().to_string();
    let request = format!(
        "POST /v1/conversations/../messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut tcp, request.as_bytes())
        .await
        .expect("send");
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut tcp, &mut answer)
        .await
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""conversation":"..""#), "{answer}");
    // Over the id limit (413), and ids a ConversationId refuses (400).
    for (path, status, code) in [
        ("订".repeat(86), StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        ("a%0Ab".to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("x%E2%80%AEy".to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
    ] {
        let r = http
            .get(format!("{base}/v1/conversations/{path}/messages"))
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), status, "{path}");
        assert_eq!(error_code(r).await, code);
    }
    // A listing cursor over the limit is named as the cursor, not as a conversation id.
    let r = http
        .get(format!("{base}/v1/conversations?cursor={}", "c".repeat(300)))
        .send()
        .await
        .expect("list");
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = r.json().await.expect("json");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("cursor is 300 bytes long"), "{message}");
}

/// The longest id the server takes is stored for the longest tenant name too (the key
/// `<tenant>/<id>` fits `chatmem::MAX_ID_BYTES`), and read back; one byte more is refused.
#[tokio::test]
async fn the_longest_id_of_the_longest_tenant_is_stored() {
    let tenant = "t".repeat(MAX_TENANT_BYTES);
    let auth = Auth::from_toml(&format!(
        "[[token]]\ntoken = \"token-of-the-longest\"\ntenant = \"{tenant}\"\n"
    ))
    .expect("auth");
    let base = serve_with_auth(Arc::new(InMemoryStore::new()), auth).await;
    let http = reqwest::Client::new();
    let bearer = "Bearer token-of-the-longest";
    let id = "i".repeat(DEFAULT_MAX_ID_BYTES);
    let url = format!("{base}/v1/conversations/{id}/messages");
    let r = post_as(&http, &url, bearer, &aftersale()).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(&url)
        .header("authorization", bearer)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::OK);
    let window: Value = r.json().await.expect("json");
    assert_eq!(window["conversation"], id.as_str());
    assert_eq!(roles_of(&window), ["system", "user", "assistant"]);
    assert_eq!(listed(&http, &base, bearer).await, json!([id]));
    let r = post_as(
        &http,
        format!("{base}/v1/conversations/{id}i/messages"),
        bearer,
        &aftersale(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_code(r).await, "too_large");
}

#[tokio::test]
async fn a_tenant_sees_only_its_own_conversations() {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\n[[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\n",
    )
    .expect("auth");
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let base = serve_with_auth(store.clone(), auth).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/conversations/c1/messages");
    let a = "Bearer token-of-team-a-000";
    let b = "Bearer token-of-team-b-000";

    let r = post_as(&http, &url, a, &aftersale()).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        http.get(&url)
            .header("authorization", a)
            .send()
            .await
            .expect("a")
            .status(),
        StatusCode::OK
    );
    let r = http.get(&url).header("authorization", b).send().await.expect("b");
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "another tenant's conversation does not exist for b"
    );
    let list = |token: &'static str| listed(&http, &base, token);
    assert_eq!(list(a).await, json!(["c1"]));
    assert_eq!(list(b).await, json!([]));
    // b's own c1 is another conversation.
    http.post(&url)
        .header("authorization", b)
        .json(&json!({"messages": [{"role":"user","content":"b's"}]}))
        .send()
        .await
        .expect("post");
    let a_window: Value = http
        .get(&url)
        .header("authorization", a)
        .send()
        .await
        .expect("a")
        .json()
        .await
        .expect("json");
    assert_eq!(a_window["messages"].as_array().map(Vec::len), Some(3));
    // The tenant is part of the stored key.
    let keys = store.list(None, 10).await.expect("list").ids;
    let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    assert_eq!(keys, ["team-a/c1", "team-b/c1"]);

    for header in [None, Some("Bearer nope-nope-nope-nope"), Some("Basic abc")] {
        let mut request = http.get(&url);
        if let Some(h) = header {
            request = request.header("authorization", h);
        }
        let r = request.send().await.expect("get");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{header:?}");
        assert_eq!(error_code(r).await, "unauthorized");
    }
}

/// Invalid policies answer 400 naming the field, and write nothing.
#[tokio::test]
async fn an_invalid_policy_is_refused_naming_the_field() {
    let base = serve(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/conversations/c1/messages");
    let pair = json!([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]);
    for (policy, names) in [
        (json!({"max_messages": 0}), "max_messages"),
        (json!({"max_tokens": 0}), "max_tokens"),
        (json!({"max_messages": -1}), "policy.max_messages"),
        (json!({"max_messages": 5, "max_tokens": 100}), "not both"),
        (json!({"max_messages": 5, "evict_to": 5}), "evict_to"),
        (json!({"evict_to": 6}), "evict_to"),
        (json!({"max_tokens": 100, "tokenizer": "gpt2"}), "tokenizer"),
        (json!({"boundary": "assistant"}), "user or pair-safe"),
        (json!({"max_message": 3}), "max_message"),
        (json!("small"), "policy"),
    ] {
        let r = http
            .post(&url)
            .json(&json!({"messages": pair, "policy": policy}))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{policy}");
        let body: Value = r.json().await.expect("json");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{policy}: {message}");
    }
    assert_eq!(
        http.get(&url).send().await.expect("get").status(),
        StatusCode::NOT_FOUND,
        "nothing was written"
    );
    let ok = http
        .post(&url)
        .json(&json!({"messages": pair, "policy": {"max_tokens": 500, "tokenizer": "o200k_base", "evict_to": 100}}))
        .send()
        .await
        .expect("post");
    assert_eq!(ok.status(), StatusCode::OK);
    // A request's boundary: `pair-safe` may start the window on the answer, the server's
    // (`user`) may not.
    for (query, roles) in [
        ("max_messages=1", vec![]),
        ("max_messages=1&boundary=pair-safe", vec!["assistant"]),
    ] {
        let window = get_json(&http, format!("{url}?{query}")).await;
        assert_eq!(roles_of(&window), roles, "{query}: {window}");
    }
    for (query, names) in [
        ("max_messages=0", "max_messages"),
        ("max_messages=abc", "max_messages"),
        ("evict_to=6", "evict_to"),
        ("max_tokens=10&tokenizer=nope", "tokenizer"),
        ("boundary=any", "user or pair-safe"),
        ("max_messages=2&max_tokens=2", "not both"),
        ("colour=red", "colour"),
    ] {
        let r = http.get(format!("{url}?{query}")).send().await.expect("get");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{query}");
        let body: Value = r.json().await.expect("json");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{query}: {message}");
    }
}

/// The `Bearer` scheme in any case, every 401 saying which scheme it
/// wants, and an auth file whose token could never match refused at start.
#[tokio::test]
async fn bearer_auth_follows_the_rfcs() {
    let auth = Auth::from_toml("[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n").expect("auth");
    let base = serve_with_auth(Arc::new(InMemoryStore::new()), auth).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/conversations/c1/messages");
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r = post_as(&http, &url, &format!("{scheme} token-of-team-a-000"), &aftersale()).await;
        assert_eq!(r.status(), StatusCode::OK, "scheme {scheme}");
    }
    for header in [
        None,
        Some("Bearer token-of-team-b-000"),
        Some("Basic dXNlcjpwdw=="),
        Some("Bearer"),
    ] {
        let mut request = http.get(&url);
        if let Some(value) = header {
            request = request.header("authorization", value);
        }
        let r = request.send().await.expect("get");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{header:?}");
        let challenge = r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap_or_default().to_owned());
        assert_eq!(challenge.as_deref(), Some("Bearer"), "{header:?}");
        assert_eq!(error_code(r).await, "unauthorized");
    }
    for token in [" token-of-team-a-000", "token-of-team-a-000 ", &" ".repeat(20)] {
        let file = format!("[[token]]\ntoken = \"{token}\"\ntenant = \"team-a\"\n");
        let e = Auth::from_toml(&file).expect_err("white space around a token");
        assert!(e.to_string().contains("white space"), "{e}");
    }
}

/// A conversation id is one path segment, so an id holding `/` and ending
/// in `history` or `messages` (once reachable through the chat completion's header only, its
/// REST paths taken for another route) is written, read, paged, listed and deleted like any
/// other, whether written through `POST …/messages` or the `X-Chatmem-Conversation` header.
#[tokio::test(flavor = "multi_thread")]
async fn every_id_that_can_be_written_can_be_read_listed_and_deleted() {
    let ids = [
        "user/history",
        "user/messages",
        "history",
        "messages",
        "a/b/messages",
        "a/b/history/",
        "/leading",
        "..",
        ".",
        "../messages",
        "%2F",
        "100%",
        "%E8%AE%A2",
        "订单/LC202610060018",
        "it's \"quoted\" ? # &",
    ];
    let upstream = chatmem_test::upstream::MockUpstream::start(Vec::new()).await;
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some("test-key".into()),
        }),
        ..ServerConfig::default()
    };
    let base = serve(Arc::new(InMemoryStore::new()), config).await;
    let http = reqwest::Client::new();
    for through_header in [false, true] {
        let tag = if through_header { "header:" } else { "rest:" };
        for id in ids.map(|id| format!("{tag}{id}")) {
            let url = format!("{base}/v1/conversations/{}", segment(&id));
            if through_header {
                upstream.push([chatmem_test::upstream::text("收到。")]);
                let r = http
                    .post(format!("{base}/v1/chat/completions"))
                    .header("x-chatmem-conversation", id.as_bytes())
                    .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "你好"}]}))
                    .send()
                    .await
                    .expect("chat completion");
                assert_eq!(
                    r.status(),
                    StatusCode::OK,
                    "{id}: {}",
                    r.text().await.unwrap_or_default()
                );
            } else {
                let r = http
                    .post(format!("{url}/messages"))
                    .json(&aftersale())
                    .send()
                    .await
                    .expect("post");
                assert_eq!(r.status(), StatusCode::OK, "{id}");
                let body: Value = r.json().await.expect("json");
                assert_eq!(body["conversation"], id.as_str());
            }
            for what in ["messages", "history"] {
                let r = http.get(format!("{url}/{what}")).send().await.expect("get");
                assert_eq!(r.status(), StatusCode::OK, "{id} {what}");
                let body: Value = r.json().await.expect("json");
                assert_eq!(body["conversation"], id.as_str(), "{what}");
                assert!(
                    body["messages"].as_array().is_some_and(|m| m.len() >= 2),
                    "{id} {what}: {body}"
                );
            }
        }
    }
    let page = get_json(&http, format!("{base}/v1/conversations?limit=1000")).await;
    let listed: Vec<&str> = page["conversations"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tag in ["rest:", "header:"] {
        for id in ids {
            let id = format!("{tag}{id}");
            assert!(listed.contains(&id.as_str()), "{id} listed in {listed:?}");
            let url = format!("{base}/v1/conversations/{}", segment(&id));
            let r = http.delete(&url).send().await.expect("delete");
            assert_eq!(r.status(), StatusCode::NO_CONTENT, "{id}");
            for what in ["messages", "history"] {
                let r = http.get(format!("{url}/{what}")).send().await.expect("get");
                assert_eq!(r.status(), StatusCode::NOT_FOUND, "{id} {what} after delete");
            }
            let r = http.delete(&url).send().await.expect("delete");
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{id} deleted twice");
        }
    }
    let page = get_json(&http, format!("{base}/v1/conversations")).await;
    assert_eq!(page["conversations"], json!([]), "everything was deleted");
}

/// A `/` sent as is no longer makes an id: `/v1/conversations/a/b/messages` is no route (the
/// error says to send `%2F`) and writes nothing, and a path's suffix is never read as part of
/// an id (`…/user/history` is not a conversation `user/history` nor `user`'s history).
#[tokio::test]
async fn a_slash_in_a_path_is_a_segment_boundary() {
    let base = serve(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let (status, body) = post_json(&http, format!("{base}/v1/conversations/a/b/messages"), &aftersale()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
    assert!(
        body["error"]["message"].as_str().is_some_and(|m| m.contains("%2F")),
        "{body}"
    );
    // `user` exists; `user/history` as a path is its history, as a segment another id.
    let r = http
        .post(format!("{base}/v1/conversations/user/messages"))
        .json(&aftersale())
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(format!("{base}/v1/conversations/user%2Fhistory/messages"))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    for (method, path, status) in [
        (reqwest::Method::DELETE, "user/history", StatusCode::METHOD_NOT_ALLOWED),
        (reqwest::Method::GET, "user", StatusCode::METHOD_NOT_ALLOWED),
        (reqwest::Method::POST, "user/history", StatusCode::METHOD_NOT_ALLOWED),
        (reqwest::Method::GET, "user/other", StatusCode::NOT_FOUND),
        (reqwest::Method::GET, "user/messages/", StatusCode::NOT_FOUND),
        // An empty segment is an empty id, which no conversation has.
        (reqwest::Method::GET, "/messages", StatusCode::BAD_REQUEST),
    ] {
        let r = http
            .request(method.clone(), format!("{base}/v1/conversations/{path}"))
            .header("content-type", "application/json")
            .body(aftersale().to_string())
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), status, "{method} {path}");
        assert!(error_code(r).await.len() > 1);
    }
    let page = get_json(&http, format!("{base}/v1/conversations")).await;
    assert_eq!(page["conversations"], json!(["user"]), "nothing else was written");
}
