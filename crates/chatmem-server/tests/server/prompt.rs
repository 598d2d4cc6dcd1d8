//! The prompt dry run, `POST /v1/conversations/{id}/prompt`: what the next model call would be
//! sent (the system message with the summary, the window, the new messages; old tool results
//! cleared as the policy says), equal to what the OpenAI door sends upstream, and nothing
//! committed; its bad input refused in the one error shape, and one tenant's conversation never
//! seen by another.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, ClearToolResults, ConversationId, InMemoryStore, Message,
    ModelError, Store, Summarizer, WindowPolicy,
};
use chatmem_server::{Auth, ServerConfig, app};
use chatmem_test::app::{App, json_request, request};
use chatmem_test::upstream::{MockUpstream, text};
use serde_json::{Value, json};

use super::clearing::{assert_first_two_cleared, is_placeholder, order_record, over, result_of, server, tool_turns};

const AFTERSALE: &str = "/v1/conversations/aftersale/prompt";

/// A system message and two turns.
fn aftersale() -> Value {
    json!({"messages": [
        {"role": "system", "content": "你是邻里仓售后。"},
        {"role": "user", "content": "我的订单是 LC202610060018，还没发货。"},
        {"role": "assistant", "content": "收到，订单 LC202610060018 尚未发货。", "reasoning_content": "look it up", "metadata": {"ui": 1}},
        {"role": "user", "content": "什么时候发？"},
        {"role": "assistant", "content": "明天。"},
    ]})
}

fn roles(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("a role"))
        .collect()
}

fn contents(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect()
}

/// The prompt is the system message, the window that stays, and the new messages, as the
/// door sends them (no reasoning, no metadata); its tokens are counted; nothing is committed:
/// the window, history and the stored version are as they were.
#[tokio::test]
async fn the_dry_run_is_system_window_and_new_messages_and_commits_nothing() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let server = over(Arc::clone(&store), WindowPolicy::messages(5), ServerConfig::default());
    let written = server
        .post_json("/v1/conversations/aftersale/messages", &aftersale())
        .await;
    assert_eq!(written.status, StatusCode::OK, "{}", written.text());
    let key = ConversationId::new("aftersale").expect("an id");
    let before = store.load(&key).await.expect("a load");
    let window = server.get("/v1/conversations/aftersale/messages").await.json();
    let history = server.get("/v1/conversations/aftersale/history").await.json();

    let new = json!([{"role": "user", "content": "能改地址吗？"}, {"role": "assistant", "content": "可以。"}]);
    let r = server.post_json(AFTERSALE, &json!({"messages": new})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    assert_eq!(body["conversation"], "aftersale");
    // A window of 5 (the system message included) with two more messages keeps the newest two
    // stored ones.
    assert_eq!(
        roles(&body["messages"]),
        ["system", "user", "assistant", "user", "assistant"]
    );
    assert_eq!(
        contents(&body["messages"]),
        ["你是邻里仓售后。", "什么时候发？", "明天。", "能改地址吗？", "可以。"]
    );
    assert_eq!(body["already_stored"], 0);
    assert_eq!(body["cleared"], json!({"results": 0, "inputs": 0, "tokens_saved": 0}));
    assert!(body["tokens"].as_u64().is_some_and(|t| t > 20), "{body}");

    // Nothing of it was written.
    let after = store.load(&key).await.expect("a load");
    assert_eq!(after.version, before.version);
    assert_eq!(after.next_seq, before.next_seq);
    assert_eq!(server.get("/v1/conversations/aftersale/messages").await.json(), window);
    assert_eq!(server.get("/v1/conversations/aftersale/history").await.json(), history);

    // An empty list: the prompt as it stands, which is the window; never reasoning or metadata.
    let r = server.post_json(AFTERSALE, &json!({"messages": []})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    assert_eq!(roles(&body["messages"]), roles(&window["messages"]));
    assert_eq!(contents(&body["messages"]), contents(&window["messages"]));
    let stored = server.get("/v1/conversations/aftersale/history").await.json();
    assert!(stored.to_string().contains("reasoning_content"), "history keeps it");
    let whole = server
        .post_json(AFTERSALE, &json!({"messages": [], "policy": {"max_messages": 10}}))
        .await
        .json();
    assert_eq!(
        roles(&whole["messages"]),
        ["system", "user", "assistant", "user", "assistant"]
    );
    for m in whole["messages"].as_array().expect("messages") {
        assert!(
            m.get("reasoning_content").is_none() && m.get("metadata").is_none(),
            "{m}"
        );
    }

    // The whole conversation resent with a new message: what memory holds is left out.
    let mut resent = aftersale()["messages"].as_array().expect("messages").clone();
    resent.push(json!({"role": "user", "content": "能改地址吗？"}));
    let r = server.post_json(AFTERSALE, &json!({"messages": resent})).await;
    let body = r.json();
    assert_eq!(body["already_stored"], 4, "{body}");
    // The window starts at a user message.
    assert_eq!(
        contents(&body["messages"]),
        ["你是邻里仓售后。", "什么时候发？", "明天。", "能改地址吗？"]
    );

    // A conversation that does not exist: the prompt is the new messages, and it still does not.
    let r = server
        .post_json("/v1/conversations/nobody-yet/prompt", &json!({"messages": new}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(contents(&r.json()["messages"]), ["能改地址吗？", "可以。"]);
    let missing = server.get("/v1/conversations/nobody-yet/messages").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(store.list(None, 10).await.expect("a list").ids.len(), 1);
}

/// A summary model that answers at once.
#[derive(Debug)]
struct Fixed;

#[async_trait::async_trait]
impl ChatModel for Fixed {
    async fn complete(&self, _: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        Ok(ChatResponse {
            message: Message::assistant("the order is LC202610060018"),
            usage: None,
            finish_reason: None,
        })
    }
}

/// With a summary, the prompt's system message carries it, as the door's does.
#[tokio::test]
async fn the_summary_rides_in_the_system_message() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(3))
        .summarizer(Summarizer::new(Fixed))
        .build()
        .expect("valid settings");
    let server = App::new(app(memory, ServerConfig::default()));
    let r = server
        .post_json("/v1/conversations/aftersale/messages", &aftersale())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = server.post_json(AFTERSALE, &json!({"messages": []})).await.json();
    let system = body["messages"][0]["content"].as_str().expect("a system message");
    assert!(system.starts_with("你是邻里仓售后。"), "{system}");
    assert!(system.contains("the order is LC202610060018"), "{system}");
    assert_eq!(contents(&body["messages"])[1..], ["什么时候发？", "明天。"]);
}

/// With a policy that clears old tool results, the dry run shows the placeholders and what
/// was cleared, while history keeps the originals; a request's own policy clears the same way.
#[tokio::test]
async fn the_dry_run_shows_what_clearing_takes_out() {
    let clearing = ClearToolResults::new(1).expect("keep 1").trigger_tokens(300);
    let policy = WindowPolicy::tokens(4_000).with_clearing(clearing).expect("a policy");
    let server = server(policy, ServerConfig::default());
    let r = server
        .post_json("/v1/conversations/agent-1/messages", &json!({"messages": tool_turns()}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());

    let ask = json!({"messages": [{"role": "user", "content": "And the first one?"}]});
    let body = server.post_json("/v1/conversations/agent-1/prompt", &ask).await.json();
    let messages = &body["messages"];
    assert_first_two_cleared(messages, "the dry run");
    assert_eq!(body["cleared"]["results"], 2, "{body}");
    assert_eq!(body["cleared"]["inputs"], 0, "{body}");
    let saved = body["cleared"]["tokens_saved"].as_u64().expect("tokens saved");
    assert!(saved > 100, "{body}");
    let tokens = body["tokens"].as_u64().expect("tokens");
    assert!(tokens < 4_000, "the prompt counts what is sent: {tokens}");
    let history = server.get("/v1/conversations/agent-1/history").await.json();
    for n in 1..=3 {
        assert_eq!(result_of(&history["messages"], &format!("call_{n}")), order_record(n));
    }

    // A server that does not clear, and a request's policy that does, inputs too.
    let server = self::server(WindowPolicy::messages(20), ServerConfig::default());
    server
        .post_json("/v1/conversations/agent-1/messages", &json!({"messages": tool_turns()}))
        .await;
    let plain = server.post_json("/v1/conversations/agent-1/prompt", &ask).await.json();
    assert_eq!(result_of(&plain["messages"], "call_1"), order_record(1));
    assert_eq!(plain["cleared"]["results"], 0);
    let policy = json!({"clear_tool_results": {"keep": 1, "trigger_tokens": 10, "clear_inputs": true}});
    let mut asked = ask.clone();
    asked["policy"] = policy;
    let body = server
        .post_json("/v1/conversations/agent-1/prompt", &asked)
        .await
        .json();
    assert!(
        is_placeholder(result_of(&body["messages"], "call_1"), "get_order", "call_1"),
        "{body}"
    );
    assert_eq!(body["cleared"]["results"], 2, "{body}");
    assert_eq!(body["cleared"]["inputs"], 2, "{body}");
    assert!(body["tokens"].as_u64() < plain["tokens"].as_u64(), "{body}");
}

/// The dry run's messages are what the door then sends upstream for the same messages (a
/// request with only the new one, and one that resends the whole conversation).
#[tokio::test]
async fn the_dry_run_equals_what_the_door_sends() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let config = super::clearing::door_config(&upstream);
    let clearing = ClearToolResults::new(1).expect("keep 1").trigger_tokens(300);
    let policy = WindowPolicy::tokens(4_000).with_clearing(clearing).expect("a policy");
    let server = server(policy, config);
    let id = "agent-1";
    let mut conversation = vec![json!({"role": "system", "content": "You track orders."})];
    conversation.extend(tool_turns());
    let r = server
        .post_json(
            &format!("/v1/conversations/{id}/messages"),
            &json!({"messages": conversation}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());

    let new_only = vec![json!({"role": "user", "content": "And the first one?"})];
    let mut resent = conversation.clone();
    resent.extend(new_only.clone());
    for (n, messages) in [new_only, resent].into_iter().enumerate() {
        let id = format!("{id}-{n}");
        let r = server
            .post_json(
                &format!("/v1/conversations/{id}/messages"),
                &json!({"messages": conversation}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let dry = server
            .post_json(
                &format!("/v1/conversations/{id}/prompt"),
                &json!({"messages": messages}),
            )
            .await
            .json();
        assert_eq!(dry["cleared"]["results"], 2, "{dry}");

        upstream.push([text("The first order ships tomorrow.")]);
        let mut call = json_request(
            Method::POST,
            "/v1/chat/completions",
            &json!({"model": "mock-model", "messages": messages}),
        );
        call.headers_mut()
            .insert("x-chatmem-conversation", HeaderValue::from_str(&id).expect("a header"));
        let r = server.send(call).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(dry["messages"], upstream.last_request()["messages"], "request {n}");
    }
}

/// Bad input is refused as `POST …/messages` refuses it, in the one error shape.
#[tokio::test]
async fn bad_input_is_refused_in_the_one_shape() {
    let server = server(WindowPolicy::messages(20), ServerConfig::default());
    for (body, status, names) in [
        (json!({"messages": "hi"}), StatusCode::BAD_REQUEST, "messages"),
        (json!({}), StatusCode::BAD_REQUEST, "messages"),
        (json!([]), StatusCode::BAD_REQUEST, "request body"),
        (
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            StatusCode::BAD_REQUEST,
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]}),
            StatusCode::BAD_REQUEST,
            "messages[1]",
        ),
        (
            json!({"messages": [], "colour": "red"}),
            StatusCode::BAD_REQUEST,
            "colour",
        ),
        (
            json!({"messages": [], "policy": {"max_messages": 0}}),
            StatusCode::BAD_REQUEST,
            "max_messages",
        ),
        (
            json!({"messages": [], "policy": {"clear_tool_results": {"keep": 0}}}),
            StatusCode::BAD_REQUEST,
            "keep",
        ),
        (
            json!({"messages": vec![json!({"role": "user", "content": "x"}); 1001]}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "1000",
        ),
    ] {
        let r = server.post_json("/v1/conversations/c1/prompt", &body).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        let code = r.error_code();
        assert!(["invalid_request", "too_large"].contains(&code.as_str()), "{code}");
        let answer = r.json();
        let message = answer["error"]["message"].as_str().expect("a message");
        assert!(message.contains(names), "{body}: {message}");
    }
    // Not declared JSON: 415, as every POST.
    let mut plain = request(
        Method::POST,
        "/v1/conversations/c1/prompt",
        Body::from(r#"{"messages": []}"#),
    );
    plain
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("text/plain"));
    let r = server.send(plain).await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.text());
    assert_eq!(r.error_code(), "unsupported_media_type");
    // Another method: 405 with `Allow`.
    let r = server.get("/v1/conversations/c1/prompt").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.error_code(), "method_not_allowed");
    // An id over the limit.
    let long = format!("/v1/conversations/{}/prompt", "i".repeat(300));
    let r = server.post_json(&long, &json!({"messages": []})).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
}

/// One tenant's conversation is never in another's prompt, and a read-only token may ask.
#[tokio::test]
async fn another_tenants_conversation_is_never_seen() {
    let auth = Auth::from_toml(
        "[[token]]\ntoken = \"token-of-team-a-000\"\ntenant = \"team-a\"\n\n[[token]]\ntoken = \"token-of-team-b-000\"\ntenant = \"team-b\"\nwrite = false\n",
    )
    .expect("auth");
    let config = ServerConfig {
        auth: Some(auth),
        ..ServerConfig::default()
    };
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let server = over(Arc::clone(&store), WindowPolicy::messages(20), config);
    let a = server.as_bearer("token-of-team-a-000");
    let b = server.as_bearer("token-of-team-b-000");
    let r = a.post_json("/v1/conversations/aftersale/messages", &aftersale()).await;
    assert_eq!(r.status, StatusCode::OK);

    let ask = json!({"messages": [{"role": "user", "content": "hi"}]});
    let mine = a.post_json(AFTERSALE, &ask).await.json();
    assert_eq!(mine["messages"].as_array().map(Vec::len), Some(6));
    let r = b.post_json(AFTERSALE, &ask).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["messages"], json!([{"role": "user", "content": "hi"}]));
    let r = server.post_json(AFTERSALE, &ask).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.error_code(), "unauthorized");
    let keys = store.list(None, 10).await.expect("a list").ids;
    assert_eq!(
        keys.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["team-a/aftersale"]
    );
}
