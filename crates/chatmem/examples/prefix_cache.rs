//! How much of each prompt a provider's prefix cache could serve, with and without block
//! eviction (`WindowPolicy::evict_to`), over a 200-turn conversation.
//!
//! Run it (offline, no service needed):
//!
//! ```sh
//! cargo run --release -p chatmem --example prefix_cache
//! ```
//!
//! A turn's prompt is "prefix-stable" when it begins with the whole previous prompt; the
//! cacheable tokens of a turn are those of the longest common beginning with the previous
//! prompt (what OpenAI's, DeepSeek's or Anthropic's prompt caching bill at a discount).

use chatmem::{ChatMemory, Cl100k, ConversationId, InMemoryStore, Message, TokenCounter, WindowPolicy};

const TURNS: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(async {
        println!("| policy | prefix-stable turns | cacheable input tokens |");
        println!("|---|---:|---:|");
        for (name, policy) in [
            ("--max-messages 10", WindowPolicy::messages(10)),
            (
                "--max-messages 10 --evict-to 5",
                WindowPolicy::messages(10).evict_to(5)?,
            ),
            ("--max-tokens 2000", WindowPolicy::tokens(2_000)),
            (
                "--max-tokens 2000 --evict-to 1000",
                WindowPolicy::tokens(2_000).evict_to(1_000)?,
            ),
        ] {
            let (stable, cached, total) = simulate(policy).await?;
            println!(
                "| `{name}` | {stable}/{} ({:.0}%) | {cached}/{total} ({:.0}%) |",
                TURNS - 1,
                100.0 * stable as f64 / (TURNS - 1) as f64,
                100.0 * cached as f64 / total as f64
            );
        }
        Ok(())
    })
}

/// Runs the conversation; returns prefix-stable turns, cacheable tokens and input tokens.
async fn simulate(policy: WindowPolicy) -> Result<(usize, usize, usize), Box<dyn std::error::Error>> {
    let memory = ChatMemory::builder(InMemoryStore::new()).policy(policy).build()?;
    let id = ConversationId::new("prefix")?;
    let system = Message::system("你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。");
    let (mut previous, mut stable, mut cached, mut total) = (Vec::new(), 0, 0, 0);
    for n in 0..TURNS {
        let question = format!("第 {n} 个问题：订单 LC2026{n:08} 的物流到哪了？请告诉我预计送达时间和快递公司。");
        let mut turn = memory.turn(memory.load(&id).await?, [system.clone(), Message::user(question)]);
        let prompt = turn.prompt();
        let common = prompt.iter().zip(&previous).take_while(|(a, b)| a == b).count();
        if n > 0 && common == previous.len() {
            stable += 1;
        }
        cached += Cl100k.count_messages(&prompt[..common]) - chatmem::PER_LIST;
        total += Cl100k.count_messages(&prompt);
        turn.push(Message::assistant(format!(
            "订单 LC2026{n:08} 已从杭州仓发出，由顺丰承运，预计明天下午送达。如需改地址请在今晚八点前告诉我。"
        )));
        memory.commit_turn(&id, turn).await?;
        previous = prompt;
    }
    Ok((stable, cached, total))
}
