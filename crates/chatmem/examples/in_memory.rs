//! The after-sale conversation on the in-memory store: what the model sees on each
//! turn, with a window of 6 messages.
//!
//! Run it (offline, no service needed):
//!
//! ```sh
//! cargo run -p chatmem --example in_memory
//! ```
//!
//! The model here is a stand-in that answers from a script; see `chatmem-advisor`'s examples
//! for a real one. The in-memory store lives in this process: a restart forgets everything.

use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message, WindowPolicy};

const SYSTEM: &str = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(6))
        .build()?;
    let id = ConversationId::new("app-user-42-aftersale")?;
    let script = [
        (
            "我的订单是 LC202610060018，还没发货。",
            "收到，订单 LC202610060018 尚未发货。",
        ),
        ("那单能退吗？", "订单 LC202610060018 未发货，可以退。"),
        ("退款多久到账？", "订单 LC202610060018 的退款 1-3 个工作日到账。"),
        ("好的，谢谢。", "不客气。"),
    ];
    for (n, (question, answer)) in script.into_iter().enumerate() {
        // One turn: load the window (one store round trip), count the new messages once,
        // send the prompt, commit the whole turn in one atomic write.
        let mut turn = memory.begin(&id).await?;
        turn.extend([Message::system(SYSTEM), Message::user(question)]);
        let prompt = turn.prompt();
        println!("turn {}: the model sees {} messages", n + 1, prompt.len());
        for m in &prompt {
            println!("  {:<9} {}", m.role().as_str(), m.text().unwrap_or_default());
        }
        turn.push(Message::assistant(answer));
        turn.commit().await?;
    }
    println!(
        "\nmemory now holds {} messages (system + the newest turns)",
        memory.get(&id).await?.len()
    );
    Ok(())
}
