//! chatmem's W1 or W2L turn (the bench's turn) in a long loop, for a profiler:
//! `cargo build --release --example turn_loop`, then
//! `perf record -g target/release/examples/turn_loop w1 300000` (turns) or
//! `... turn_loop w2l 10` (conversations of 2,000 turns; timed over turns 1,000 to 2,000).
//! Prints the mean per turn.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, Cl100k, ConversationId, InMemoryStore, Message, TokenCounter, WindowPolicy};

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
        "w2l" => {
            let sys = Cl100k.count_message(&Message::system(bench_common::SYSTEM));
            let policy = WindowPolicy::try_tokens(bench_common::W2L_TOKENS + sys + chatmem::PER_LIST)?;
            (policy, args.next().map_or(Ok(10), |a| a.parse())?, 2_000, 1_000)
        }
        other => return Err(format!("unknown workload {other:?}: w1 or w2l").into()),
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
            let loaded = memory.load(&id).await?;
            let first = loaded.system().is_none().then(|| Message::system(bench_common::SYSTEM));
            let mut turn = memory.turn(loaded, first.into_iter().chain([Message::user(user.as_str())]));
            black_box(turn.prompt());
            turn.push(Message::assistant(answer.as_str()));
            memory.commit_turn(&id, turn).await?;
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
