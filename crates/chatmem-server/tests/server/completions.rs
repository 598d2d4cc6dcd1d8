//! `POST /v1/chat/completions`: the seed 003 after-sale scenario against a loopback upstream
//! that speaks OpenAI's protocol, plain and streaming; the header rule; `GET /v1/models`
//! passed through; the pass-through proxy (every field forwarded in order, answers byte for
//! byte, streams, `n`, `developer`), the upstream's errors as the client sees them (a hostile
//! upstream's text and the key kept in), one connection for every call, a client hanging up
//! mid-stream, and clients that resend their whole conversation.
//!
//! The app is driven in process (`chatmem_test::app`); the mock upstream listens on loopback, so
//! the server calls it over HTTP as it calls a provider. Four tests serve the app on a loopback
//! port too, each saying why: an OpenAI client library talks HTTP, a client hanging up is a
//! connection closing, and upstream connection reuse is measured at a client's pace.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, Method, Request, StatusCode};
use chatmem::{ChatMemory, InMemoryStore, Retention, Store, WindowPolicy};
use chatmem_server::{Limits, ServerConfig, Upstream, app};
use chatmem_test::app::{Answer, App, json_request};
use chatmem_test::upstream::{self as upstream, Canned, MockUpstream, roles_and_texts, text};
use serde_json::{Map, Value, json};

const SYSTEM: &str = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。";
const ORDER: &str = "LC202610060018";

/// The settings calling `upstream` with the key its scripted (`start`) replies check.
fn checked_key_config(upstream: &MockUpstream) -> ServerConfig {
    ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some(upstream::TEST_KEY.into()),
        }),
        ..ServerConfig::default()
    }
}

/// The server over `store` (a window of 6) calling `upstream` with the key it checks.
fn door(store: Arc<dyn Store>, upstream: &MockUpstream) -> App {
    door_with(store, checked_key_config(upstream))
}

/// The server over `store` (a window of 6) with `config`.
fn door_with(store: Arc<dyn Store>, config: ServerConfig) -> App {
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    App::new(app(memory, config))
}

/// `POST /v1/chat/completions` with `body`, as `conversation` when given.
fn completion(conversation: Option<&[u8]>, body: &Value) -> Request<axum::body::Body> {
    let mut r = json_request(Method::POST, "/v1/chat/completions", body);
    if let Some(id) = conversation {
        let value = HeaderValue::from_bytes(id).expect("a header value");
        r.headers_mut().insert("x-chatmem-conversation", value);
    }
    r
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
        let upstream = MockUpstream::start(vec![
            text("订单 LC202610060018 尚未发货。"),
            text("LC202610060018 未发货，可以退。"),
            text("请提供订单号。"),
        ])
        .await;
        let server =
            door(Arc::new(InMemoryStore::new()), &upstream).with_authorization("Bearer client-key-is-not-forwarded");
        let turn = |conversation: &'static str, text: &'static str| {
            server.send(completion(Some(conversation.as_bytes()), &request(text, stream)))
        };
        let answer = |r: Answer| {
            assert_eq!(r.status, StatusCode::OK);
            if stream {
                let (text, done) = sse_text(&r.text());
                assert!(done, "the stream ends with [DONE]");
                text
            } else {
                let body = r.json();
                assert_eq!(body["object"], "chat.completion");
                body["choices"][0]["message"]["content"]
                    .as_str()
                    .expect("content")
                    .to_owned()
            }
        };
        let first = answer(turn("app-user-42-aftersale", "我的订单是 LC202610060018，还没发货。").await);
        assert!(first.contains(ORDER));
        let second = answer(turn("app-user-42-aftersale", "那单能退吗？").await);
        assert!(second.contains(ORDER), "{second}");
        let other = answer(turn("app-user-43-aftersale", "那单能退吗？").await);
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
    let upstream = MockUpstream::start(vec![text("never")]).await;
    let server = door(Arc::new(InMemoryStore::new()), &upstream);
    let r = server.send(completion(None, &request("hi", false))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let body = r.json();
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
    let upstream = MockUpstream::start(vec![text("收到。")]).await;
    let server = door(Arc::new(InMemoryStore::new()), &upstream);
    let post = |header: &'static [u8]| server.send(completion(Some(header), &request("hi", false)));
    let r = post(b"\xff\xfe").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let body = r.json();
    assert_eq!(
        body["error"]["message"], "the X-Chatmem-Conversation header is not UTF-8 text",
        "{body}"
    );
    assert!(upstream.requests().is_empty());

    let r = post("订单-LC202610060018".as_bytes()).await;
    assert_eq!(r.status, StatusCode::OK);
    let window = server
        .get("/v1/conversations/%E8%AE%A2%E5%8D%95-LC202610060018/messages")
        .await
        .json();
    assert_eq!(window["conversation"], "订单-LC202610060018");
    assert_eq!(window["messages"].as_array().map(Vec::len), Some(3), "{window}");
}

/// The official-protocol client (async-openai) pointed at `chatmem serve`: only the base URL
/// and one header change, and turn 2 still knows the order. On a loopback port: the client
/// talks HTTP.
#[tokio::test(flavor = "multi_thread")]
async fn an_openai_client_gets_memory_with_one_header() {
    use async_openai::Client;
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestSystemMessageArgs, ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    use futures_util::StreamExt;

    let upstream = MockUpstream::canned(vec![
        Canned::json(200, &upstream::completion("订单 LC202610060018 尚未发货。")),
        Canned::sse(
            upstream::chunks(&["LC202610060018 ", "未发货，可以退。"], false),
            Duration::ZERO,
        ),
    ])
    .await;
    let router = app(
        memory(WindowPolicy::messages(6), Retention::DropEvicted),
        door_config(&upstream),
    );
    let base = chatmem_test::loopback::serve(router).await.url();
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
    let turn2 = roles_and_texts(&upstream.received()[1].json);
    assert!(
        turn2.iter().any(|(role, t)| role == "user" && t.contains(ORDER)),
        "memory reached the model"
    );
}

/// `GET /v1/models` is the upstream's list as it came, also through async-openai (on a
/// loopback port: the client talks HTTP).
#[tokio::test(flavor = "multi_thread")]
async fn models_are_the_upstreams_list() {
    use async_openai::Client;
    use async_openai::config::OpenAIConfig;

    let upstream = MockUpstream::start(Vec::new()).await;
    let r = door(Arc::new(InMemoryStore::new()), &upstream).get("/v1/models").await;
    assert_eq!(r.status, StatusCode::OK);
    let body = r.json();
    assert_eq!(body["object"], "list");
    assert_eq!(
        body["data"][1]["owned_by"], "chatmem-test",
        "the upstream's fields pass through"
    );

    let memory = ChatMemory::builder(Arc::new(InMemoryStore::new()) as Arc<dyn Store>)
        .build()
        .expect("valid memory settings");
    let base = chatmem_test::loopback::serve(app(memory, checked_key_config(&upstream)))
        .await
        .url();
    let client = Client::with_config(OpenAIConfig::new().with_api_base(format!("{base}/v1")));
    let list = client.models().list().await.expect("an OpenAI client lists models");
    let ids: Vec<&str> = list.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["mock-model", "mock-reasoner"]);
}

/// Without an upstream: 503; with an upstream that fails: 502 naming its status, counted
/// in the metrics.
#[tokio::test]
async fn models_without_or_with_a_failing_upstream() {
    let server = door_with(Arc::new(InMemoryStore::new()), ServerConfig::default());
    let r = server.get("/v1/models").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let body = r.json();
    assert_eq!(body["error"]["code"], "no_upstream", "{body}");

    let upstream = MockUpstream::start(Vec::new()).await;
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some("a-key-the-upstream-refuses".into()),
        }),
        ..ServerConfig::default()
    };
    let server = door_with(Arc::new(InMemoryStore::new()), config);
    let r = server.get("/v1/models").await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY);
    let body = r.json();
    assert_eq!(body["error"]["code"], "upstream_auth", "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("401"), "the upstream's status is named: {message}");
    assert!(!message.contains("a-key-the-upstream-refuses"), "{message}");
    let metrics = server.get("/metrics").await.text();
    assert!(
        metrics.contains("chatmem_upstream_errors_total{kind=\"auth\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"chatmem_http_requests_total{route="/v1/models",method="GET",status="502"} 1"#),
        "{metrics}"
    );
}

/// An upstream that refuses a chat call as a bad request: the client gets the 400 (the
/// `openai` SDK then does not retry it), counted by kind, nothing committed.
#[tokio::test]
async fn an_upstream_400_reaches_the_client_counted_and_nothing_is_committed() {
    let upstream = MockUpstream::start(vec![upstream::Reply::Status(400)]).await;
    let server = door(Arc::new(InMemoryStore::new()), &upstream);
    let r = server.send(completion(Some(b"c1"), &request("hi", false))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let body = r.json();
    assert!(body["error"]["message"].is_string(), "{body}");
    let metrics = server.get("/metrics").await.text();
    assert!(
        metrics.contains("chatmem_upstream_errors_total{kind=\"invalid_request\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("chatmem_commits_total 0"), "{metrics}");
}

// ---------------------------------------------------------------------------------------------
// The pass-through proxy, against `MockUpstream::canned`.

/// The upstream key the server is configured with (a hostile upstream echoes it).
const KEY: &str = "sk-secret-123";

fn memory(policy: WindowPolicy, retention: Retention) -> ChatMemory<Arc<dyn Store>> {
    ChatMemory::builder(Arc::new(InMemoryStore::new()) as Arc<dyn Store>)
        .policy(policy)
        .retention(retention)
        .build()
        .expect("valid memory settings")
}

/// The settings calling `upstream` with [`KEY`].
fn door_config(upstream: &MockUpstream) -> ServerConfig {
    ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some(KEY.into()),
        }),
        ..ServerConfig::default()
    }
}

/// The server over `memory` calling `upstream` with [`KEY`].
fn proxy(memory: ChatMemory<Arc<dyn Store>>, upstream: &MockUpstream) -> App {
    App::new(app(memory, door_config(upstream)))
}

/// A chat completion for `conversation` with `body`.
async fn post(server: &App, conversation: &str, body: &Value) -> Answer {
    server.send(completion(Some(conversation.as_bytes()), body)).await
}

/// The window of `conversation` (system message first), or `None` when it does not exist.
async fn window(server: &App, conversation: &str) -> Option<Vec<Value>> {
    let r = server.get(&format!("/v1/conversations/{conversation}/messages")).await;
    if r.status == StatusCode::NOT_FOUND {
        return None;
    }
    r.json()["messages"].as_array().cloned()
}

async fn metrics(server: &App) -> String {
    server.get("/metrics").await.text()
}

/// `body` without its `messages`.
fn without_messages(body: &Value) -> Map<String, Value> {
    let mut map = body.as_object().expect("an object").clone();
    map.shift_remove("messages");
    map
}

/// Every field a client may send (the issue's list, provider extras and a field nobody knows
/// yet), in an order no serializer would choose.
fn every_field(user: &str) -> Value {
    json!({
        "model": "gpt-5-mini",
        "unknown_future_field": [1, {"x": null}],
        "messages": [
            {"role": "developer", "content": "Answer with the order number."},
            {"role": "user", "content": user}
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "order", "strict": true,
            "schema": {"type": "object", "properties": {"order": {"type": "string"}},
                "required": ["order"], "additionalProperties": false}}},
        "tools": [{"type": "function", "function": {"name": "order_status", "description": "Look an order up",
            "strict": true, "parameters": {"type": "object", "properties": {"order": {"type": "string"}},
                "required": ["order"], "additionalProperties": false}}}],
        "tool_choice": {"type": "function", "function": {"name": "order_status"}},
        "parallel_tool_calls": false,
        "seed": 42,
        "n": 1,
        "logprobs": true,
        "top_logprobs": 2,
        "user": "app-user-42",
        "reasoning_effort": "low",
        "metadata": {"app": "aftersale"},
        "store": false,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.25,
        "logit_bias": {"1734": -100},
        "service_tier": "auto",
        "prediction": {"type": "content", "content": "{\"order\":"},
        "modalities": ["text"],
        "prompt_cache_key": "aftersale-v1",
        "verbosity": "low",
        "safety_identifier": "hash-of-user-42",
        "top_k": 40,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "max_completion_tokens": 256,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "stream": false
    })
}

/// The upstream receives the client's JSON as sent (every field, known or not, in
/// its order and types), `messages` replaced by memory's window plus the new message; the
/// answer reaches the client byte for byte; `developer` is kept with its role, once, first.
#[tokio::test(flavor = "multi_thread")]
async fn every_field_reaches_the_upstream_in_order_and_the_answer_comes_back_byte_for_byte() {
    let answers = [
        Canned::json(200, &upstream::completion("{\"order\":\"LC202610060018\"}")),
        Canned::json(200, &upstream::completion("{\"order\":\"LC202610060018\"}")),
    ];
    let upstream = MockUpstream::canned(answers.to_vec()).await;
    let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);

    let first = every_field("我的订单是 LC202610060018。");
    let r = post(&server, "c1", &first).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.body.to_vec(), answers[0].body(), "byte for byte");
    let second = every_field("那单能退吗？");
    let r = post(&server, "c1", &second).await;
    assert_eq!(r.body.to_vec(), answers[1].body());

    let received = upstream.received();
    assert_eq!(received.len(), 2);
    for (sent, got) in [&first, &second].into_iter().zip(&received) {
        let sent_keys: Vec<&String> = sent.as_object().expect("object").keys().collect();
        let got_keys: Vec<&String> = got.json.as_object().expect("object").keys().collect();
        assert_eq!(got_keys, sent_keys, "every field, in the client's order");
        assert_eq!(
            without_messages(&got.json),
            without_messages(sent),
            "values and types as sent"
        );
        assert_eq!(got.headers["authorization"], format!("Bearer {KEY}"));
    }
    assert_eq!(received[0].json["messages"], first["messages"]);
    assert_eq!(
        received[1].json["messages"],
        json!([
            {"role": "developer", "content": "Answer with the order number."},
            {"role": "user", "content": "我的订单是 LC202610060018。"},
            {"role": "assistant", "content": "{\"order\":\"LC202610060018\"}"},
            {"role": "user", "content": "那单能退吗？"}
        ]),
        "memory's window (the developer message once, first) and the new message"
    );
    let stored = window(&server, "c1").await.expect("stored");
    assert_eq!(stored[0]["role"], "developer");
    assert_eq!(stored.iter().filter(|m| m["role"] == "developer").count(), 1);
    assert_eq!(stored.len(), 5);
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(r#"chatmem_upstream_tokens_total{kind="cached_prompt"} 32"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"chatmem_upstream_responses_total{status="200"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("chatmem_upstream_request_duration_seconds_count 2"),
        "{metrics}"
    );
}

/// Content as a list of parts, for every role that takes them (an assistant's refusal
/// too), is stored and sent to the upstream as the client sent it; a part a role does not
/// take is refused naming the message, before any call.
#[tokio::test(flavor = "multi_thread")]
async fn content_parts_of_every_role_reach_the_upstream_as_sent() {
    let upstream = MockUpstream::canned(vec![
        Canned::json(200, &upstream::completion("LC202610060018 未发货，可以退。")),
        Canned::json(200, &upstream::completion("已退款。")),
    ])
    .await;
    let server = proxy(memory(WindowPolicy::messages(20), Retention::DropEvicted), &upstream);
    let text = |t: &str| json!({"type": "text", "text": t});
    let said = json!([
        {"role": "system", "content": [text("你是邻里仓售后。"), text("Answer briefly.")]},
        {"role": "user", "content": "Can you write my essay?"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
        {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
        {"role": "assistant", "content": [text("Let me check.")], "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [text("{\"status\":"), text("\"not shipped\"}")]},
        {"role": "user", "content": "那单能退吗？"}
    ]);
    let r = post(&server, "parts", &json!({"model": "m", "messages": said})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(
        &server,
        "parts",
        &json!({"model": "m", "messages": [{"role": "user", "content": [text("退吧。")]}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let received = upstream.received();
    assert_eq!(
        received[0].json["messages"], said,
        "the first call: the messages as sent"
    );
    let mut expected = said.as_array().expect("array").clone();
    expected.push(json!({"role": "assistant", "content": "LC202610060018 未发货，可以退。"}));
    expected.push(json!({"role": "user", "content": [text("退吧。")]}));
    assert_eq!(received[1].json["messages"], Value::Array(expected.clone()));
    let stored = window(&server, "parts").await.expect("stored");
    let stored: Vec<Value> = stored
        .into_iter()
        .map(|mut m| {
            let m = m.as_object_mut().expect("object");
            m.shift_remove("seq");
            Value::Object(m.clone())
        })
        .collect();
    expected.push(json!({"role": "assistant", "content": "已退款。"}));
    assert_eq!(stored, expected, "the window holds every message as sent");

    let image = json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}});
    for (messages, param) in [
        (
            json!([{"role": "system", "content": [text("x"), image]}, {"role": "user", "content": "hi"}]),
            "messages[0]",
        ),
        (
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "input_audio"}]}]),
            "messages[1]",
        ),
    ] {
        let r = post(&server, "refused", &json!({"model": "m", "messages": messages})).await;
        assert_eq!(r.status, 400, "{messages}");
        let e: Value = r.json();
        assert_eq!(e["error"]["param"], param, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .expect("message")
                .contains("part is not allowed for role"),
            "{e}"
        );
    }
    assert_eq!(upstream.received().len(), 2, "nothing refused reached the upstream");
}

/// Streams pass through byte for byte, with and without `stream_options.include_usage`
/// (nothing added to the request, no usage chunk the client did not ask for), and the turn
/// is committed before `[DONE]` reaches the client.
#[tokio::test(flavor = "multi_thread")]
async fn streams_pass_through_byte_for_byte_with_and_without_usage() {
    for include_usage in [false, true] {
        let canned = Canned::sse(
            upstream::chunks(&["订单 ", "LC202610060018 ", "尚未发货。"], include_usage),
            Duration::from_millis(5),
        );
        let upstream = MockUpstream::canned(vec![canned.clone()]).await;
        let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
        let mut sent = json!({"model": "mock-model", "stream": true,
            "messages": [{"role": "user", "content": "我的订单是 LC202610060018。"}]});
        if include_usage {
            sent["stream_options"] = json!({"include_usage": true});
        }
        let r = post(&server, "c1", &sent).await;
        assert_eq!(r.status, 200);
        assert!(
            r.headers["content-type"]
                .to_str()
                .expect("text")
                .starts_with("text/event-stream")
        );
        assert_eq!(r.body.to_vec(), canned.body(), "usage {include_usage}");
        // `[DONE]` came after the commit: the answer is in memory now.
        let stored = window(&server, "c1").await.expect("committed");
        assert_eq!(stored[1]["content"], "订单 LC202610060018 尚未发货。");
        assert_eq!(upstream.received()[0].json, sent, "the request as sent");
    }
}

/// `n` > 1 is refused naming `n`, before any upstream call; chatmem's own errors have
/// OpenAI's shape (`message`, `type`, `param`, `code`) and the request id.
#[tokio::test]
async fn n_above_one_and_bad_messages_are_refused_in_openais_shape_before_any_call() {
    let upstream = MockUpstream::canned(Vec::new()).await;
    let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
    let cases = [
        (
            json!({"model": "m", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
            "n",
        ),
        (
            json!({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "developer", "content": "x"}]}),
            "messages[1]",
        ),
        (json!({"model": "m", "stream": true, "n": 3, "messages": []}), "n"),
    ];
    for (body, param) in cases {
        let r = post(&server, "c1", &body).await;
        assert_eq!(r.status, 400, "{body}");
        let request_id = r.headers["x-request-id"].to_str().expect("id").to_owned();
        let e: Value = r.json();
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["code"], "invalid_request", "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
        assert_eq!(e["error"]["request_id"], request_id, "{e}");
        assert!(e["error"]["message"].as_str().expect("message").contains(param), "{e}");
    }
    assert!(upstream.received().is_empty(), "nothing reached the upstream");
}

/// A hostile upstream's error body: it echoes the key and a secret.
fn hostile(status: u16) -> Canned {
    let body = json!({"error": {
        "message": format!("rejected: the key {KEY} was sent; password=hunter2"),
        "type": "invalid_request_error", "param": "messages", "code": "rejected"}});
    Canned::json(status, &body.to_string())
}

/// The upstream's errors keep their meaning for the client, plain and streaming
/// alike (a failure before the first byte has the same status), and chatmem's secrets stay
/// in: the key is masked in what is passed on, and the text of a 401/403/5xx is never shown.
/// A refusal passed on names the request, as every error does, and keeps the headers that
/// say when to retry and what the rate limits are. Nothing is committed.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_errors_keep_their_meaning_and_the_key_stays_in() {
    let said = |stream: bool| json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    for status in [400u16, 404, 409, 413, 422, 429, 401, 403, 500, 502, 503] {
        let canned = hostile(status)
            .header("retry-after", "7")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-tokens", "6m0s");
        let upstream = MockUpstream::canned(vec![canned.clone(), canned]).await;
        let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
        for stream in [false, true] {
            let r = post(&server, "c1", &said(stream)).await;
            let answered = r.status.as_u16();
            let retry_after = r.header("retry-after").map(str::to_owned);
            let remaining = r.header("x-ratelimit-remaining-requests").map(str::to_owned);
            let reset = r.header("x-ratelimit-reset-tokens").map(str::to_owned);
            let request_id = r.header("x-request-id").expect("every answer is named").to_owned();
            let text = r.text();
            assert!(!text.contains(KEY), "{status} {stream}: {text}");
            let e: Value = serde_json::from_str(&text).expect("a JSON error");
            assert_eq!(
                e["error"]["request_id"],
                request_id.as_str(),
                "{status} {stream}: {text}"
            );
            match status {
                400 | 404 | 409 | 413 | 422 | 429 => {
                    assert_eq!(answered, status, "{text}");
                    assert_eq!(e["error"]["param"], "messages", "the upstream's body: {text}");
                    assert!(text.contains("the key *** was sent"), "{text}");
                    assert_eq!(retry_after.as_deref(), Some("7"));
                    assert_eq!(remaining.as_deref(), Some("0"));
                    assert_eq!(reset.as_deref(), Some("6m0s"));
                }
                401 | 403 => {
                    assert_eq!(answered, 502, "{text}");
                    assert_eq!(e["error"]["code"], "upstream_auth", "{text}");
                    assert!(!text.contains("hunter2") && !text.contains("rejected"), "{text}");
                }
                _ => {
                    assert_eq!(answered, 502, "{text}");
                    assert_eq!(e["error"]["code"], "upstream_error", "{text}");
                    assert_eq!(e["error"]["type"], "server_error", "{text}");
                    assert!(e["error"]["message"].as_str().expect("m").contains(&status.to_string()));
                    assert!(!text.contains("hunter2") && !text.contains("rejected"), "{text}");
                }
            }
        }
        assert_eq!(window(&server, "c1").await, None, "{status}: nothing committed");
    }

    // An error inside a 200, plain or mid-stream: chatmem's 502, not the upstream's text.
    let upstream = MockUpstream::canned(vec![
        hostile(200),
        Canned::sse(
            vec![
                upstream::chunks(&["a"], false)[0].clone(),
                format!("data: {}\n\n", String::from_utf8_lossy(&hostile(200).body())),
            ],
            Duration::ZERO,
        ),
    ])
    .await;
    let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
    for stream in [false, true] {
        let r = post(&server, "c1", &said(stream)).await;
        assert_eq!(r.status, if stream { 200 } else { 502 });
        let text = r.text();
        assert!(text.contains("upstream_error"), "{text}");
        assert!(!text.contains("hunter2") && !text.contains(KEY), "{text}");
    }
    assert_eq!(window(&server, "c1").await, None, "an error in a 200 commits nothing");

    // Not OpenAI's shape: chatmem's, the key masked.
    let upstream = MockUpstream::canned(vec![Canned::json(400, &format!("bad key {KEY}, password=hunter2"))]).await;
    let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
    let r = post(&server, "c1", &said(false)).await;
    assert_eq!(r.status, 400);
    let request_id = r.header("x-request-id").expect("named").to_owned();
    let text = r.text();
    assert!(!text.contains(KEY) && text.contains("bad key ***"), "{text}");
    assert_eq!(r.json()["error"]["request_id"], request_id.as_str(), "{text}");

    // An answer passes on the upstream's rate limits, plain and streamed.
    let limited = |c: Canned| c.header("x-ratelimit-remaining-tokens", "149984");
    let upstream = MockUpstream::canned(vec![
        limited(Canned::json(200, &upstream::completion("ok"))),
        limited(Canned::sse(upstream::chunks(&["ok"], false), Duration::ZERO)),
    ])
    .await;
    let server = proxy(memory(WindowPolicy::messages(6), Retention::DropEvicted), &upstream);
    for stream in [false, true] {
        let r = post(&server, "c1", &said(stream)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.header("x-ratelimit-remaining-tokens"),
            Some("149984"),
            "stream: {stream}"
        );
    }

    // A timeout is a 504, plain or streaming.
    let slow = |gap| Canned::sse(upstream::chunks(&["late"], false), gap);
    let upstream = MockUpstream::canned(vec![
        Canned {
            chunks: vec![(Duration::from_secs(2), "{}".into())],
            ..Canned::json(200, "")
        },
        slow(Duration::from_secs(2)),
    ])
    .await;
    let mut config = door_config(&upstream);
    config.limits = Limits {
        upstream_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = App::new(app(memory(WindowPolicy::messages(6), Retention::DropEvicted), config));
    for stream in [false, true] {
        let r = post(&server, "c1", &said(stream)).await;
        let status = r.status;
        let text = r.text();
        if stream {
            // The head came in time; the first chunk did not: the stream ends with an error event.
            assert_eq!(status, 200, "{text}");
            assert!(text.contains("upstream_timeout") && !text.contains("[DONE]"), "{text}");
        } else {
            assert_eq!(status, 504, "{text}");
            assert!(text.contains("upstream_timeout"), "{text}");
        }
    }
    assert_eq!(window(&server, "c1").await, None, "a timeout commits nothing");

    // Nothing listening: 502.
    let port = chatmem_test::loopback::free_port();
    let config = ServerConfig {
        upstream: Some(Upstream {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            api_key: Some(KEY.into()),
        }),
        ..ServerConfig::default()
    };
    let server = App::new(app(memory(WindowPolicy::messages(6), Retention::DropEvicted), config));
    for stream in [false, true] {
        let r = post(&server, "c1", &said(stream)).await;
        assert_eq!(r.status, 502);
        let e: Value = r.json();
        assert_eq!(e["error"]["code"], "upstream_unavailable", "{e}");
    }
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(r#"chatmem_upstream_errors_total{kind="unavailable"} 2"#),
        "{metrics}"
    );
}

/// One connection pool, built at start: every call (plain, streamed, `/v1/models`)
/// goes over the one kept-alive connection. On a loopback port, as a client's calls come: in
/// process the next call can start before hyper has handed the previous upstream connection
/// back to its pool, and then opens a second one.
#[tokio::test(flavor = "multi_thread")]
async fn one_connection_serves_every_call() {
    let upstream = MockUpstream::canned(Vec::new()).await;
    let router = app(
        memory(WindowPolicy::messages(6), Retention::DropEvicted),
        door_config(&upstream),
    );
    let base = chatmem_test::loopback::serve(router).await.url();
    let http = reqwest::Client::new();
    for i in 0..6 {
        let body =
            json!({"model": "m", "stream": i % 2 == 1, "messages": [{"role": "user", "content": format!("q{i}")}]});
        let r = http
            .post(format!("{base}/v1/chat/completions"))
            .header("X-Chatmem-Conversation", "c1")
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 200);
        let text = r.text().await.expect("body");
        assert!(text.contains(&format!("echo: q{i}")), "{text}");
        // hyper puts a connection back in its pool when its connection task sees the body
        // end, an instant after the last byte reached the door: a call made in that instant
        // opens another. The pause is what a client's next turn always leaves.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = reqwest::get(format!("{base}/v1/models")).await.expect("models");
    assert_eq!(r.status(), 200);
    assert_eq!(upstream.received().len(), 6);
    assert_eq!(upstream.connections(), 1, "one connection, kept alive and reused");
}

/// A client that hangs up mid-stream commits nothing, and a stream the upstream cuts ends
/// with an error event (no `[DONE]`) and commits nothing. On a loopback port: hanging up is the
/// client's connection closing under the listener.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_does_not_finish_commits_nothing() {
    let pieces = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let upstream = MockUpstream::canned(vec![
        Canned::sse(upstream::chunks(&pieces, false), Duration::from_millis(150)),
        Canned {
            cut: true,
            ..Canned::sse(
                upstream::chunks(&pieces, false)[..3].to_vec(),
                Duration::from_millis(50),
            )
        },
    ])
    .await;
    let router = app(
        memory(WindowPolicy::messages(6), Retention::DropEvicted),
        door_config(&upstream),
    );
    let server = App::new(router.clone());
    let base = chatmem_test::loopback::serve(router).await.url();
    let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("X-Chatmem-Conversation", "hung-up")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 200);
    let first = r.chunk().await.expect("a chunk").expect("some bytes");
    assert!(!first.is_empty());
    drop(r);
    // Past the upstream's whole answer.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(
        window(&server, "hung-up").await,
        None,
        "a client that hung up commits nothing"
    );

    let r = post(&server, "cut", &body).await;
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(
        text.contains("upstream_unavailable") && !text.contains("[DONE]"),
        "{text}"
    );
    assert_eq!(window(&server, "cut").await, None, "a cut stream commits nothing");
}

/// A client that resends its whole growing conversation (the `openai` SDK's
/// `messages.append(answer)`, echo fields included) over five turns, with a window of 4
/// messages: memory stores what was said, once, and the upstream receives memory's window,
/// never the client's list. Under both retentions.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_resending_its_whole_conversation_stores_what_was_said() {
    const SYSTEM: &str = "你是邻里仓售后。";
    for retention in [Retention::DropEvicted, Retention::KeepHistory] {
        let upstream = MockUpstream::canned(Vec::new()).await;
        let server = proxy(memory(WindowPolicy::messages(4), retention), &upstream);
        let mut client = vec![json!({"role": "system", "content": SYSTEM})];
        let mut said: Vec<Value> = Vec::new();
        for turn in 1..=5 {
            let user = json!({"role": "user", "content": format!("u{turn}")});
            client.push(user.clone());
            said.push(user);
            let r = post(&server, "c1", &json!({"model": "m", "messages": client})).await;
            assert_eq!(r.status, 200, "turn {turn}");
            let answer: Value = r.json();
            // As the SDK sends an answer back: with `refusal` and `annotations`.
            let message = answer["choices"][0]["message"].clone();
            said.push(json!({"role": "assistant", "content": message["content"]}));
            client.push(message);

            let sent = &upstream.received()[turn - 1].json["messages"];
            let sent = sent.as_array().expect("messages");
            assert_eq!(sent[0], json!({"role": "system", "content": SYSTEM}), "turn {turn}");
            let rest = &sent[1..];
            assert!(
                rest.len() <= 5,
                "turn {turn}: the window (4) and the new message, not the client's list: {rest:?}"
            );
            let upto = said.len() - 1; // what was said before this turn's answer
            assert_eq!(
                rest,
                &said[upto - rest.len()..upto],
                "turn {turn}: the end of what was said"
            );
        }
        let stored = window(&server, "c1").await.expect("stored");
        assert!(stored.len() <= 5, "{stored:?}");
        assert_eq!(&stored[1..], &said[said.len() - (stored.len() - 1)..], "{retention:?}");
        if retention == Retention::KeepHistory {
            let history = server.get("/v1/conversations/c1/history").await.json();
            let history = history["messages"].as_array().expect("messages");
            assert_eq!(history[0]["role"], "system");
            assert_eq!(&history[1..], said.as_slice(), "what was said, each once");
        }
    }
}
