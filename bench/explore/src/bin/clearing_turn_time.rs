//! Question: what does clearing old tool results cost a turn, in a 100,000-token window full of
//! tool uses? Answer: about 1.1 ms a turn (its two prompts and the commit each plan the window)
//! with 573 results cleared in a 2,401-message window, against 81 µs for the plain window's 691
//! messages; 2.0 ms before the placeholders' counts were kept across turns (`counter/memo.rs`).
//! What is left is making the placeholders and the blocks at every plan.
//!
//! One in-memory conversation of tool turns (a question, one call, a 2 KB JSON result, the
//! answer), cl100k, a 100,000-token window, timed from turn 400 to 800 (the window full: about
//! 150 turns uncleared, every turn evicting; with clearing, every use but the newest 3 cleared
//! in blocks of 5,000 tokens once past a 60,000-token trigger). Each turn: `begin`, the question,
//! `prompt`, the call and result, `prompt`, the answer, `commit` (two model calls).
//! `cargo run --release --bin clearing_turn_time`

use std::time::{Duration, Instant};

use chatmem::{ChatMemory, ClearToolResults, ConversationId, InMemoryStore, Message, ToolCall, WindowPolicy};

const TURNS: usize = 800;
const FROM: usize = 400;

fn record(i: usize) -> String {
    let lines: Vec<String> = (0..24)
        .map(|k| {
            format!(
                "{{\"sku\":\"SKU-{i}-{k:03}\",\"qty\":{},\"note\":\"boxed, ships from Hangzhou\"}}",
                k % 3 + 1
            )
        })
        .collect();
    format!(
        "{{\"order\":\"LC2026{i:08}\",\"status\":\"in transit\",\"lines\":[{}]}}",
        lines.join(",")
    )
}

async fn run(policy: WindowPolicy) -> Result<(Duration, usize, u64, usize), Box<dyn std::error::Error>> {
    let memory = ChatMemory::builder(InMemoryStore::new()).policy(policy).build()?;
    let id = ConversationId::new("tools")?;
    let mut timed = Duration::ZERO;
    let (mut held, mut saved, mut cleared) = (0, 0, 0);
    for i in 0..TURNS {
        let started = Instant::now();
        let mut turn = memory.begin(&id).await?;
        turn.push(Message::user(format!("Turn {i}: where is order LC2026{i:08}?")));
        std::hint::black_box(turn.prompt().len());
        let call = format!("call_{i}");
        turn.push(Message::assistant_tool_calls(vec![ToolCall::new(
            &call,
            "get_order",
            format!("{{\"order\":\"LC2026{i:08}\"}}"),
        )]));
        turn.push(Message::tool_result(&call, record(i)));
        let prompt_len = turn.prompt().len();
        let c = turn.cleared();
        turn.push(Message::assistant(format!(
            "Turn {i}: it is in transit and arrives in two days."
        )));
        turn.commit().await?;
        if i >= FROM {
            timed += started.elapsed();
            held += prompt_len;
            saved += c.tokens_saved;
            cleared += c.results;
        }
    }
    let n = (TURNS - FROM) as u64;
    Ok((timed / n as u32, held / n as usize, saved / n, cleared / n as usize))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let plain = WindowPolicy::tokens(100_000);
    let clear = ClearToolResults::new(3)?
        .trigger_tokens(60_000)
        .clear_at_least_tokens(5_000);
    let clearing = WindowPolicy::tokens(100_000).with_clearing(clear)?;
    println!("per turn (two prompts), turns {FROM}..{TURNS}, 100,000-token window, cl100k, in memory");
    for round in 0..3 {
        for (name, policy) in [("plain", plain.clone()), ("clearing", clearing.clone())] {
            let (per_turn, messages, saved, cleared) = run(policy).await?;
            println!(
                "round {round} {name:<9} {:>8.1} µs/turn  {messages:>5} messages sent  {cleared:>4} results cleared  {saved:>7} tokens saved",
                per_turn.as_secs_f64() * 1e6
            );
        }
    }
    Ok(())
}
