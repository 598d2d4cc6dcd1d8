//! Per-turn cost of ChatMemory (get + add user + add assistant) over 2,000 turns, for a
//! 20-message, a 4,000-token and a 100,000-token window, against the same turn done the way
//! peers do it (re-tokenizing the whole window every turn), measured in the same run.
//!
//! Run with: `cargo bench -p chatmem --bench turn`

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, Cl100k, ConversationId, InMemoryStore, Message, TokenCounter, WindowPolicy};

const TURNS: usize = 2_000;

/// cl100k that counts how many strings it tokenizes.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);

impl TokenCounter for Counting {
    fn name(&self) -> &str {
        "cl100k_base"
    }
    fn count_text(&self, text: &str) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed);
        Cl100k.count_text(text)
    }
}

fn user(i: usize) -> Message {
    Message::user(format!(
        "Turn {i}: my order LC2026100600{:02} has not shipped yet, can you check the status and tell me when it will arrive?",
        i % 100
    ))
}

fn assistant(i: usize) -> Message {
    Message::assistant(format!(
        "Turn {i}: I checked order LC2026100600{:02}. It is packed and waiting for the courier; it should ship within \
         two working days. Orders that have not shipped can be refunded in full, so tell me if you want a refund instead.",
        i % 100
    ))
}

struct Row {
    name: &'static str,
    window_messages: usize,
    window_tokens: u64,
    per_turn: Duration,
    steady: Duration,
    tokenized_per_turn: f64,
    naive_steady: Duration,
}

async fn measure(name: &'static str, policy: WindowPolicy, naive: bool) -> Row {
    let counter = Arc::new(Counting::default());
    let memory = ChatMemory::builder(InMemoryStore::new())
        .policy(policy)
        .counter(counter.clone())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let id = ConversationId::new("bench").unwrap_or_else(|e| panic!("{e}"));
    memory
        .add(
            &id,
            [Message::system(
                "You are the after-sale assistant. Unshipped orders can be refunded.",
            )],
        )
        .await
        .ok();
    let start = Instant::now();
    let mut steady_start = start;
    let tokenized_before = counter.0.load(Ordering::Relaxed);
    for i in 0..TURNS {
        if i == TURNS * 3 / 4 {
            steady_start = Instant::now();
        }
        let window = memory.get(&id).await.unwrap_or_else(|e| panic!("{e}"));
        if naive {
            // What rig, LlamaIndex and LangChain4j do: count the whole window again.
            black_box(Cl100k.count_messages(&window));
        }
        black_box(&window);
        memory.add(&id, [user(i)]).await.unwrap_or_else(|e| panic!("{e}"));
        memory.add(&id, [assistant(i)]).await.unwrap_or_else(|e| panic!("{e}"));
    }
    let end = Instant::now();
    let loaded = memory.load(&id).await.unwrap_or_else(|e| panic!("{e}"));
    let steady_turns = (TURNS - TURNS * 3 / 4) as u32;
    Row {
        name,
        window_messages: loaded.len(),
        window_tokens: loaded.tokens(),
        per_turn: (end - start) / TURNS as u32,
        steady: (end - steady_start) / steady_turns,
        tokenized_per_turn: (counter.0.load(Ordering::Relaxed) - tokenized_before) as f64 / TURNS as f64,
        naive_steady: Duration::ZERO,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        ("20 messages", WindowPolicy::messages(20)),
        ("4,000 tokens", WindowPolicy::tokens(4_000)),
        ("100,000 tokens", WindowPolicy::tokens(100_000)),
    ];
    println!("chatmem per-turn cost (get + add user + add assistant), {TURNS} turns, in-memory store, cl100k_base");
    println!(
        "{:<16} {:>8} {:>8} {:>12} {:>14} {:>11} {:>18} {:>8}",
        "window", "msgs", "tokens", "µs/turn", "µs/turn last¼", "tok'd/turn", "re-tokenize last¼", "ratio"
    );
    let mut rows = Vec::new();
    for (name, policy) in cases {
        let mut row = rt.block_on(measure(name, policy.clone(), false));
        row.naive_steady = rt.block_on(measure(name, policy, true)).steady;
        println!(
            "{:<16} {:>8} {:>8} {:>12.1} {:>14.1} {:>11.1} {:>18.1} {:>7.1}x",
            row.name,
            row.window_messages,
            row.window_tokens,
            row.per_turn.as_secs_f64() * 1e6,
            row.steady.as_secs_f64() * 1e6,
            row.tokenized_per_turn,
            row.naive_steady.as_secs_f64() * 1e6,
            row.naive_steady.as_secs_f64() / row.steady.as_secs_f64(),
        );
        rows.push(row);
    }
    let small = &rows[0];
    let big = &rows[2];
    println!(
        "100,000-token window vs 20-message window: {:.1}x the per-turn time for {:.0}x the messages; \
         strings tokenized per turn stay {:.1} (only the two new messages).",
        big.steady.as_secs_f64() / small.steady.as_secs_f64(),
        big.window_messages as f64 / small.window_messages as f64,
        big.tokenized_per_turn,
    );
}
