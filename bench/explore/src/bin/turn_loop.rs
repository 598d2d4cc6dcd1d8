//! Question: what does chatmem's in-memory bench turn spend its instructions on (a long loop for perf and callgrind)? Answer: a W1 turn about 9.4 k instructions (d6cbeec); a W2 or W2L turn mostly `bpe`'s encoder counting the two new messages (75% at a full W2L window).
//!
//! chatmem's W1, W2 or W2L turn (the bench's turn) in a long loop, for a profiler:
//! `cargo build --release --bin turn_loop`, then
//! `perf record -g target/release/turn_loop w1 300000` (turns; `w2 20000` likewise) or
//! `... turn_loop w2l 10` (conversations of 2,000 turns; timed over turns 1,000 to 2,000).
//! Prints the mean per turn.

use std::time::{Duration, Instant};

use chatmem::{ChatMemory, ConversationId, InMemoryStore, WindowPolicy};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "w1".into());
    let (policy, conversations, turns, from) = match which.as_str() {
        "w1" => (
            WindowPolicy::messages(bench_common::W1_MESSAGES + 1),
            1,
            args.next().map_or(Ok(300_000), |a| a.parse())?,
            0,
        ),
        "w2" => (
            bench_common::in_memory::chatmem_tokens(bench_common::W2_TOKENS)?,
            1,
            args.next().map_or(Ok(20_000), |a| a.parse())?,
            100,
        ),
        "w2l" => {
            let policy = bench_common::in_memory::chatmem_tokens(bench_common::W2L_TOKENS)?;
            (policy, args.next().map_or(Ok(10), |a| a.parse())?, 2_000, 1_000)
        }
        other => return Err(format!("unknown workload {other:?}: w1, w2 or w2l").into()),
    };
    let memory = ChatMemory::builder(InMemoryStore::new()).policy(policy).build()?;
    let texts: Vec<(String, String)> = (0..1_000)
        .map(|i| (bench_common::user_text(i, ""), bench_common::answer_text(i, "")))
        .collect();
    let mut timed = Duration::ZERO;
    for c in 0..conversations {
        let id = ConversationId::new(format!("loop-{c}"))?;
        for i in 0..turns {
            let (user, answer) = &texts[i % texts.len()];
            let start = Instant::now();
            bench_common::in_memory::chatmem_turn(&memory, &id, user.clone(), answer.clone()).await?;
            if i >= from {
                timed += start.elapsed();
            }
        }
    }
    let n = conversations * (turns - from);
    println!(
        "{which}: {:.3} µs per turn (mean of {n})",
        timed.as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
