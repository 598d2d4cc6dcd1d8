//! `POST /v1/chat/completions` through HTTP: the seed 003 after-sale scenario against a
//! loopback upstream that speaks OpenAI's protocol, plain and streaming; the header rule;
//! `GET /v1/models` passed through.

#[allow(dead_code, unreachable_pub)]
#[path = "../../chatmem-advisor/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use chatmem::{ChatMemory, InMemoryStore, Store, WindowPolicy};
use chatmem_server::{ServerConfig, Upstream, app};
use serde_json::{Value, json};
use support::{MockServer, roles_and_texts, text};

const SYSTEM: &str = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。";
const ORDER: &str = "LC202610060018";

async fn serve(store: Arc<dyn Store>, upstream: &MockServer) -> String {
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some("test-key".into()), // the key the loopback upstream checks
        }),
        ..ServerConfig::default()
    };
    serve_with(store, config).await
}

async fn serve_with(store: Arc<dyn Store>, config: ServerConfig) -> String {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app(memory, config)).await;
    });
    format!("http://{addr}")
}

fn request(text: &str, stream: bool) -> Value {
    json!({"model": "mock-model", "stream": stream, "user": "ignored",
           "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]})
}

/// The text of an SSE answer, and whether it ended with `[DONE]`.
fn sse_text(body: &str) -> (String, bool) {
    let mut text = String::new();
    let mut done = false;
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).expect("a JSON chunk");
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if let Some(c) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(c);
        }
    }
    (text, done)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_aftersale_scenario_through_http_plain_and_streaming() {
    for stream in [false, true] {
        let upstream = MockServer::start(vec![
            text("订单 LC202610060018 尚未发货。"),
            text("LC202610060018 未发货，可以退。"),
            text("请提供订单号。"),
        ])
        .await;
        let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
        let http = reqwest::Client::new();
        let url = format!("{base}/v1/chat/completions");
        let turn = |conversation: &'static str, text: &'static str| {
            http.post(&url)
                .header("X-Chatmem-Conversation", conversation)
                .header("authorization", "Bearer client-key-is-not-forwarded")
                .json(&request(text, stream))
                .send()
        };
        let answer = |r: reqwest::Response| async move {
            assert_eq!(r.status(), 200);
            if stream {
                let (text, done) = sse_text(&r.text().await.expect("body"));
                assert!(done, "the stream ends with [DONE]");
                text
            } else {
                let body: Value = r.json().await.expect("json");
                assert_eq!(body["object"], "chat.completion");
                body["choices"][0]["message"]["content"]
                    .as_str()
                    .expect("content")
                    .to_owned()
            }
        };
        let first = answer(
            turn("app-user-42-aftersale", "我的订单是 LC202610060018，还没发货。")
                .await
                .expect("turn 1"),
        )
        .await;
        assert!(first.contains(ORDER));
        let second = answer(turn("app-user-42-aftersale", "那单能退吗？").await.expect("turn 2")).await;
        assert!(second.contains(ORDER), "{second}");
        let other = answer(turn("app-user-43-aftersale", "那单能退吗？").await.expect("other")).await;
        assert_eq!(other, "请提供订单号。");

        let requests = upstream.requests();
        assert_eq!(requests.len(), 3);
        // Turn 2 reached the model with turn 1 from memory.
        let turn2 = roles_and_texts(&requests[1]);
        let roles: Vec<&str> = turn2.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"], "stream {stream}");
        assert!(turn2[1].1.contains(ORDER));
        // Another conversation never sees it.
        assert!(roles_and_texts(&requests[2]).iter().all(|(_, t)| !t.contains(ORDER)));
        assert_eq!(requests[1]["model"], "mock-model");
    }
}

#[tokio::test]
async fn a_request_without_the_header_is_refused_naming_it() {
    let upstream = MockServer::start(vec![text("never")]).await;
    let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&request("hi", false))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("X-Chatmem-Conversation")),
        "{body}"
    );
    assert!(upstream.requests().is_empty(), "nothing reached the model");
}

/// Found by the `server_request` fuzz target: a header holding a UTF-8 id (any text is an id)
/// was refused as missing. It names the conversation now; bytes that are not UTF-8 are refused
/// saying so.
#[tokio::test]
async fn the_header_takes_any_id_as_utf8() {
    let upstream = MockServer::start(vec![text("收到。")]).await;
    let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
    let http = reqwest::Client::new();
    let post = |header: &[u8]| {
        http.post(format!("{base}/v1/chat/completions"))
            .header(
                "X-Chatmem-Conversation",
                reqwest::header::HeaderValue::from_bytes(header).expect("a header value"),
            )
            .json(&request("hi", false))
            .send()
    };
    let r = post(b"\xff\xfe").await.expect("post");
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.expect("json");
    assert_eq!(
        body["error"]["message"], "the X-Chatmem-Conversation header is not UTF-8 text",
        "{body}"
    );
    assert!(upstream.requests().is_empty());

    let r = post("订单-LC202610060018".as_bytes()).await.expect("post");
    assert_eq!(r.status(), 200);
    let window: Value = http
        .get(format!(
            "{base}/v1/conversations/%E8%AE%A2%E5%8D%95-LC202610060018/messages"
        ))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(window["conversation"], "订单-LC202610060018");
    assert_eq!(window["messages"].as_array().map(Vec::len), Some(3), "{window}");
}

/// The official-protocol client (async-openai) pointed at `chatmem serve`: only the base URL
/// and one header change, and turn 2 still knows the order.
#[tokio::test(flavor = "multi_thread")]
async fn an_openai_client_gets_memory_with_one_header() {
    use async_openai::Client;
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestSystemMessageArgs, ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    use futures_util::StreamExt;

    let upstream = MockServer::start(vec![
        text("订单 LC202610060018 尚未发货。"),
        text("LC202610060018 未发货，可以退。"),
    ])
    .await;
    let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
    let config = OpenAIConfig::new()
        .with_api_base(format!("{base}/v1"))
        .with_api_key("unused-by-chatmem")
        .with_header("X-Chatmem-Conversation", "app-user-42-aftersale")
        .expect("a valid header");
    let client = Client::with_config(config);
    let request = |text: &str, stream: bool| {
        CreateChatCompletionRequestArgs::default()
            .model("mock-model")
            .stream(stream)
            .messages([
                ChatCompletionRequestSystemMessageArgs::default()
                    .content(SYSTEM)
                    .build()
                    .expect("system")
                    .into(),
                ChatCompletionRequestUserMessageArgs::default()
                    .content(text)
                    .build()
                    .expect("user")
                    .into(),
            ])
            .build()
            .expect("request")
    };
    let first = client
        .chat()
        .create(request("我的订单是 LC202610060018，还没发货。", false))
        .await
        .expect("turn 1");
    let text1 = first.choices[0].message.content.clone().unwrap_or_default();
    assert!(text1.contains(ORDER), "{text1}");

    let mut stream = client
        .chat()
        .create_stream(request("那单能退吗？", true))
        .await
        .expect("turn 2");
    let mut text2 = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("a chunk the client understands");
        if let Some(c) = chunk.choices.first().and_then(|c| c.delta.content.clone()) {
            text2.push_str(&c);
        }
    }
    assert!(text2.contains(ORDER), "{text2}");
    let turn2 = roles_and_texts(&upstream.requests()[1]);
    assert!(
        turn2.iter().any(|(role, t)| role == "user" && t.contains(ORDER)),
        "memory reached the model"
    );
}

/// `GET /v1/models` is the upstream's list as it came, also through async-openai.
#[tokio::test(flavor = "multi_thread")]
async fn models_are_the_upstreams_list() {
    use async_openai::Client;
    use async_openai::config::OpenAIConfig;

    let upstream = MockServer::start(Vec::new()).await;
    let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
    let r = reqwest::get(format!("{base}/v1/models")).await.expect("get");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["object"], "list");
    assert_eq!(
        body["data"][1]["owned_by"], "chatmem-test",
        "the upstream's fields pass through"
    );

    let client = Client::with_config(OpenAIConfig::new().with_api_base(format!("{base}/v1")));
    let list = client.models().list().await.expect("an OpenAI client lists models");
    let ids: Vec<&str> = list.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["mock-model", "mock-reasoner"]);
}

/// Without an upstream: 503; with an upstream that fails: 502 naming its status, counted
/// in the metrics.
#[tokio::test]
async fn models_without_or_with_a_failing_upstream() {
    let base = serve_with(Arc::new(InMemoryStore::new()), ServerConfig::default()).await;
    let r = reqwest::get(format!("{base}/v1/models")).await.expect("get");
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], "no_upstream", "{body}");

    let upstream = MockServer::start(Vec::new()).await;
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some("a-key-the-upstream-refuses".into()),
        }),
        ..ServerConfig::default()
    };
    let base = serve_with(Arc::new(InMemoryStore::new()), config).await;
    let r = reqwest::get(format!("{base}/v1/models")).await.expect("get");
    assert_eq!(r.status(), 502);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], "upstream_error", "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("401"), "the upstream's status is named: {message}");
    assert!(!message.contains("a-key-the-upstream-refuses"), "{message}");
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("chatmem_upstream_errors_total{kind=\"auth\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"chatmem_http_requests_total{route="/v1/models",method="GET",status="502"} 1"#),
        "{metrics}"
    );
}

/// An upstream that refuses a chat call: 502 naming its status, counted by kind, nothing
/// committed.
#[tokio::test]
async fn a_failed_upstream_call_is_502_and_counted() {
    let upstream = MockServer::start(vec![support::Reply::Status(400)]).await;
    let base = serve(Arc::new(InMemoryStore::new()), &upstream).await;
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/v1/chat/completions"))
        .header("X-Chatmem-Conversation", "c1")
        .json(&request("hi", false))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 502);
    let body: Value = r.json().await.expect("json");
    assert!(
        body["error"]["message"].as_str().is_some_and(|m| m.contains("400")),
        "{body}"
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("chatmem_upstream_errors_total{kind=\"invalid_request\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("chatmem_commits_total 0"), "{metrics}");
}
