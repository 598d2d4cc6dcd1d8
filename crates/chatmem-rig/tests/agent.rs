//! A rig agent with chatmem as its memory, against a stand-in OpenAI-compatible server on
//! loopback: the after-sale scenario across two turns, across a restart on SQLite, and a
//! tool-using turn stored and loaded back intact.

mod common;

use std::convert::Infallible;

use chatmem::{Body, ChatMemory, InMemoryStore, Retention, WindowPolicy};
use chatmem_rig::RigMemory;
use chatmem_sqlite::SqliteStore;
use common::{ORDER, StandIn, model, request_text};
use rig_agent::AgentBuilder;
use rig_agent::tool::{Tool, ToolContext};
use rig_core::memory::ConversationMemory;
use rig_core::message::{Message, UserContent};
use serde::Deserialize;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CONVERSATION: &str = "app-user-42-aftersale";

fn agent(stand_in: &StandIn, memory: impl ConversationMemory + 'static) -> rig_agent::Agent {
    AgentBuilder::new(model(stand_in))
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
    let stand_in = StandIn::start().await?;
    let memory = RigMemory::new(
        ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(10))
            .build()?,
    );
    let agent = agent(&stand_in, memory.clone());

    turn(&agent, "我的订单是 LC202610060018，还没发货。").await?;
    let answer = turn(&agent, "那单能退吗？").await?;

    let bodies = stand_in.bodies();
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

#[tokio::test]
async fn a_new_process_over_the_same_sqlite_file_continues() -> TestResult {
    let stand_in = StandIn::start().await?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("chatmem.db");
    let open = || async {
        let store = SqliteStore::open(&path).await?;
        let memory = ChatMemory::builder(store)
            .policy(WindowPolicy::messages(10))
            .retention(Retention::KeepHistory)
            .build()?;
        Ok::<_, Box<dyn std::error::Error>>(RigMemory::new(memory))
    };

    {
        let agent = agent(&stand_in, open().await?);
        turn(&agent, "我的订单是 LC202610060018，还没发货。").await?;
    } // the first "process" ends: its memory, store and connections are dropped

    let agent = agent(&stand_in, open().await?);
    let answer = turn(&agent, "那单能退吗？").await?;
    let bodies = stand_in.bodies();
    let second = request_text(bodies.last().ok_or("no request")?);
    assert!(
        second.contains(ORDER),
        "the second request lacks the order number: {second}"
    );
    assert_eq!(answer, format!("订单 {ORDER} 未发货，可以退。"));
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
    let stand_in = StandIn::start().await?;
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
    let bodies = stand_in.bodies();
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
