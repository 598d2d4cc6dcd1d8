//! A rig agent with chatmem as its memory, against a stand-in OpenAI-compatible server on
//! loopback: the after-sale scenario across two turns, across a restart on SQLite, and a
//! tool-using turn stored and loaded back intact.

use std::convert::Infallible;

use chatmem::{Body, ChatMemory, InMemoryStore, Retention, WindowPolicy};
use chatmem_rig::RigMemory;
use chatmem_sqlite::SqliteStore;
use chatmem_test::upstream::{MockUpstream, ORDER};
use rig_agent::AgentBuilder;
use rig_agent::tool::{Tool, ToolContext};
use rig_core::memory::ConversationMemory;
use rig_core::message::{Message, UserContent};
use serde::Deserialize;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CONVERSATION: &str = "app-user-42-aftersale";

/// rig's OpenAI Chat Completions model on a stand-in at `base_url`.
fn model_at(base_url: &str) -> rig_core::Model<rig_core::providers::openai::wire::Chat> {
    let mut config = rig_core::providers::openai::OpenAIConfig::new("sk-stand-in");
    config.base_url = base_url.to_owned();
    config.client().chat("stand-in")
}

/// Every text the request's messages carry, joined.
fn request_text(body: &serde_json::Value) -> String {
    body["messages"].to_string()
}

fn agent(stand_in: &MockUpstream, memory: impl ConversationMemory + 'static) -> rig_agent::Agent {
    agent_on(model_at(&stand_in.base_url), memory)
}

fn agent_on(
    model: rig_core::Model<rig_core::providers::openai::wire::Chat>,
    memory: impl ConversationMemory + 'static,
) -> rig_agent::Agent {
    AgentBuilder::new(model)
        .preamble("你是邻里仓售后。未发货可退。")
        .memory(memory)
        .conversation(CONVERSATION)
        .tool(OrderStatus)
        .build()
}

/// Runs one turn and checks rig reports the append as acknowledged.
async fn turn(agent: &rig_agent::Agent, prompt: &str) -> Result<String, Box<dyn std::error::Error>> {
    let response = agent.prompt(prompt).max_turns(3).await?;
    let append = response.memory_append().ok_or("no memory append")?;
    assert!(append.is_acknowledged(), "append failed: {:?}", append.failure());
    Ok(response.output())
}

#[tokio::test]
async fn second_turn_carries_the_order_number_from_memory() -> TestResult {
    let stand_in = MockUpstream::after_sale().await;
    let memory = RigMemory::new(
        ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(10))
            .build()?,
    );
    let agent = agent(&stand_in, memory.clone());

    turn(&agent, "我的订单是 LC202610060018，还没发货。").await?;
    let answer = turn(&agent, "那单能退吗？").await?;

    let bodies = stand_in.requests();
    assert_eq!(bodies.len(), 2);
    let second = request_text(&bodies[1]);
    assert!(
        second.contains(ORDER),
        "the second request lacks the order number: {second}"
    );
    assert!(second.contains("那单能退吗？"));
    assert!(answer.contains(ORDER), "{answer}");

    // What chatmem holds is the two turns, user first.
    let id = chatmem::ConversationId::new(CONVERSATION)?;
    let stored = memory.memory().get(&id).await?;
    assert_eq!(stored.len(), 4);
    assert!(matches!(stored[0].body, Body::User { .. }));
    Ok(())
}

/// The SQLite file and the stand-in's address that the restart test hands its second process.
const CHILD_DB: &str = "CHATMEM_RIG_TEST_CHILD_DB";
const CHILD_URL: &str = "CHATMEM_RIG_TEST_CHILD_URL";
/// How the second process prints its answer, for the first to read.
const CHILD_ANSWER: &str = "child answer: ";

/// A rig memory over the SQLite file at `path`, as each process of the restart test opens it.
async fn sqlite_memory(path: &std::path::Path) -> Result<RigMemory<SqliteStore>, Box<dyn std::error::Error>> {
    let memory = ChatMemory::builder(SqliteStore::open(path).await?)
        .policy(WindowPolicy::messages(10))
        .retention(Retention::KeepHistory)
        .build()?;
    Ok(RigMemory::new(memory))
}

#[tokio::test]
async fn a_new_process_over_the_same_sqlite_file_continues() -> TestResult {
    let stand_in = MockUpstream::after_sale().await;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("chatmem.db");
    {
        let agent = agent(&stand_in, sqlite_memory(&path).await?);
        turn(&agent, "我的订单是 LC202610060018，还没发货。").await?;
    } // this process's memory, store and connections are dropped

    // Turn 2 in a second process: this test binary again, running only `second_process_turn`.
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child
        .args(["--exact", "second_process_turn", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, &path)
        .env(CHILD_URL, &stand_in.base_url);
    // Waited for on a blocking thread: this runtime must go on serving the stand-in meanwhile.
    let output = tokio::task::spawn_blocking(move || child.output()).await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the second process failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = stdout
        .lines()
        // The harness prints the test's name on the same line, before it.
        .find_map(|l| l.split_once(CHILD_ANSWER).map(|(_, answer)| answer))
        .ok_or_else(|| format!("the second process ran no turn: {stdout}"))?;
    assert_eq!(answer, format!("订单 {ORDER} 未发货，可以退。"));
    let bodies = stand_in.requests();
    assert_eq!(bodies.len(), 2, "one request per process");
    let second = request_text(&bodies[1]);
    assert!(
        second.contains(ORDER),
        "the second process's request lacks the order number: {second}"
    );
    Ok(())
}

/// The second process of `a_new_process_over_the_same_sqlite_file_continues`; does nothing
/// unless that test started it with the file and the stand-in's address.
#[tokio::test]
async fn second_process_turn() -> TestResult {
    let (Some(path), Ok(base_url)) = (std::env::var_os(CHILD_DB), std::env::var(CHILD_URL)) else {
        return Ok(());
    };
    let agent = agent_on(model_at(&base_url), sqlite_memory(path.as_ref()).await?);
    let answer = turn(&agent, "那单能退吗？").await?;
    println!("{CHILD_ANSWER}{answer}");
    Ok(())
}

#[tokio::test]
async fn a_tool_turn_is_stored_with_its_call_and_loads_back_intact() -> TestResult {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(20))
        .build()?;
    tool_turn(RigMemory::new(memory)).await
}

#[tokio::test]
async fn a_tool_turn_round_trips_through_sqlite() -> TestResult {
    // A durable store keeps chatmem's JSON form: the rig record in metadata goes through it.
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("chatmem.db")).await?;
    let memory = ChatMemory::builder(store).policy(WindowPolicy::messages(20)).build()?;
    tool_turn(RigMemory::new(memory)).await
}

async fn tool_turn<S: chatmem::Store + 'static>(memory: RigMemory<S>) -> TestResult {
    let stand_in = MockUpstream::after_sale().await;
    let agent = agent(&stand_in, memory.clone());

    let response = agent.prompt("LC202610060018 到哪了？").max_turns(3).await?;
    assert!(response.memory_append().is_some_and(|a| a.is_acknowledged()));
    assert!(response.output().contains("仓库今天发货"), "{}", response.output());

    // Stored: the user message, the call, its result (tool_call_id = the call's id), the answer.
    let id = chatmem::ConversationId::new(CONVERSATION)?;
    let stored = memory.memory().get(&id).await?;
    let roles: Vec<_> = stored.iter().map(|m| m.role().as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(stored[1].tool_calls()[0].id, "call_order_1");
    assert_eq!(stored[1].tool_calls()[0].name, "order_status");
    assert_eq!(stored[2].tool_call_id(), Some("call_order_1"));
    assert_eq!(stored[2].name.as_deref(), Some("order_status"));

    // Loaded back, it is what rig appended, block for block (origin, stop and provider
    // items included).
    let loaded = memory.load(&CONVERSATION.into()).await?;
    assert_eq!(loaded, response.messages());
    assert!(matches!(&loaded[2], Message::User { content } if matches!(content[0], UserContent::ToolResult(_))));

    // The next request carries the call and its result from memory.
    turn(&agent, "那单能退吗？").await?;
    let bodies = stand_in.requests();
    let last = bodies.last().ok_or("no request")?;
    let messages = last["messages"].as_array().ok_or("no messages")?;
    assert!(messages.iter().any(|m| m["tool_calls"][0]["id"] == "call_order_1"));
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_order_1")
    );
    Ok(())
}

#[tokio::test]
async fn an_invalid_conversation_id_is_a_clear_error() -> TestResult {
    let memory = RigMemory::new(ChatMemory::in_memory());
    let err = memory.load(&"bad\nid".into()).await.err().ok_or("accepted")?;
    let source = std::error::Error::source(&err).ok_or("no source")?;
    let err = source.downcast_ref::<chatmem_rig::Error>().ok_or("not ours")?;
    assert!(matches!(err, chatmem_rig::Error::InvalidConversationId(_)));
    assert!(err.to_string().contains("control character"), "{err}");
    Ok(())
}

#[derive(Deserialize)]
struct OrderArgs {
    order: String,
}

/// The after-sale tool: where an order is.
#[derive(Clone)]
struct OrderStatus;

impl Tool for OrderStatus {
    const NAME: &'static str = "order_status";
    type Args = OrderArgs;
    type Output = String;
    type Error = Infallible;

    fn description(&self) -> String {
        "Where an order is".to_owned()
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]})
    }

    async fn call(&self, _context: &mut ToolContext, args: Self::Args) -> Result<Self::Output, Self::Error> {
        Ok(format!("订单 {} 尚未发货，仓库今天发货。", args.order))
    }
}
