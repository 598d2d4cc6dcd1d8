//! Run with: DEEPSEEK_API_KEY=... cargo run -p chatmem-advisor --example aftersale
//!
//! The after-sale scenario (seed 003) against a real provider: turn 1 gives the order
//! number, turn 2 only asks "那单能退吗？" and the answer must still name the order, because
//! the advisor sends turn 1 from memory. A second conversation asks the same question and
//! must not see the order number.
//!
//! Options: `--provider deepseek|openai|ollama` (or `CHATMEM_PROVIDER`; default deepseek),
//! `--model NAME`, `--base-url URL`. For a local Ollama:
//! `cargo run -p chatmem-advisor --example aftersale -- --provider ollama --model qwen2.5`.

use std::io::Write;

use chatmem::{ChatMemory, ConversationId, InMemoryStore, WindowPolicy};
use chatmem_advisor::{MemoryAdvisor, TurnEvent, TurnRequest};
use chatmem_openai::Provider;
use futures_util::StreamExt;

const SYSTEM: &str = "你是邻里仓售后。未发货可退。制度版本 policy-2026.10。若对话历史中出现订单号，回答里必须原样写出该订单号。不要发明优惠券。";
const ORDER: &str = "LC202610060018";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut cause = e.source();
            while let Some(c) = cause {
                eprintln!("  caused by: {c}");
                cause = c.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut provider = std::env::var("CHATMEM_PROVIDER").unwrap_or_else(|_| "deepseek".into());
    let (mut model_name, mut base_url) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--provider" => provider = value()?,
            "--model" => model_name = Some(value()?),
            "--base-url" => base_url = Some(value()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let provider: Provider = provider.parse()?;
    let mut builder = provider.builder();
    if let Some(m) = model_name {
        builder = builder.model(m);
    }
    if let Some(u) = base_url {
        builder = builder.base_url(u);
    }
    let model = builder.build()?;
    println!("provider {provider}, model {}, window 6 messages\n", model.model());

    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(WindowPolicy::messages(6))
        .build()?;
    let advisor = MemoryAdvisor::new(model, memory);
    let alice = ConversationId::new("app-user-42-aftersale")?;
    let bob = ConversationId::new("app-user-43-aftersale")?;
    let turn = |text: &str| TurnRequest::user(text).with_system(SYSTEM);

    let q1 = "我的订单是 LC202610060018，还没发货。";
    println!("[{alice}] 用户: {q1}");
    let a1 = advisor.call(&alice, turn(q1)).await?;
    println!("[{alice}] 客服: {}\n", a1.text());

    // Turn 2 streams; the commit happens when the stream ends.
    let q2 = "那单能退吗？";
    println!("[{alice}] 用户: {q2}");
    print!("[{alice}] 客服: ");
    let mut stream = advisor.stream(&alice, turn(q2)).await?;
    let mut answer = None;
    while let Some(event) = stream.next().await {
        match event? {
            TurnEvent::Delta(d) => {
                print!("{}", d.content.unwrap_or_default());
                std::io::stdout().flush()?;
            }
            TurnEvent::Done(t) => answer = Some(t),
            _ => {}
        }
    }
    println!("\n");
    let a2 = answer.ok_or("the stream ended without an answer")?;

    println!("[{bob}] 用户: {q2}");
    let b = advisor.call(&bob, turn(q2)).await?;
    println!("[{bob}] 客服: {}\n", b.text());

    println!("memory of {alice}:");
    for m in advisor.memory().get(&alice).await? {
        println!("  {:<9} {}", m.role().as_str(), m.text().unwrap_or_default());
    }
    println!();
    let remembered = a2.text().contains(ORDER);
    let isolated = !b.text().contains(ORDER);
    println!("turn 2 names {ORDER}: {}", if remembered { "yes" } else { "NO" });
    println!("{bob} never sees it: {}", if isolated { "yes" } else { "NO" });
    if remembered && isolated {
        Ok(())
    } else {
        Err("the scenario's checks failed".into())
    }
}
