//! The after-sale conversation in a 3-message window, with summaries: what the model
//! sees before and after turn 1 leaves the window.
//!
//! Run it (offline, no service needed):
//!
//! ```sh
//! cargo run -p chatmem --example summaries
//! ```
//!
//! The summarizer is a stand-in for a model call: it writes one line per message it reads, so
//! the output shows exactly what was summarized and when. Give `Summarizer::new` a real model
//! (`chatmem_openai::OpenAiModel`, a cheap one) in an application.

use async_trait::async_trait;
use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, ConversationId, InMemoryStore, Message, ModelError, Summarizer,
    WindowPolicy,
};

const TURNS: [(&str, &str); 4] = [
    (
        "我的订单是 LC202610060018，还没发货。",
        "已查到订单 LC202610060018，尚未发货。",
    ),
    ("物流一直没有更新。", "仓库今天会安排发货。"),
    ("我有点着急。", "理解，我已加急。"),
    ("那单能退吗？", "订单 LC202610060018 未发货，可以退款。"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(async {
        let memory = ChatMemory::builder(InMemoryStore::new())
            .policy(WindowPolicy::messages(3))
            .summarizer(Summarizer::new(LineKeeper))
            .build()?;
        let id = ConversationId::new("app-user-42-aftersale")?;
        let system = Message::system("你是邻里仓售后。未发货可退。");
        for (n, (question, answer)) in TURNS.iter().enumerate() {
            let mut turn = memory.begin(&id).await?;
            turn.extend([system.clone(), Message::user(*question)]);
            println!("turn {}: the model sees", n + 1);
            for m in turn.prompt() {
                println!(
                    "  {:<9} {}",
                    m.role().as_str(),
                    m.text().unwrap_or_default().replace('\n', "\n            ")
                );
            }
            turn.push(Message::assistant(*answer));
            turn.commit().await?;
        }
        Ok(())
    })
}

/// One line per message read, after the lines of the old summary.
#[derive(Debug)]
struct LineKeeper;

#[async_trait]
impl ChatModel for LineKeeper {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let input = request.last_text().into_owned();
        let (old, new) = input
            .split_once("\n\nMessages leaving the context:\n")
            .unwrap_or(("", &input));
        let old = old
            .trim_start_matches("Current summary:\n")
            .trim_start_matches("(none)");
        let summary: Vec<&str> = old.lines().chain(new.lines()).filter(|l| !l.is_empty()).collect();
        Ok(ChatResponse {
            message: Message::assistant(summary.join("\n")),
            usage: None,
            finish_reason: Some("stop".into()),
        })
    }
}
