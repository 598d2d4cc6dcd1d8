//! Question: does any phase of chatmem's W2L turn grow with the turn number? Answer (after d206e0f and bc42b36): no; load about 0.1 µs and commit about 0.5 µs at turn 100 and at turn 2,000, the prompt phase at a full window 0.43–0.59 µs.
//!
//! Where a W2L turn's time goes, by turn number: chatmem's bench turn split into its phases
//! (load, start the turn with the user message, the prompt, the answer joining the turn, the
//! commit), each averaged over 20 conversations of 2,000 turns, for turns 51–150, 951–1,050 and
//! 1,901–2,000, Chinese and English turns apart. The window (100,000 tokens) fills by turn ~225.
//! `cargo run --release --bin turn_phases` (from `bench/explore`).

use chatmem::{ChatMemory, ConversationId, InMemoryStore, Message};
use std::hint::black_box;
use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = bench_common::in_memory::chatmem_tokens(bench_common::W2L_TOKENS)?;
    let memory = ChatMemory::builder(InMemoryStore::new()).policy(policy).build()?;
    let texts: Vec<(String, String)> = (0..1_000)
        .map(|i| (bench_common::user_text(i, ""), bench_common::answer_text(i, "")))
        .collect();
    let convs = 20;
    let mut acc = vec![[0f64; 6]; 2000];
    // One sum per turn number and phase, in ns per conversation.
    for c in 0..convs {
        let id = ConversationId::new(format!("p-{c}"))?;
        for i in 0..2000 {
            let (user, answer) = &texts[i % texts.len()];
            let t0 = Instant::now();
            let mut t = memory.begin(&id).await?;
            let t1 = Instant::now();
            if t.loaded().system().is_none() {
                t.push(Message::system(bench_common::SYSTEM));
            }
            t.push(Message::user(user.clone()));
            let t2 = Instant::now();
            black_box(t.prompt());
            let t3 = Instant::now();
            t.push(Message::assistant(answer.clone()));
            let t4 = Instant::now();
            t.commit().await?;
            let t5 = Instant::now();
            let d = [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0];
            for k in 0..6 {
                acc[i][k] += d[k].as_secs_f64() * 1e9 / convs as f64;
            }
        }
    }
    for (lo, hi) in [(50usize, 150usize), (950, 1050), (1900, 2000)] {
        // Turn i (0-based) is Chinese for even i, as every side of the bench makes it.
        for par in 0..2 {
            let mut s = [0f64; 6];
            let mut n = 0.0;
            for i in (lo..hi).filter(|i| i % 2 == par) {
                for k in 0..6 {
                    s[k] += acc[i][k];
                }
                n += 1.0;
            }
            println!(
                "turns {}-{hi} {}: load {:6.0} turn {:6.0} prompt {:6.0} push {:6.0} commit {:6.0} total {:6.0} ns",
                lo + 1,
                if par == 0 { "zh" } else { "en" },
                s[0] / n,
                s[1] / n,
                s[2] / n,
                s[3] / n,
                s[4] / n,
                s[5] / n
            );
        }
    }
    Ok(())
}
