//! A rig agent whose conversation memory is chatmem on an SQLite file: the after-sale turns,
//! with a "restart" between them, against a stand-in OpenAI-compatible model that this
//! example starts on 127.0.0.1 (offline; no key, no service).
//!
//! Run it:
//!
//! ```sh
//! cargo run -p chatmem-rig --example agent
//! ```

use chatmem::{ChatMemory, WindowPolicy};
use chatmem_rig::RigMemory;
use chatmem_sqlite::SqliteStore;
use chatmem_test::upstream::{MockUpstream, ORDER};
use rig_agent::AgentBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let stand_in = MockUpstream::after_sale().await;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("chatmem.db");

    for prompt in ["我的订单是 LC202610060018，还没发货。", "那单能退吗？"] {
        // A new memory per turn, as a new process would open it: only the file remembers.
        let memory = ChatMemory::builder(SqliteStore::open(&path).await?)
            .policy(WindowPolicy::messages(6))
            .build()?;
        let mut config = rig_core::providers::openai::OpenAIConfig::new("sk-stand-in");
        config.base_url = stand_in.base_url.clone();
        let agent = AgentBuilder::new(config.client().chat("stand-in"))
            .preamble("你是邻里仓售后。未发货可退。")
            .memory(RigMemory::new(memory)) // the one line: rig's InMemoryConversationMemory → chatmem
            .conversation("app-user-42-aftersale")
            .build();
        let answer = agent.prompt(prompt).await?;
        println!("user       {prompt}\nassistant  {}", answer.output());
    }
    let sent = stand_in
        .requests()
        .last()
        .map(|b| b["messages"].to_string())
        .unwrap_or_default();
    println!("turn 2 sent the order number from memory: {}", sent.contains(ORDER));
    Ok(())
}
