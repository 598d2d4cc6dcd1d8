//! The memory advisor around a stand-in model, offline: the model answers with the order
//! numbers it can see in its prompt, so the output shows what memory carried from turn to turn
//! and that two conversations never see each other's.
//!
//! Run it (no model, no key, no service needed):
//!
//! ```sh
//! cargo run -p chatmem-advisor --example stub_model
//! ```
//!
//! For a real model see the `aftersale` example.

use async_trait::async_trait;
use chatmem::{ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, Message, ModelError, WindowPolicy};
use chatmem_advisor::{MemoryAdvisor, TurnRequest};

/// Answers with every order number (`LC` + 12 digits) found in the messages it is sent.
#[derive(Debug)]
struct OrderEcho;

#[async_trait]
impl ChatModel for OrderEcho {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let mut seen: Vec<String> = Vec::new();
        for m in &request.messages {
            let text = m.text().unwrap_or_default();
            for (i, _) in text.match_indices("LC") {
                let digits: String = text[i + 2..].chars().take_while(char::is_ascii_digit).collect();
                let order = format!("LC{digits}");
                if digits.len() == 12 && !seen.contains(&order) {
                    seen.push(order);
                }
            }
        }
        let answer = if seen.is_empty() {
            "请提供订单号。".to_string()
        } else {
            format!("订单 {}：未发货，可以退。", seen.join("、"))
        };
        Ok(ChatResponse {
            message: Message::assistant(answer),
            usage: None,
            finish_reason: Some("stop".into()),
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let memory = ChatMemory::builder(chatmem::InMemoryStore::new())
        .policy(WindowPolicy::messages(6))
        .build()?;
    let advisor = MemoryAdvisor::new(OrderEcho, memory);
    let alice = ConversationId::new("app-user-42-aftersale")?;
    let bob = ConversationId::new("app-user-43-aftersale")?;
    let system = "你是邻里仓售后。未发货可退。";

    for (id, text) in [
        (&alice, "我的订单是 LC202610060018，还没发货。"),
        (&bob, "我想退货。"),
        (&alice, "那单能退吗？"),
        (&bob, "那单能退吗？"),
    ] {
        let turn = advisor.call(id, TurnRequest::user(text).with_system(system)).await?;
        println!("{id}: {text}\n  -> {}", turn.text());
    }
    Ok(())
}
