//! How much of each prompt a provider's prefix cache could serve, with and without block
//! eviction (`WindowPolicy::evict_to`) and with and without summaries, over a 200-turn
//! conversation; and what the summaries cost.
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
//! The summarizer here is a stand-in that keeps the order numbers it reads (a real one is a
//! model call); its calls and tokens are counted as a model would bill them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chatmem::{
    ChatMemory, ChatModel, ChatRequest, ChatResponse, Cl100k, ConversationId, InMemoryStore, Message, ModelError,
    Summarizer, TokenCounter, WindowPolicy,
};

const TURNS: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    runtime.block_on(async {
        println!(
            "| policy | summaries | prefix-stable turns | cacheable input tokens | summary calls / 100 turns | summary tokens in + out / 100 turns |"
        );
        println!("|---|---|---:|---:|---:|---:|");
        for (name, policy) in [
            ("--max-messages 10", WindowPolicy::messages(10)),
            ("--max-messages 10 --evict-to 5", WindowPolicy::messages(10).evict_to(5)?),
            ("--max-tokens 2000", WindowPolicy::tokens(2_000)),
            ("--max-tokens 2000 --evict-to 1000", WindowPolicy::tokens(2_000).evict_to(1_000)?),
        ] {
            for summaries in [false, true] {
                let cost = Arc::new(Cost::default());
                let (stable, cached, total) = simulate(policy.clone(), summaries.then(|| cost.clone())).await?;
                let per_100 = |n: usize| n * 100 / TURNS;
                let (calls, tokens_in, tokens_out) = (
                    cost.calls.load(Ordering::Relaxed),
                    cost.tokens_in.load(Ordering::Relaxed),
                    cost.tokens_out.load(Ordering::Relaxed),
                );
                println!(
                    "| `{name}` | {} | {stable}/{} ({:.0}%) | {cached}/{total} ({:.0}%) | {} | {} + {} |",
                    if summaries { "on" } else { "off" },
                    TURNS - 1,
                    100.0 * stable as f64 / (TURNS - 1) as f64,
                    100.0 * cached as f64 / total as f64,
                    per_100(calls),
                    per_100(tokens_in),
                    per_100(tokens_out),
                );
            }
        }
        Ok(())
    })
}

/// Runs the conversation; returns prefix-stable turns, cacheable tokens and input tokens.
async fn simulate(
    policy: WindowPolicy,
    summaries: Option<Arc<Cost>>,
) -> Result<(usize, usize, usize), Box<dyn std::error::Error>> {
    let mut builder = ChatMemory::builder(InMemoryStore::new()).policy(policy);
    if let Some(cost) = summaries {
        builder = builder.summarizer(Summarizer::new(OrderKeeper(cost)));
    }
    let memory = builder.build()?;
    let id = ConversationId::new("prefix")?;
    let system = Message::system("你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。");
    let (mut previous, mut stable, mut cached, mut total) = (Vec::new(), 0, 0, 0);
    for n in 0..TURNS {
        let question = format!("第 {n} 个问题：订单 LC2026{n:08} 的物流到哪了？请告诉我预计送达时间和快递公司。");
        let mut turn = memory.begin(&id).await?;
        turn.extend([system.clone(), Message::user(question)]);
        // Kept for the next turn's comparison: a copy, as the prompt borrows from the turn.
        let prompt: Vec<Message> = turn.prompt().into_iter().cloned().collect();
        let common = prompt.iter().zip(&previous).take_while(|(a, b)| a == b).count();
        if n > 0 && common == previous.len() {
            stable += 1;
        }
        cached += Cl100k.count_messages(&prompt[..common]) - chatmem::tokens::PER_LIST;
        total += Cl100k.count_messages(&prompt);
        turn.push(Message::assistant(format!(
            "订单 LC2026{n:08} 已从杭州仓发出，由顺丰承运，预计明天下午送达。如需改地址请在今晚八点前告诉我。"
        )));
        turn.commit().await?;
        previous = prompt;
    }
    Ok((stable, cached, total))
}

/// What the summary calls cost: calls, input and output tokens (cl100k).
#[derive(Debug, Default)]
struct Cost {
    calls: AtomicUsize,
    tokens_in: AtomicUsize,
    tokens_out: AtomicUsize,
}

/// A stand-in summarizer: "Orders discussed:" and the last ten order numbers it has read.
#[derive(Debug)]
struct OrderKeeper(Arc<Cost>);

#[async_trait]
impl ChatModel for OrderKeeper {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ModelError> {
        let input = request.last_text().into_owned();
        let mut orders: Vec<&str> = input.match_indices("LC2026").map(|(i, _)| &input[i..i + 14]).collect();
        orders.dedup();
        let keep = &orders[orders.len().saturating_sub(10)..];
        let summary = format!("Orders discussed: {}.", keep.join(", "));
        self.0.calls.fetch_add(1, Ordering::Relaxed);
        self.0
            .tokens_in
            .fetch_add(Cl100k.count_messages(&request.messages), Ordering::Relaxed);
        self.0
            .tokens_out
            .fetch_add(Cl100k.count_text(&summary), Ordering::Relaxed);
        Ok(ChatResponse {
            message: Message::assistant(summary),
            usage: None,
            finish_reason: Some("stop".into()),
        })
    }
}
