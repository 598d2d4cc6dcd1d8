//! The advisor with the real `chatmem-openai` client against a real HTTP server on loopback
//! (`chatmem_test::upstream`), asserting the exact messages each request carried.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chatmem::{Body, ChatMemory, ConversationId, InMemoryStore, Message, ModelErrorKind, Role, Store, WindowPolicy};
use chatmem_advisor::{Error, MemoryAdvisor, ToolError, ToolExecutor, TurnEvent, TurnRequest, WriteMode};
use chatmem_test::upstream::{MockUpstream, Reply, roles_and_texts, text};
use futures_util::StreamExt;
use serde_json::json;

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const TURN1: &str = "我的订单是 LC202610060018，还没发货。";
const TURN2: &str = "那单能退吗？";
const ORDER: &str = "LC202610060018";
const ANSWER1: &str = "收到，订单 LC202610060018 尚未发货。";
const ANSWER2: &str = "订单 LC202610060018 未发货，可以退。";

fn id(s: &str) -> ConversationId {
    ConversationId::new(s).unwrap()
}

fn memory(max_messages: usize) -> ChatMemory<InMemoryStore> {
    ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(max_messages))
        .build()
        .expect("valid memory settings")
}

fn turn(user: &str) -> TurnRequest {
    TurnRequest::user(user).with_system(SYSTEM)
}

/// The after-sale conversation after its two turns, both answered.
const SEED_003: [(Role, &str); 5] = [
    (Role::System, SYSTEM),
    (Role::User, TURN1),
    (Role::Assistant, ANSWER1),
    (Role::User, TURN2),
    (Role::Assistant, ANSWER2),
];

/// The first `n` messages of [`SEED_003`] as [`texts`] gives stored ones.
fn seed_stored(n: usize) -> Vec<(Role, String)> {
    SEED_003[..n].iter().map(|(r, t)| (*r, t.to_string())).collect()
}

/// The first `n` messages of [`SEED_003`] as `roles_and_texts` gives a request's.
fn seed_sent(n: usize) -> Vec<(String, String)> {
    SEED_003[..n]
        .iter()
        .map(|(r, t)| (r.as_str().to_string(), t.to_string()))
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(r, t)| (r.to_string(), t.to_string())).collect()
}

fn texts(messages: &[Message]) -> Vec<(Role, String)> {
    messages
        .iter()
        .map(|m| (m.role(), m.text().unwrap_or_default().into_owned()))
        .collect()
}

async fn version<S: Store>(memory: &ChatMemory<S>, id: &ConversationId) -> u64 {
    memory.load(id).await.unwrap().snapshot().version
}

#[tokio::test]
async fn seed_003_second_turn_sends_the_order_number_from_memory() {
    let server = MockUpstream::start(vec![text(ANSWER1), text(ANSWER2)]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("app-user-42-aftersale");
    assert!(advisor.memory().get(&conv).await.unwrap().is_empty());

    let first = advisor.call(&conv, turn(TURN1)).await.unwrap();
    assert_eq!(first.text(), ANSWER1);
    let second = advisor.call(&conv, turn(TURN2)).await.unwrap();
    assert!(second.text().contains(ORDER));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(roles_and_texts(&requests[0]), seed_sent(2));
    let sent = roles_and_texts(&requests[1]);
    eprintln!(
        "turn 2 request body:\n{}",
        serde_json::to_string_pretty(&requests[1]).unwrap()
    );
    assert_eq!(sent, seed_sent(4));
    // The order number reaches turn 2 only through memory: not in the system prompt, not in
    // turn 2's own text.
    assert!(!SYSTEM.contains(ORDER));
    assert!(!TURN2.contains(ORDER));
    assert!(sent[1].1.contains(ORDER));
    assert_eq!(requests[1]["model"], "mock-model");
    assert_eq!(requests[1]["stream"], false);

    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(texts(&stored), seed_stored(5));
    // Two turns, two commits: each turn is one batch.
    assert_eq!(version(advisor.memory(), &conv).await, 2);
}

#[tokio::test]
async fn conversations_are_isolated() {
    let server = MockUpstream::start(vec![]).await; // echo answers
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let (a, b) = (id("app-user-42-aftersale"), id("app-user-43-aftersale"));
    advisor.call(&a, turn(TURN1)).await.unwrap();
    advisor.call(&b, turn("我想问一下营业时间。")).await.unwrap();
    advisor.call(&a, turn(TURN2)).await.unwrap();
    advisor.call(&b, turn(TURN2)).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for i in [1, 3] {
        let body = requests[i].to_string();
        assert!(
            !body.contains(ORDER),
            "request {i} for user 43 leaked the order: {body}"
        );
    }
    assert!(requests[2].to_string().contains(ORDER));
    assert_eq!(
        roles_and_texts(&requests[3]),
        pairs(&[
            ("system", SYSTEM),
            ("user", "我想问一下营业时间。"),
            ("assistant", "echo: 我想问一下营业时间。"),
            ("user", TURN2)
        ])
    );
    let b_memory = advisor.memory().get(&b).await.unwrap();
    assert!(b_memory.iter().all(|m| !m.text().unwrap_or_default().contains(ORDER)));
}

#[tokio::test]
async fn a_window_of_two_drops_the_first_turn_but_keeps_the_system_message() {
    let server = MockUpstream::start(vec![text(ANSWER1), text("请提供订单号。")]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(2));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    advisor.call(&conv, turn(TURN2)).await.unwrap();

    let stored = advisor.memory().get(&conv).await.unwrap();
    eprintln!("window 2 after two turns: {:?}", texts(&stored));
    assert!(stored[0].is_system());
    assert_eq!(stored[0].text().as_deref(), Some(SYSTEM));
    assert!(stored.iter().all(|m| m.text().as_deref() != Some(TURN1)));
    assert!(stored.len() <= 2);
    // The model saw no more than the window either: system and the new question.
    assert_eq!(
        roles_and_texts(&server.requests()[1]),
        pairs(&[("system", SYSTEM), ("user", TURN2)])
    );
}

#[tokio::test]
async fn under_a_window_of_two_the_order_number_is_recalled_into_the_request() {
    for mode in [WriteMode::AfterSuccess, WriteMode::Eager] {
        let server = MockUpstream::start(vec![text(ANSWER1), text("好的"), text(ANSWER2)]).await;
        let memory = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(2))
            .recall(chatmem::Recall::new(3).unwrap())
            .build()
            .unwrap();
        let advisor = MemoryAdvisor::new(server.model(), memory).with_write_mode(mode);
        let conv = id("app-user-42-aftersale");
        advisor.call(&conv, turn(TURN1)).await.unwrap();
        advisor.call(&conv, turn("谢谢")).await.unwrap();
        advisor.call(&conv, turn("LC202610060018 能退吗？")).await.unwrap();
        let sent = roles_and_texts(&server.requests()[2]);
        assert_eq!(sent.len(), 3, "{mode:?}: {sent:?}");
        assert_eq!(sent[0], ("system".to_string(), SYSTEM.to_string()));
        assert_eq!(sent[1].0, "user");
        assert!(
            sent[1].1.starts_with(chatmem::recall::RECALL_HEADING),
            "{mode:?}: {}",
            sent[1].1
        );
        assert!(
            sent[1].1.contains("[#1 user, ") && sent[1].1.contains(TURN1),
            "{mode:?}: {}",
            sent[1].1
        );
        assert_eq!(sent[2], ("user".to_string(), "LC202610060018 能退吗？".to_string()));
        // Memory holds what was said, nothing recalled.
        let history = advisor.memory().history(&conv).await.unwrap();
        assert_eq!(history.len(), 7, "{mode:?}");
        assert!(
            history
                .iter()
                .all(|m| !m.text().unwrap_or_default().contains(chatmem::recall::RECALL_HEADING))
        );
    }
}

#[tokio::test]
async fn a_failed_call_leaves_memory_unchanged_and_a_retry_sends_the_question_once() {
    let server = MockUpstream::start(vec![text(ANSWER1), Reply::Status(500), text(ANSWER2)]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    let before = advisor.memory().load(&conv).await.unwrap();

    let err = advisor.call(&conv, turn(TURN2)).await.unwrap_err();
    let model_error = err.model_error().expect("a model error");
    assert_eq!(model_error.kind(), ModelErrorKind::Server);
    assert_eq!(model_error.status(), Some(500));
    assert!(err.is_transient());
    assert_eq!(advisor.memory().load(&conv).await.unwrap(), before);

    advisor.call(&conv, turn(TURN2)).await.unwrap();
    let expected = seed_sent(4);
    assert_eq!(roles_and_texts(&server.requests()[1]), expected);
    assert_eq!(roles_and_texts(&server.requests()[2]), expected);
    assert_eq!(advisor.memory().get(&conv).await.unwrap().len(), 5);
}

#[tokio::test]
async fn eager_mode_keeps_one_unanswered_question_and_a_retry_does_not_repeat_it() {
    let server = MockUpstream::start(vec![
        text(ANSWER1),
        Reply::Status(500),
        Reply::Status(500),
        text(ANSWER2),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6)).with_write_mode(WriteMode::Eager);
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();

    advisor.call(&conv, turn(TURN2)).await.unwrap_err();
    let after_failure = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(texts(&after_failure), seed_stored(4));

    // A second failure of the same question does not store it again either.
    advisor.call(&conv, turn(TURN2)).await.unwrap_err();
    assert_eq!(advisor.memory().get(&conv).await.unwrap(), after_failure);

    let answered = advisor.call(&conv, turn(TURN2)).await.unwrap();
    assert_eq!(answered.text(), ANSWER2);
    let expected = seed_sent(4);
    for r in &server.requests()[1..] {
        assert_eq!(roles_and_texts(r), expected, "the question must be sent exactly once");
    }
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(stored.iter().filter(|m| m.text().as_deref() == Some(TURN2)).count(), 1);
    assert_eq!(texts(&stored).last().unwrap(), &(Role::Assistant, ANSWER2.to_string()));
    for pair in stored.windows(2) {
        assert!(
            !(pair[0].role() == Role::User && pair[0] == pair[1]),
            "two identical user messages in a row"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_sqlite_store_on_the_same_file_continues_the_conversation() {
    let dir = std::env::temp_dir().join(format!("chatmem-advisor-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("memory.db");
    let server = MockUpstream::start(vec![text(ANSWER1), text(ANSWER2)]).await;
    let conv = id("app-user-42-aftersale");
    {
        let store = chatmem_sqlite::SqliteStore::open(&path).await.unwrap();
        let memory = ChatMemory::builder(store)
            .policy(WindowPolicy::messages(6))
            .build()
            .expect("valid memory settings");
        let advisor = MemoryAdvisor::new(server.model(), memory);
        advisor.call(&conv, turn(TURN1)).await.unwrap();
    }
    // "Restart": a new store over the same file, through its URL form.
    let url = format!("sqlite:{}", path.display());
    let store = chatmem_sqlite::SqliteStore::connect(&url).await.unwrap();
    let memory = ChatMemory::builder(store)
        .policy(WindowPolicy::messages(6))
        .build()
        .expect("valid memory settings");
    let advisor = MemoryAdvisor::new(server.model(), memory);
    advisor.call(&conv, turn(TURN2)).await.unwrap();

    let sent = roles_and_texts(&server.requests()[1]);
    assert_eq!(sent, seed_sent(4));
    assert!(sent[1].1.contains(ORDER));
    assert_eq!(advisor.memory().get(&conv).await.unwrap().len(), 5);
    drop(advisor);
    let _ = std::fs::remove_dir_all(&dir);
}

#[derive(Debug)]
struct OrderTool;

#[async_trait]
impl ToolExecutor for OrderTool {
    async fn execute(&self, name: &str, arguments: &str) -> Result<String, ToolError> {
        match name {
            "order_status" => {
                let args: serde_json::Value =
                    serde_json::from_str(arguments).map_err(|e| ToolError::new(e.to_string()))?;
                Ok(json!({"order": args["order"], "shipped": false}).to_string())
            }
            other => Err(ToolError::new(format!("unknown tool {other}"))),
        }
    }
}

fn order_tool() -> chatmem::ToolDefinition {
    chatmem::ToolDefinition {
        name: "order_status".into(),
        description: Some("Looks up an order".into()),
        parameters: json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}),
    }
}

const CALL_ARGS: &str = r#"{"order":"LC202610060018"}"#;
const TOOL_RESULT: &str = r#"{"order":"LC202610060018","shipped":false}"#;

#[tokio::test]
async fn the_tool_loop_commits_the_turn_as_one_batch_and_prepends_memory_once() {
    let server = MockUpstream::start(vec![
        text(ANSWER1),
        Reply::ToolCalls(vec![("call_1", "order_status", CALL_ARGS)]),
        text(ANSWER2),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(20)).with_tool_executor(OrderTool);
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    let version_before = version(advisor.memory(), &conv).await;

    let done = advisor
        .call(&conv, turn(TURN2).with_tools(vec![order_tool()]))
        .await
        .unwrap();
    assert_eq!(done.rounds, 2);
    assert_eq!(done.text(), ANSWER2);
    assert_eq!(done.usage.map(|u| u.total_tokens), Some(30));

    let requests = server.requests();
    assert_eq!(requests[1]["tools"][0]["function"]["name"], "order_status");
    let round2 = &requests[2];
    assert_eq!(
        round2["messages"],
        json!([
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": TURN1},
            {"role": "assistant", "content": ANSWER1},
            {"role": "user", "content": TURN2},
            {"role": "assistant", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": CALL_ARGS}}
            ]},
            {"role": "tool", "content": TOOL_RESULT, "tool_call_id": "call_1"}
        ])
    );

    // One commit for the whole turn: U, A(tool call), R, A.
    assert_eq!(version(advisor.memory(), &conv).await, version_before + 1);
    let stored = advisor.memory().get(&conv).await.unwrap();
    let turn2 = &stored[3..];
    assert_eq!(turn2.len(), 4);
    assert_eq!(turn2[0], Message::user(TURN2));
    assert_eq!(
        turn2[1],
        Message::assistant_tool_calls(vec![chatmem::ToolCall::new("call_1", "order_status", CALL_ARGS)])
    );
    assert_eq!(turn2[2], Message::tool_result("call_1", TOOL_RESULT));
    assert_eq!(turn2[3], Message::assistant(ANSWER2));
    assert_eq!(done.messages, turn2);
}

#[tokio::test]
async fn tool_errors_are_sent_as_results_and_the_loop_is_bounded() {
    let server = MockUpstream::start(vec![
        Reply::ToolCalls(vec![("c1", "no_such_tool", "{}")]),
        Reply::ToolCalls(vec![("c2", "order_status", CALL_ARGS)]),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(20))
        .with_tool_executor(OrderTool)
        .with_max_tool_rounds(1);
    let conv = id("tool-loop");
    let err = advisor
        .call(&conv, turn(TURN2).with_tools(vec![order_tool()]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ToolLoopExceeded { rounds: 1 }), "{err:?}");
    let second = &server.requests()[1]["messages"];
    assert_eq!(
        second.as_array().unwrap().last().unwrap(),
        &json!({"role": "tool", "content": "unknown tool no_such_tool", "tool_call_id": "c1"})
    );
    assert!(advisor.memory().get(&conv).await.unwrap().is_empty());
}

#[tokio::test]
async fn reasoning_is_stored_but_never_sent_back() {
    let server = MockUpstream::start(vec![
        Reply::Reasoning {
            reasoning: "用户给了订单号，先确认发货状态。",
            content: ANSWER1,
        },
        text(ANSWER2),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert!(matches!(
        &stored[2].body,
        Body::Assistant { reasoning_content: Some(r), .. } if r == "用户给了订单号，先确认发货状态。"
    ));

    advisor.call(&conv, turn(TURN2)).await.unwrap();
    let sent = server.last_request();
    assert_eq!(sent["messages"][2], json!({"role": "assistant", "content": ANSWER1}));
    assert!(!sent.to_string().contains("reasoning_content"));
    assert!(!sent.to_string().contains("先确认发货状态"));
}

#[tokio::test]
async fn streaming_yields_deltas_and_commits_the_joined_answer() {
    let server = MockUpstream::start(vec![
        text(ANSWER1),
        Reply::Reasoning {
            reasoning: "查历史里的订单号",
            content: ANSWER2,
        },
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();

    let mut stream = advisor.stream(&conv, turn(TURN2)).await.unwrap();
    let mut deltas = 0;
    let mut streamed = String::new();
    let mut done = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            TurnEvent::Delta(d) => {
                deltas += 1;
                streamed.push_str(d.content.as_deref().unwrap_or_default());
                // Nothing is committed while deltas arrive.
                assert_eq!(advisor.memory().get(&conv).await.unwrap().len(), 3);
            }
            TurnEvent::Done(t) => done = Some(t),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(deltas > 3, "the answer should arrive in pieces, got {deltas}");
    assert_eq!(streamed, ANSWER2);
    let done = done.unwrap();
    assert_eq!(done.text(), ANSWER2);
    assert_eq!(done.usage.map(|u| u.total_tokens), Some(15));

    let sent = server.last_request();
    assert_eq!(sent["stream"], true);
    assert_eq!(roles_and_texts(&sent), seed_sent(4));
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(stored.len(), 5);
    assert!(matches!(
        &stored[4].body,
        Body::Assistant { content: Some(c), reasoning_content: Some(r), tool_calls } if c.text() == ANSWER2 && r == "查历史里的订单号" && tool_calls.is_empty()
    ));
}

#[tokio::test]
async fn a_streamed_tool_loop_keeps_each_round_apart() {
    let server = MockUpstream::start(vec![
        Reply::ToolCalls(vec![("call_1", "order_status", CALL_ARGS)]),
        text(ANSWER2),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(20)).with_tool_executor(OrderTool);
    let conv = id("stream-tools");
    let stream = advisor
        .stream(&conv, TurnRequest::user(TURN1).with_tools(vec![order_tool()]))
        .await
        .unwrap();
    let done = stream.finish().await.unwrap();
    assert_eq!(done.rounds, 2);
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(
        stored,
        vec![
            Message::user(TURN1),
            Message::assistant_tool_calls(vec![chatmem::ToolCall::new("call_1", "order_status", CALL_ARGS)]),
            Message::tool_result("call_1", TOOL_RESULT),
            Message::assistant(ANSWER2),
        ]
    );
    assert_eq!(server.requests()[1]["messages"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn dropping_the_stream_midway_commits_nothing() {
    let server = MockUpstream::start(vec![text(ANSWER1), Reply::StreamThenHang(vec!["订单", "LC2026"])]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    let before = advisor.memory().load(&conv).await.unwrap();

    let mut stream = advisor.stream(&conv, turn(TURN2)).await.unwrap();
    for _ in 0..2 {
        assert!(matches!(stream.next().await, Some(Ok(TurnEvent::Delta(_)))));
    }
    drop(stream);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(advisor.memory().load(&conv).await.unwrap(), before);
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_commits_nothing() {
    let server = MockUpstream::start(vec![Reply::StreamThenHang(vec!["订单"])]).await;
    let model = server.model_with(|b| b.timeout(Duration::from_millis(300)));
    let advisor = MemoryAdvisor::new(model, memory(6));
    let conv = id("stalled");
    let err = advisor
        .stream(&conv, turn(TURN1))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap_err();
    assert_eq!(err.model_error().map(|e| e.kind()), Some(ModelErrorKind::Timeout));
    assert!(advisor.memory().get(&conv).await.unwrap().is_empty());
}

#[tokio::test]
async fn rate_limits_map_to_rate_limited_and_are_retried_when_allowed() {
    let server = MockUpstream::start(vec![Reply::Status(429)]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("limited");
    let err = advisor.call(&conv, turn(TURN1)).await.unwrap_err();
    let e = err.model_error().unwrap();
    assert_eq!(e.kind(), ModelErrorKind::RateLimited);
    assert_eq!(e.status(), Some(429));
    assert!(e.to_string().contains("scripted 429"), "{e}");

    // With one retry allowed, a 429 followed by an answer succeeds.
    server.push([Reply::Status(429), text(ANSWER1)]);
    let retrying = MemoryAdvisor::new(server.model_with(|b| b.max_retries(1)), memory(6));
    let ok = retrying.call(&conv, turn(TURN1)).await.unwrap();
    assert_eq!(ok.text(), ANSWER1);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn other_http_failures_map_to_their_kinds() {
    let server = MockUpstream::start(vec![Reply::Status(401), Reply::Status(503), Reply::Status(400)]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("kinds");
    for kind in [
        ModelErrorKind::Auth,
        ModelErrorKind::Server,
        ModelErrorKind::InvalidRequest,
    ] {
        let err = advisor.call(&conv, turn(TURN1)).await.unwrap_err();
        assert_eq!(err.model_error().map(|e| e.kind()), Some(kind));
    }
    // Nothing listens on a free port: a connection failure.
    let port = chatmem_test::loopback::free_port();
    let closed = chatmem_openai::OpenAiModel::builder()
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .model("m")
        .max_retries(0)
        .build()
        .unwrap();
    let advisor = MemoryAdvisor::new(closed, memory(6));
    let err = advisor.call(&conv, turn(TURN1)).await.unwrap_err();
    assert_eq!(err.model_error().map(|e| e.kind()), Some(ModelErrorKind::Unavailable));
    assert!(advisor.memory().get(&conv).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_slow_answer_times_out_and_commits_nothing() {
    let server = MockUpstream::start(vec![Reply::Slow(Duration::from_secs(3), Box::new(text(ANSWER1)))]).await;
    let model = server.model_with(|b| b.timeout(Duration::from_millis(300)));
    let advisor = MemoryAdvisor::new(model, memory(6));
    let conv = id("slow");
    let started = std::time::Instant::now();
    let err = advisor.call(&conv, turn(TURN1)).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    let e = err.model_error().unwrap();
    assert_eq!(e.kind(), ModelErrorKind::Timeout);
    assert!(e.is_transient());
    assert!(advisor.memory().get(&conv).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_turns_at_once_both_commit_each_contiguous() {
    let delay = Duration::from_millis(200);
    let server = MockUpstream::start(vec![
        text(ANSWER1),
        Reply::Slow(delay, Box::new(text("answer A"))),
        Reply::Slow(delay, Box::new(text("answer B"))),
    ])
    .await;
    let advisor = Arc::new(MemoryAdvisor::new(server.model(), memory(20)));
    let conv = id("app-user-42-aftersale");
    advisor.call(&conv, turn(TURN1)).await.unwrap();

    let (a, b) = tokio::join!(
        advisor.call(&conv, TurnRequest::user("question A")),
        advisor.call(&conv, TurnRequest::user("question B")),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    // With the 200 ms answers both turns normally load the same memory, so the second
    // commit loses the version check and is retried; a slow machine may serialise them,
    // which must give the same memory.
    let overlapped = server.requests()[1..]
        .iter()
        .all(|r| roles_and_texts(r).iter().filter(|(role, _)| role == "user").count() == 2);
    if !overlapped {
        eprintln!("note: the two turns did not overlap on this run");
    }
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(stored.len(), 7);
    let tail: Vec<String> = stored[3..]
        .iter()
        .map(|m| m.text().unwrap_or_default().into_owned())
        .collect();
    for t in [&a, &b] {
        let q = tail
            .iter()
            .position(|x| *x == t.messages[0].text().unwrap_or_default())
            .unwrap();
        assert_eq!(
            tail[q + 1],
            t.text(),
            "a turn's answer must follow its question: {tail:?}"
        );
    }
}

#[tokio::test]
async fn system_messages_replace_the_stored_one_and_bad_requests_are_refused() {
    let server = MockUpstream::start(vec![]).await;
    let advisor = MemoryAdvisor::new(server.model(), memory(6));
    let conv = id("system");
    advisor.call(&conv, turn(TURN1)).await.unwrap();
    advisor
        .call(&conv, TurnRequest::user(TURN2).with_system("新店规 policy-2026.11"))
        .await
        .unwrap();
    let sent = roles_and_texts(&server.last_request());
    assert_eq!(sent[0], ("system".to_string(), "新店规 policy-2026.11".to_string()));
    assert_eq!(sent.iter().filter(|(r, _)| r == "system").count(), 1);
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(stored[0].text().as_deref(), Some("新店规 policy-2026.11"));
    assert_eq!(stored.len(), 5);
    // Without a system message the stored one is used.
    advisor.call(&conv, TurnRequest::user("谢谢")).await.unwrap();
    assert_eq!(roles_and_texts(&server.last_request())[0].1, "新店规 policy-2026.11");

    let requests = server.requests().len();
    for bad in [
        TurnRequest::new(vec![]),
        TurnRequest::new(vec![Message::system("only rules")]),
        TurnRequest::new(vec![Message::user("a"), Message::system("late rules")]),
    ] {
        assert!(matches!(advisor.call(&conv, bad).await, Err(Error::InvalidRequest(_))));
    }
    assert_eq!(server.requests().len(), requests);
}

#[tokio::test]
async fn the_conversation_wrapper_is_a_chat_model() {
    use chatmem::{ChatModel, ChatRequest};
    let server = MockUpstream::start(vec![text(ANSWER1), text(ANSWER2)]).await;
    let advisor = Arc::new(MemoryAdvisor::new(server.model(), memory(6)));
    let model = advisor.clone().conversation(id("app-user-42-aftersale"));
    model
        .complete(ChatRequest::new(&[Message::system(SYSTEM), Message::user(TURN1)]))
        .await
        .unwrap();
    let r = model.complete(ChatRequest::new(&[Message::user(TURN2)])).await.unwrap();
    assert_eq!(r.message.text().as_deref(), Some(ANSWER2));
    assert!(server.last_request().to_string().contains(ORDER));
}

#[tokio::test]
async fn without_an_executor_a_tool_call_ends_the_turn_and_results_come_next_turn() {
    let server = MockUpstream::start(vec![
        Reply::ToolCalls(vec![("call_1", "order_status", CALL_ARGS)]),
        text(ANSWER2),
    ])
    .await;
    let advisor = MemoryAdvisor::new(server.model(), memory(20));
    let conv = id("manual-tools");
    let first = advisor
        .call(&conv, turn(TURN2).with_tools(vec![order_tool()]))
        .await
        .unwrap();
    assert_eq!(first.message.tool_calls().len(), 1);
    assert_eq!(advisor.memory().get(&conv).await.unwrap().len(), 3);

    let done = advisor
        .call(
            &conv,
            TurnRequest::new(vec![Message::tool_result("call_1", TOOL_RESULT)]),
        )
        .await
        .unwrap();
    assert_eq!(done.text(), ANSWER2);
    assert_eq!(
        roles_and_texts(&server.last_request()),
        pairs(&[
            ("system", SYSTEM),
            ("user", TURN2),
            ("assistant", ""),
            ("tool", TOOL_RESULT)
        ])
    );
    assert_eq!(advisor.memory().get(&conv).await.unwrap().len(), 5);
}

/// A turn for a user sends that user's facts right after the system message (and only
/// theirs); the facts are not committed with the conversation, and a turn for no one sends
/// none.
#[tokio::test]
async fn a_turn_for_a_user_sends_their_facts_and_stores_none_of_them() {
    use chatmem::UserId;
    use chatmem::facts::{FACTS_HEADING, Facts};
    let server = MockUpstream::start(vec![text(ANSWER1), text(ANSWER2), text(ANSWER2)]).await;
    let memory = ChatMemory::builder(InMemoryStore::new())
        .facts(Facts::new())
        .build()
        .expect("valid memory settings");
    let (ada, bob) = (UserId::new("ada").unwrap(), UserId::new("bob").unwrap());
    memory.add_fact(&ada, "Prefers email", None).await.unwrap();
    memory.add_fact(&bob, "Lives in Berlin", None).await.unwrap();
    let advisor = MemoryAdvisor::new(server.model(), memory);
    let conv = id("c1");
    advisor.call(&conv, turn(TURN1).with_user(ada.clone())).await.unwrap();
    let facts = format!("{FACTS_HEADING}\n- Prefers email");
    assert_eq!(
        roles_and_texts(&server.requests()[0]),
        pairs(&[("system", SYSTEM), ("user", &facts), ("user", TURN1)])
    );
    let stored = advisor.memory().get(&conv).await.unwrap();
    assert_eq!(texts(&stored), seed_stored(3));
    advisor.call(&conv, turn(TURN2)).await.unwrap();
    assert_eq!(roles_and_texts(&server.requests()[1]), seed_sent(4));
    let mut stream = advisor.stream(&conv, turn(TURN2).with_user(ada)).await.unwrap();
    while let Some(event) = stream.next().await {
        event.unwrap();
    }
    assert_eq!(roles_and_texts(&server.requests()[2])[1], ("user".to_string(), facts));
}
