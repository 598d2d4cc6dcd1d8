//! Old tool results cleared from the prompt, never from memory, everywhere the server sends or
//! shows a window: a request's own policy (the body's `"clear_tool_results"` object, the
//! query's flat `clear_tool_results.<field>` parameters) and its 400s, the OpenAI door (the
//! upstream receives the placeholder while `history` returns the original bytes), `/metrics`
//! and the inspector.

use std::sync::Arc;

use axum::http::{HeaderValue, Method, StatusCode};
use chatmem::{ChatMemory, ClearToolResults, InMemoryStore, Retention, Store, WindowPolicy};
use chatmem_server::{Limits, PolicyCaps, ServerConfig, Upstream, app};
use chatmem_test::app::{App, json_request};
use chatmem_test::upstream::{self as upstream, MockUpstream, text};
use serde_json::{Value, json};

use super::ui::article;

/// A tool result of some size: an order record, as JSON text.
pub(super) fn order_record(n: usize) -> String {
    let lines: Vec<Value> = (0..40)
        .map(|i| json!({"sku": format!("SKU-{n}-{i:03}"), "qty": i % 3 + 1, "note": "boxed, ships from Hangzhou"}))
        .collect();
    json!({"order": format!("LC2026100600{n:02}"), "status": "in transit", "lines": lines}).to_string()
}

/// Three tool uses (`get_order` for calls 1 and 2, `get_policy` for call 3), each answered,
/// then a closing answer.
pub(super) fn tool_turns() -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": "Where are my orders?"})];
    for (n, tool) in [(1, "get_order"), (2, "get_order"), (3, "get_policy")] {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}"), "type": "function", "function": {"name": tool, "arguments": format!("{{\"id\":{n}}}")}}
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{n}"), "content": order_record(n)}));
    }
    messages.push(json!({"role": "assistant", "content": "All three are in transit."}));
    messages
}

/// The content of the tool result answering `call` in a list of messages.
pub(super) fn result_of<'a>(messages: &'a Value, call: &str) -> &'a str {
    messages
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        .unwrap_or_else(|| panic!("no result of {call} in {messages}"))["content"]
        .as_str()
        .expect("text content")
}

/// The arguments of `call` in a list of messages.
fn arguments_of<'a>(messages: &'a Value, call: &str) -> &'a str {
    messages
        .as_array()
        .expect("messages")
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .find(|c| c["id"] == call)
        .unwrap_or_else(|| panic!("no call {call} in {messages}"))["function"]["arguments"]
        .as_str()
        .expect("arguments")
}

pub(super) fn is_placeholder(content: &str, tool: &str, call: &str) -> bool {
    let start = format!("[cleared: {tool} result for call {call}, ");
    content
        .strip_prefix(&start)
        .and_then(|rest| rest.strip_suffix(" tokens]"))
        .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 100))
}

/// `messages` (a window or a prompt of [`tool_turns`], keep 1) sends calls 1 and 2 cleared and
/// the excluded-or-newest call 3 whole.
pub(super) fn assert_first_two_cleared(messages: &Value, context: &str) {
    for call in ["call_1", "call_2"] {
        assert!(
            is_placeholder(result_of(messages, call), "get_order", call),
            "{context}: {messages}"
        );
    }
    assert_eq!(result_of(messages, "call_3"), order_record(3), "{context}");
}

/// The settings calling the mock `upstream` with its key.
pub(super) fn door_config(upstream: &MockUpstream) -> ServerConfig {
    ServerConfig {
        upstream: Some(Upstream {
            base_url: upstream.base_url.clone(),
            api_key: Some(upstream::TEST_KEY.into()),
        }),
        ..ServerConfig::default()
    }
}

/// A server over a memory keeping history with `policy`.
pub(super) fn server(policy: WindowPolicy, config: ServerConfig) -> App {
    over(Arc::new(InMemoryStore::new()), policy, config)
}

/// A server over `store`, keeping history, with `policy` and `config`.
pub(super) fn over(store: Arc<dyn Store>, policy: WindowPolicy, config: ServerConfig) -> App {
    let memory = ChatMemory::builder(store)
        .policy(policy)
        .retention(Retention::KeepHistory)
        .build()
        .expect("valid memory settings");
    App::new(app(memory, config))
}

/// A request's own policy clears (body and query alike); without it the window is whole, and
/// history always is.
#[tokio::test]
async fn a_requests_policy_clears_old_results_from_the_window_never_from_history() {
    let server = server(WindowPolicy::messages(20), ServerConfig::default());
    let url = "/v1/conversations/c1/messages";
    let clearing = json!({"keep": 1, "trigger_tokens": 10, "exclude_tools": ["get_policy"]});
    let r = server
        .post_json(
            url,
            &json!({"messages": tool_turns(), "policy": {"clear_tool_results": clearing}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let window = r.json()["messages"].clone();
    // Call 3 is the one kept; calls 1 and 2 are cleared, in place and with their ids.
    assert_first_two_cleared(&window, "the body's policy");
    assert_eq!(arguments_of(&window, "call_1"), "{\"id\":1}");

    // The same in a query, with the excluded tool the most recent use kept.
    for query in [
        "clear_tool_results.keep=1&clear_tool_results.trigger_tokens=10",
        "clear_tool_results.keep=1&clear_tool_results.trigger_tokens=10&clear_tool_results.exclude_tools=get_policy&clear_tool_results.exclude_tools=other",
    ] {
        let window = server.get(&format!("{url}?{query}")).await.json()["messages"].clone();
        assert_first_two_cleared(&window, query);
    }
    // Excluding `get_order` leaves only call 3 (the kept one) for clearing: nothing is.
    let window = server
        .get(&format!(
            "{url}?clear_tool_results.keep=1&clear_tool_results.trigger_tokens=10&clear_tool_results.exclude_tools=get_order"
        ))
        .await
        .json()["messages"]
        .clone();
    assert_eq!(result_of(&window, "call_1"), order_record(1));
    // `clear_inputs`: the cleared calls' arguments go as `{}`.
    let window = server
        .get(&format!(
            "{url}?clear_tool_results.keep=1&clear_tool_results.trigger_tokens=10&clear_tool_results.clear_inputs=true"
        ))
        .await
        .json()["messages"]
        .clone();
    assert_eq!(arguments_of(&window, "call_1"), "{}");
    assert_eq!(arguments_of(&window, "call_3"), "{\"id\":3}");

    // Without a policy: the server's, which does not clear; history keeps the originals.
    let whole = server.get(url).await.json()["messages"].clone();
    let history = server.get("/v1/conversations/c1/history").await.json()["messages"].clone();
    for n in 1..=3 {
        let call = format!("call_{n}");
        assert_eq!(result_of(&whole, &call), order_record(n));
        assert_eq!(result_of(&history, &call), order_record(n));
    }
}

/// Bad clearing is a 400 in the one error shape naming the field, and nothing is written.
#[tokio::test]
async fn bad_clearing_is_a_400_naming_the_field() {
    let server = server(WindowPolicy::tokens(4_000), ServerConfig::default());
    let url = "/v1/conversations/c1/messages";
    let pair = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]);
    for (clearing, names) in [
        (json!({"keep": 0}), "keep"),
        (json!({"keep": 1001}), "keep"),
        (json!({"keep": -1}), "keep"),
        (json!({"keep": 1.5}), "keep"),
        (json!({"keep": "3"}), "keep"),
        (json!({"trigger_tokens": -5}), "trigger_tokens"),
        (json!({"clear_at_least_tokens": 2.5}), "clear_at_least_tokens"),
        (
            json!({"trigger_tokens": 100, "clear_at_least_tokens": 500}),
            "trigger_tokens",
        ),
        (json!({"trigger_tokens": 5_000}), "max_tokens"),
        (json!({"exclude_tools": "get_order"}), "exclude_tools"),
        (json!({"exclude_tools": [3]}), "exclude_tools"),
        (json!({"exclude_tools": [""]}), "exclude_tools"),
        (json!({"exclude_tools": ["x".repeat(257)]}), "exclude_tools"),
        (json!({"clear_inputs": "yes"}), "clear_inputs"),
        (json!({"kep": 1}), "kep"),
        (json!([3]), "clear_tool_results"),
    ] {
        let r = server
            .post_json(
                url,
                &json!({"messages": pair, "policy": {"clear_tool_results": clearing}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{clearing}: {}", r.text());
        assert_eq!(r.error_code(), "invalid_request", "{clearing}");
        let body = r.json();
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{clearing}: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
    let names: Vec<String> = (0..129).map(|i| format!("tool_{i}")).collect();
    let r = server
        .post_json(
            url,
            &json!({"messages": pair, "policy": {"clear_tool_results": {"exclude_tools": names}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("exclude_tools"), "{}", r.text());
    assert_eq!(
        server.get(url).await.status,
        StatusCode::NOT_FOUND,
        "nothing was written"
    );

    assert_eq!(
        server.post_json(url, &json!({"messages": pair})).await.status,
        StatusCode::OK
    );
    for (query, names) in [
        ("clear_tool_results.keep=0", "keep"),
        ("clear_tool_results.keep=abc", "keep"),
        ("clear_tool_results.trigger_tokens=-1", "trigger_tokens"),
        (
            "clear_tool_results.trigger_tokens=10&clear_tool_results.clear_at_least_tokens=20",
            "trigger_tokens",
        ),
        ("clear_tool_results.clear_inputs=maybe", "clear_inputs"),
        ("clear_tool_results.colour=red", "clear_tool_results.colour"),
        ("clear_tool_results=3", "clear_tool_results.keep=3"),
    ] {
        let r = server.get(&format!("{url}?{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}: {}", r.text());
        let body = r.json();
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(names), "{query}: {message}");
    }

    // A server that takes no policy from requests refuses clearing too.
    let closed = ServerConfig {
        limits: Limits {
            policy: PolicyCaps {
                allowed: false,
                ..PolicyCaps::default()
            },
            ..Limits::default()
        },
        ..ServerConfig::default()
    };
    let server = self::server(WindowPolicy::messages(20), closed);
    let r = server
        .post_json(
            url,
            &json!({"messages": pair, "policy": {"clear_tool_results": {"keep": 1}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("does not take a window policy"), "{}", r.text());
}

/// Through the OpenAI door, with a server clearing all but the most recent tool use: the
/// upstream receives the placeholders, `history` returns the original bytes, `/metrics` counts
/// what was cleared, and the inspector marks the cleared results with their size and the
/// stored original.
#[tokio::test]
async fn the_door_sends_placeholders_while_history_keeps_the_originals() {
    let upstream = MockUpstream::start(Vec::new()).await;
    let config = door_config(&upstream);
    let metrics = config.metrics.clone();
    let clearing = ClearToolResults::new(1).expect("keep 1").trigger_tokens(300);
    let policy = WindowPolicy::tokens(4_000).with_clearing(clearing).expect("a policy");
    let server = server(policy, config);
    let id = "agent-1";
    let written = server
        .post_json(
            &format!("/v1/conversations/{id}/messages"),
            &json!({"messages": tool_turns()}),
        )
        .await;
    assert_eq!(written.status, StatusCode::OK, "{}", written.text());

    upstream.push([text("The first order ships tomorrow.")]);
    let mut request = json_request(
        Method::POST,
        "/v1/chat/completions",
        &json!({"model": "mock-model", "messages": [{"role": "user", "content": "And the first one?"}]}),
    );
    request
        .headers_mut()
        .insert("x-chatmem-conversation", HeaderValue::from_static(id));
    let r = server.send(request).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());

    let sent = upstream.last_request();
    let messages = &sent["messages"];
    assert_first_two_cleared(messages, "what the upstream received");
    // Each cleared result keeps its place: right after the call it answers.
    let roles: Vec<&str> = messages
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("a role"))
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "user"
        ]
    );

    // History: the original bytes of every result.
    let history = server.get(&format!("/v1/conversations/{id}/history")).await;
    let history = history.json()["messages"].clone();
    for n in 1..=3 {
        assert_eq!(result_of(&history, &format!("call_{n}")), order_record(n));
    }
    assert_eq!(history.as_array().map(Vec::len), Some(10), "the answer was committed");

    // `/metrics`: two results cleared from the one prompt sent, and what that saved.
    let text = metrics.render();
    let value = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(value("chatmem_tool_results_cleared_total"), 2);
    let original: u64 = ["call_1", "call_2"]
        .iter()
        .map(|c| {
            let p = result_of(messages, c);
            let n = p.rsplit(", ").next().and_then(|t| t.strip_suffix(" tokens]"));
            n.and_then(|n| n.parse::<u64>().ok()).expect("a size")
        })
        .sum();
    let saved = value("chatmem_tool_tokens_saved_total");
    assert!(saved > 0 && saved < original, "saved {saved} of {original}");

    // The inspector: the cleared results marked, with what is sent, their size and the
    // original behind a disclosure; the kept one as it is.
    let page = server.get(&format!("/ui/conversations/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    let call_1 = article(&html, "m3");
    assert!(call_1.contains("msg tool in-window cleared"), "{call_1}");
    assert!(call_1.contains("cleared from the prompt"), "{call_1}");
    assert!(
        call_1.contains("[cleared: get_order result for call call_1, "),
        "{call_1}"
    );
    let original = &call_1[call_1.find("<details class=\"original\">").expect("the original")..];
    assert!(original.contains(" tokens)</summary>"), "{original}");
    assert!(
        original.contains("LC202610060001") && original.contains("SKU-1-039"),
        "{original}"
    );
    let call_3 = article(&html, "m7");
    assert!(!call_3.contains("cleared"), "{call_3}");
    assert!(call_3.contains("SKU-3-039"), "{call_3}");
    // The prompt shown is the one sent.
    assert!(html.contains("[cleared: get_order result for call call_2, "));
}
