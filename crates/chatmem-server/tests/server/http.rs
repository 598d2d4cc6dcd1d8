//! The memory API on every store, driven in process (`chatmem_test::app`): the window and
//! history routes, the one error shape, limits, odd ids (every id that can be written can be
//! read, listed and deleted), and tenant isolation.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode};
use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{Auth, DEFAULT_MAX_ID_BYTES, Limits, MAX_TENANT_BYTES, ServerConfig, Upstream, app};
use chatmem_test::app::{App, json_request, request};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

/// The server over `store` with a window of 6 messages and `config` (the metrics' and the
/// OpenAPI document's tests use it too).
pub(crate) fn server(store: Arc<dyn Store>, config: ServerConfig) -> App {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    App::new(app(memory, config))
}

/// The conversations `GET /v1/conversations` lists for `server`'s bearer.
async fn listed(server: &App) -> Value {
    server.get("/v1/conversations").await.json()["conversations"].clone()
}

/// [`server`] with `auth` and the default settings otherwise.
fn server_with_auth(store: Arc<dyn Store>, auth: Auth) -> App {
    server(
        store,
        ServerConfig {
            auth: Some(auth),
            ..ServerConfig::default()
        },
    )
}

/// `method uri` with `body` as it is, declared as JSON.
fn raw_json(method: Method, uri: &str, body: String) -> Request<Body> {
    let mut r = request(method, uri, Body::from(body));
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

fn aftersale() -> Value {
    json!({"messages": [
        {"role": "system", "content": "你是邻里仓售后。未发货可退。"},
        {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
        {"role": "assistant", "content": "收到，订单 LC202610060018 尚未发货。"},
    ]})
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
    let server = server(store, ServerConfig::default());
    let id = format!("{prefix}-app-user-42-aftersale");
    let url = format!("/v1/conversations/{id}");

    let r = server.post_json(&format!("{url}/messages"), &aftersale()).await;
    assert_eq!(r.status, StatusCode::OK);
    let body = r.json();
    assert_eq!(body["conversation"], id.as_str());
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));

    let r = server
        .post_json(
            &format!("{url}/messages"),
            &json!({"messages": [{"role": "user", "content": "那单能退吗？"}, {"role": "assistant", "content": "可以退。"},
            {"role": "user", "content": "多久到账？"}, {"role": "assistant", "content": "三天。"}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let window = server.get(&format!("{url}/messages")).await.json();
    assert_eq!(
        roles_of(&window),
        ["system", "user", "assistant", "user", "assistant"],
        "a window of 6, starting on a user message"
    );

    // A request may ask for its own window: a smaller one on read...
    let small = server.get(&format!("{url}/messages?max_messages=3")).await.json();
    assert_eq!(roles_of(&small), ["system", "user", "assistant"], "{small}");
    assert_eq!(small["messages"][2]["content"], "三天。");
    let tiny = server
        .get(&format!("{url}/messages?max_tokens=1&tokenizer=heuristic"))
        .await
        .json();
    assert_eq!(roles_of(&tiny), ["system"], "the system message alone fills 1 token");
    // ...and on write, where it moves the stored window start.
    let r = server
        .post_json(
            &format!("{url}/messages"),
            &json!({"messages": [{"role": "user", "content": "还有别的单吗？"}, {"role": "assistant", "content": "没有了。"}],
                      "policy": {"max_messages": 3}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let after = r.json();
    assert_eq!(roles_of(&after), ["system", "user", "assistant"], "{after}");
    let window = server.get(&format!("{url}/messages")).await.json();
    assert_eq!(
        window["messages"], after["messages"],
        "the server's policy reads what it left"
    );

    let history = server.get(&format!("{url}/history")).await.json();
    assert!(history["messages"].as_array().is_some_and(|m| !m.is_empty()));

    let page = server.get("/v1/conversations?limit=1000").await.json();
    assert!(
        page["conversations"]
            .as_array()
            .expect("ids")
            .iter()
            .any(|c| c == id.as_str()),
        "{page}"
    );

    assert_eq!(server.delete(&url).await.status, StatusCode::NO_CONTENT);
    let r = server.get(&format!("{url}/messages")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "not_found");
    assert_eq!(server.delete(&url).await.status, StatusCode::NOT_FOUND);

    assert_eq!(server.get("/healthz").await.status, StatusCode::OK);
}

/// A chat app's greeting, sent before the user's first question (and after the system
/// message, in a request of its own), is kept in the window and in a drop-evicted history.
async fn the_greeting_is_kept(store: Arc<dyn Store>, prefix: &str) {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .retention(chatmem::Retention::DropEvicted)
        .build()
        .expect("valid memory settings");
    let server = App::new(app(memory, ServerConfig::default()));
    let url = format!("/v1/conversations/{prefix}-greeting/messages");
    let system = json!({"messages": [{"role": "system", "content": "你是邻里仓售后。"}]});
    assert_eq!(server.post_json(&url, &system).await.status, StatusCode::OK);
    let greeting = json!({"messages": [{"role": "assistant", "content": "Hi! How can I help?"}]});
    let r = server.post_json(&url, &greeting).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(roles_of(&r.json()), ["system", "assistant"], "{}", r.text());
    let history = server.get(&url.replace("/messages", "/history")).await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.text());
    let history = history.json();
    assert_eq!(roles_of(&history), ["system", "assistant"], "{history}");
    assert_eq!(history["messages"][1]["content"], "Hi! How can I help?");
    let turn = json!({"messages": [{"role": "user", "content": "我的订单是 LC202610060018。"},
                                   {"role": "assistant", "content": "收到。"}]});
    let window = server.post_json(&url, &turn).await.json();
    assert_eq!(
        roles_of(&window),
        ["system", "assistant", "user", "assistant"],
        "{window}"
    );
}

#[tokio::test]
async fn memory_api_in_memory() {
    the_memory_api(Arc::new(InMemoryStore::new()), "mem").await;
    the_greeting_is_kept(Arc::new(InMemoryStore::new()), "mem").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_api_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = chatmem_sqlite::SqliteStore::open(dir.path().join("server.db"))
        .await
        .expect("open");
    let store = Arc::new(store);
    the_memory_api(store.clone(), "sqlite").await;
    the_greeting_is_kept(store, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn memory_api_postgres() {
    let url = chatmem_test::required_env("CHATMEM_TEST_PG_URL", "start PostgreSQL");
    let store = Arc::new(chatmem_postgres::PostgresStore::connect(&url).await.expect("connect"));
    let prefix = chatmem_test::unique_id("server").as_str().to_owned();
    the_memory_api(store.clone(), &prefix).await;
    the_greeting_is_kept(store, &prefix).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn memory_api_redis() {
    let url = chatmem_test::required_env("CHATMEM_TEST_REDIS_URL", "start Redis");
    let store = Arc::new(chatmem_redis::RedisStore::connect(&url).await.expect("connect"));
    let prefix = chatmem_test::unique_id("server").as_str().to_owned();
    the_memory_api(store.clone(), &prefix).await;
    the_greeting_is_kept(store, &prefix).await;
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
    let server = server(
        Arc::new(InMemoryStore::new()),
        ServerConfig {
            limits,
            ..ServerConfig::default()
        },
    );
    let url = "/v1/conversations/c1/messages";
    let post = |body: String| server.send(raw_json(Method::POST, url, body));

    let r = post(r#"{"messages": [{"role":"user","content":"a"},{"role":"robot","content":"b"}]}"#.into()).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let body = r.json();
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
        let r = post(body.clone()).await;
        assert_eq!(r.status, status, "{body:.80}");
        assert_eq!(r.error_code(), code, "{body:.80}");
    }
    let r = server.get("/nowhere").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "not_found");
    // Found by the `server_request` fuzz target: a known route with another method answered
    // axum's bare 405 (no body); a path that percent-decodes to bytes that are not UTF-8
    // answered axum's plain-text 400. Both are the one error shape now.
    let r = server.send(request(Method::PUT, url, Body::empty())).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.headers.contains_key("allow"), "{:?}", r.headers);
    assert_eq!(r.error_code(), "method_not_allowed");
    for (method, suffix) in [
        (Method::GET, "/messages"),
        (Method::POST, "/messages"),
        (Method::GET, "/history"),
        (Method::DELETE, ""),
    ] {
        let uri = format!("/v1/conversations/%FF%FE{suffix}");
        let r = server.send_json(method.clone(), &uri, &aftersale()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{method}");
        assert_eq!(r.error_code(), "invalid_request", "{method}");
    }
    let r = server.get("/v1/conversations?limit=0").await;
    assert_eq!(r.error_code(), "invalid_request");
    // Nothing of the refused requests was stored.
    assert_eq!(server.get(url).await.status, StatusCode::NOT_FOUND);
}

/// A method a route does not take is answered 405 (with `Allow`) whatever its body's type,
/// as for any other method; a `POST` a route takes still needs a JSON body before its handler
/// runs (415 otherwise, nothing stored).
#[tokio::test]
async fn a_wrong_method_is_405_before_the_content_type_rule() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    for (uri, allow) in [
        ("/healthz", "GET,HEAD"),
        ("/v1/models", "GET,HEAD"),
        ("/v1/conversations", "GET,HEAD"),
        ("/v1/conversations/c1", "DELETE"),
        ("/v1/conversations/c1/history", "GET,HEAD"),
    ] {
        for content_type in [None, Some("text/plain"), Some("application/json")] {
            let mut r = request(Method::POST, uri, Body::from("{}"));
            if let Some(t) = content_type {
                r.headers_mut().insert("content-type", HeaderValue::from_static(t));
            }
            let r = server.send(r).await;
            assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{uri} {content_type:?}");
            assert_eq!(r.error_code(), "method_not_allowed", "{uri} {content_type:?}");
            assert_eq!(r.header("allow"), Some(allow), "{uri} {content_type:?}");
        }
    }
    let url = "/v1/conversations/c1/messages";
    let body = json!({"messages": [{"role": "user", "content": "hi"}]}).to_string();
    for content_type in [None, Some("text/plain"), Some("application/x-www-form-urlencoded")] {
        let mut r = request(Method::POST, url, Body::from(body.clone()));
        if let Some(t) = content_type {
            r.headers_mut().insert("content-type", HeaderValue::from_static(t));
        }
        let r = server.send(r).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{content_type:?}");
        assert_eq!(r.error_code(), "unsupported_media_type", "{content_type:?}");
    }
    assert_eq!(
        server.get(url).await.status,
        StatusCode::NOT_FOUND,
        "nothing was stored"
    );
    let r = server.send(raw_json(Method::POST, url, body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// An id as one path segment: everything but letters and digits percent-encoded, so a `/`
/// is `%2F` and `.`/`..` cannot be normalised away by the client.
fn segment(id: &str) -> String {
    utf8_percent_encode(id, NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn odd_ids_are_data() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let long = "订".repeat(63); // 189 bytes, within the default limit of 191
    for (path, id) in [
        ("a%2Fb", "a/b"),
        ("a%2fc", "a/c"),
        ("a..b", "a..b"),
        ("it's%20%22quoted%22", "it's \"quoted\""),
        ("100%25", "100%"),
        (long.as_str(), long.as_str()),
    ] {
        let url = format!("/v1/conversations/{path}/messages");
        let r = server.post_json(&url, &aftersale()).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(r.json()["conversation"], id, "{path}");
        assert_eq!(server.get(&url).await.status, StatusCode::OK, "{path}");
    }
    // `..` as a whole segment, which HTTP clients normalise away: in process it reaches the
    // router as sent.
    let r = server.post_json("/v1/conversations/../messages", &aftersale()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["conversation"], "..");
    // Over the id limit (413), and ids a ConversationId refuses (400).
    for (path, status, code) in [
        ("订".repeat(86), StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        ("a%0Ab".to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("x%E2%80%AEy".to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
    ] {
        let r = server.get(&format!("/v1/conversations/{path}/messages")).await;
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.error_code(), code);
    }
    // A listing cursor over the limit is named as the cursor, not as a conversation id.
    let r = server
        .get(&format!("/v1/conversations?cursor={}", "c".repeat(300)))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    let body = r.json();
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
    let server = server_with_auth(Arc::new(InMemoryStore::new()), auth).as_bearer("token-of-the-longest");
    let id = "i".repeat(DEFAULT_MAX_ID_BYTES);
    let url = format!("/v1/conversations/{id}/messages");
    let r = server.post_json(&url, &aftersale()).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = server.get(&url).await;
    assert_eq!(r.status, StatusCode::OK);
    let window = r.json();
    assert_eq!(window["conversation"], id.as_str());
    assert_eq!(roles_of(&window), ["system", "user", "assistant"]);
    assert_eq!(listed(&server).await, json!([id]));
    let r = server
        .post_json(&format!("/v1/conversations/{id}i/messages"), &aftersale())
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.error_code(), "too_large");
}

#[tokio::test]
async fn a_tenant_sees_only_its_own_conversations() {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\n[[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\n",
    )
    .expect("auth");
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let server = server_with_auth(store.clone(), auth);
    let url = "/v1/conversations/c1/messages";
    let a = server.as_bearer("token-of-team-a-000");
    let b = server.as_bearer("token-of-team-b-000");

    assert_eq!(a.post_json(url, &aftersale()).await.status, StatusCode::OK);
    assert_eq!(a.get(url).await.status, StatusCode::OK);
    assert_eq!(
        b.get(url).await.status,
        StatusCode::NOT_FOUND,
        "another tenant's conversation does not exist for b"
    );
    assert_eq!(listed(&a).await, json!(["c1"]));
    assert_eq!(listed(&b).await, json!([]));
    // b's own c1 is another conversation.
    let r = b
        .post_json(url, &json!({"messages": [{"role":"user","content":"b's"}]}))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let a_window = a.get(url).await.json();
    assert_eq!(a_window["messages"].as_array().map(Vec::len), Some(3));
    // The tenant is part of the stored key.
    let keys = store.list(None, 10).await.expect("list").ids;
    let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    assert_eq!(keys, ["team-a/c1", "team-b/c1"]);

    for caller in [
        server.clone(),
        server.with_authorization("Bearer nope-nope-nope-nope"),
        server.with_authorization("Basic abc"),
    ] {
        let r = caller.get(url).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{caller:?}");
        assert_eq!(r.error_code(), "unauthorized");
    }
}

/// Invalid policies answer 400 naming the field, and write nothing.
#[tokio::test]
async fn an_invalid_policy_is_refused_naming_the_field() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let url = "/v1/conversations/c1/messages";
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
        let r = server
            .post_json(url, &json!({"messages": pair, "policy": policy}))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{policy}");
        let body = r.json();
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{policy}: {message}");
    }
    assert_eq!(
        server.get(url).await.status,
        StatusCode::NOT_FOUND,
        "nothing was written"
    );
    let ok = server
        .post_json(
            url,
            &json!({"messages": pair, "policy": {"max_tokens": 500, "tokenizer": "o200k_base", "evict_to": 100}}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    // A request's boundary: `pair-safe` may start the window on the answer, the server's
    // (`user`) may not.
    for (query, roles) in [
        ("max_messages=1", vec![]),
        ("max_messages=1&boundary=pair-safe", vec!["assistant"]),
    ] {
        let window = server.get(&format!("{url}?{query}")).await.json();
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
        let r = server.get(&format!("{url}?{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        let body = r.json();
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{query}: {message}");
    }
}

/// The `Bearer` scheme in any case, every 401 saying which scheme it
/// wants, and an auth file whose token could never match refused at start.
#[tokio::test]
async fn bearer_auth_follows_the_rfcs() {
    let auth = Auth::from_toml("[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n").expect("auth");
    let server = server_with_auth(Arc::new(InMemoryStore::new()), auth);
    let url = "/v1/conversations/c1/messages";
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r = server
            .with_authorization(&format!("{scheme} token-of-team-a-000"))
            .post_json(url, &aftersale())
            .await;
        assert_eq!(r.status, StatusCode::OK, "scheme {scheme}");
    }
    for header in [
        None,
        Some("Bearer token-of-team-b-000"),
        Some("Basic dXNlcjpwdw=="),
        Some("Bearer"),
    ] {
        let caller = header.map_or_else(|| server.clone(), |value| server.with_authorization(value));
        let r = caller.get(url).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{header:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{header:?}");
        assert_eq!(r.error_code(), "unauthorized");
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
    let server = server(Arc::new(InMemoryStore::new()), config);
    for through_header in [false, true] {
        let tag = if through_header { "header:" } else { "rest:" };
        for id in ids.map(|id| format!("{tag}{id}")) {
            let url = format!("/v1/conversations/{}", segment(&id));
            if through_header {
                upstream.push([chatmem_test::upstream::text("收到。")]);
                let mut r = json_request(
                    Method::POST,
                    "/v1/chat/completions",
                    &json!({"model": "mock-model", "messages": [{"role": "user", "content": "你好"}]}),
                );
                r.headers_mut().insert(
                    "x-chatmem-conversation",
                    HeaderValue::from_bytes(id.as_bytes()).expect("a header value"),
                );
                let r = server.send(r).await;
                assert_eq!(r.status, StatusCode::OK, "{id}: {}", r.text());
            } else {
                let r = server.post_json(&format!("{url}/messages"), &aftersale()).await;
                assert_eq!(r.status, StatusCode::OK, "{id}");
                assert_eq!(r.json()["conversation"], id.as_str());
            }
            for what in ["messages", "history"] {
                let r = server.get(&format!("{url}/{what}")).await;
                assert_eq!(r.status, StatusCode::OK, "{id} {what}");
                let body = r.json();
                assert_eq!(body["conversation"], id.as_str(), "{what}");
                assert!(
                    body["messages"].as_array().is_some_and(|m| m.len() >= 2),
                    "{id} {what}: {body}"
                );
            }
        }
    }
    let page = server.get("/v1/conversations?limit=1000").await.json();
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
            let url = format!("/v1/conversations/{}", segment(&id));
            assert_eq!(server.delete(&url).await.status, StatusCode::NO_CONTENT, "{id}");
            for what in ["messages", "history"] {
                let r = server.get(&format!("{url}/{what}")).await;
                assert_eq!(r.status, StatusCode::NOT_FOUND, "{id} {what} after delete");
            }
            let r = server.delete(&url).await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{id} deleted twice");
        }
    }
    let page = server.get("/v1/conversations").await.json();
    assert_eq!(page["conversations"], json!([]), "everything was deleted");
}

/// A `/` sent as is no longer makes an id: `/v1/conversations/a/b/messages` is no route (the
/// error says to send `%2F`) and writes nothing, and a path's suffix is never read as part of
/// an id (`…/user/history` is not a conversation `user/history` nor `user`'s history).
#[tokio::test]
async fn a_slash_in_a_path_is_a_segment_boundary() {
    let server = server(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let r = server.post_json("/v1/conversations/a/b/messages", &aftersale()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let body = r.json();
    assert_eq!(body["error"]["code"], "not_found");
    assert!(
        body["error"]["message"].as_str().is_some_and(|m| m.contains("%2F")),
        "{body}"
    );
    // `user` exists; `user/history` as a path is its history, as a segment another id.
    let r = server.post_json("/v1/conversations/user/messages", &aftersale()).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = server.get("/v1/conversations/user%2Fhistory/messages").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    for (method, path, status) in [
        (Method::DELETE, "user/history", StatusCode::METHOD_NOT_ALLOWED),
        (Method::GET, "user", StatusCode::METHOD_NOT_ALLOWED),
        (Method::POST, "user/history", StatusCode::METHOD_NOT_ALLOWED),
        (Method::GET, "user/other", StatusCode::NOT_FOUND),
        (Method::GET, "user/messages/", StatusCode::NOT_FOUND),
        // An empty segment is an empty id, which no conversation has.
        (Method::GET, "/messages", StatusCode::BAD_REQUEST),
    ] {
        let r = server
            .send_json(method.clone(), &format!("/v1/conversations/{path}"), &aftersale())
            .await;
        assert_eq!(r.status, status, "{method} {path}");
        assert!(r.error_code().len() > 1);
    }
    let page = server.get("/v1/conversations").await.json();
    assert_eq!(page["conversations"], json!(["user"]), "nothing else was written");
}
