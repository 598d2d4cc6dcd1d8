//! Per-turn latency of the SQLite store at growing history sizes.
//!
//! A turn is what an application does per model call: `ChatMemory::load` then
//! `ChatMemory::commit` of a user + assistant pair, with `Retention::KeepHistory` and a
//! 20-message window. Histories of 10, 1,000 and 100,000 messages are built quickly with
//! large `Store::commit` batches, all in one file. Prints a table, the statements per load
//! and commit (counted by SQLite's trace hook) and the 100,000 / 10 ratio.
//!
//! Run with `cargo bench -p chatmem-sqlite`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, Commit, ConversationId, Heuristic, Message, Retention, Store, StoredMessage, WindowPolicy};
use chatmem_sqlite::SqliteStore;

const SIZES: [u64; 3] = [10, 1_000, 100_000];
const WARMUP: usize = 50;
const TURNS: usize = 500;
const BUILD_BATCH: u64 = 10_000;

fn message(seq: u64) -> Message {
    // Odd sequences are questions, even ones answers, ~150 bytes each like a short chat.
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor";
    if seq % 2 == 1 {
        Message::user(format!("question {seq}: {filler}"))
    } else {
        Message::assistant(format!("answer {seq}: {filler}"))
    }
}

/// Builds `size` messages with the window on the last 20 (starting on a question).
async fn build(store: &SqliteStore, id: &ConversationId, size: u64) {
    let mut version = 0;
    let mut seq = 1;
    while seq <= size {
        let end = (seq + BUILD_BATCH - 1).min(size);
        let append: Vec<StoredMessage> = (seq..=end).map(|s| StoredMessage::new(s, 30, message(s))).collect();
        let window_start = (end + 1).saturating_sub(20).max(1) | 1;
        version = store
            .commit(
                id,
                Commit {
                    expected_version: version,
                    system: (version == 0)
                        .then(|| StoredMessage::new(1, 12, Message::system("You are a helpful shop assistant."))),
                    append,
                    window_start,
                    retention: Retention::KeepHistory,
                    ttl: None,
                },
            )
            .await
            .expect("building history");
        seq = end + 1;
    }
}

struct Row {
    size: u64,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    mean: Duration,
    load_stmts: u64,
    commit_stmts: u64,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

async fn measure(store: &SqliteStore, memory: &ChatMemory<SqliteStore>, id: &ConversationId, size: u64) -> Row {
    let mut times = Vec::with_capacity(TURNS);
    let (mut load_stmts, mut commit_stmts) = (0, 0);
    for turn in 0..WARMUP + TURNS {
        let started = Instant::now();
        let s0 = store.statements_executed();
        let window = memory.load(id).await.expect("load");
        let s1 = store.statements_executed();
        let after = memory
            .commit(
                id,
                window,
                [
                    Message::user(format!("turn {turn} question")),
                    Message::assistant(format!("turn {turn} answer")),
                ],
            )
            .await
            .expect("commit");
        let s2 = store.statements_executed();
        let elapsed = started.elapsed();
        assert!(after.len() <= 21);
        if turn >= WARMUP {
            times.push(elapsed);
            load_stmts = load_stmts.max(s1 - s0);
            commit_stmts = commit_stmts.max(s2 - s1);
        }
    }
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    times.sort();
    Row {
        size,
        p50: pct(&times, 0.5),
        p90: pct(&times, 0.9),
        p99: pct(&times, 0.99),
        mean,
        load_stmts,
        commit_stmts,
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bench.db");
        let store = SqliteStore::open(&path).await.expect("open");
        let memory = ChatMemory::builder(store.clone())
            .policy(WindowPolicy::messages(20).expect("policy"))
            .retention(Retention::KeepHistory)
            .counter(Arc::new(Heuristic))
            .build();
        let ids: Vec<ConversationId> = SIZES
            .iter()
            .map(|s| ConversationId::new(format!("bench-{s}")).expect("id"))
            .collect();
        let started = Instant::now();
        for (id, size) in ids.iter().zip(SIZES) {
            build(&store, id, size).await;
        }
        let file_mb = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / 1e6);
        println!(
            "built histories of {SIZES:?} messages in {:?} (file {file_mb:.1} MB + WAL)",
            started.elapsed()
        );
        println!(
            "per turn = ChatMemory::load + ChatMemory::commit(user, assistant); KeepHistory, 20-message window; \
             {TURNS} turns after {WARMUP} warm-up (each turn adds 2 messages, so a history grows by {} during its run)",
            2 * (WARMUP + TURNS)
        );
        println!();
        println!("| history msgs | p50 µs | p90 µs | p99 µs | mean µs | stmts/load | stmts/commit |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        let mut rows = Vec::new();
        for (id, size) in ids.iter().zip(SIZES) {
            let row = measure(&store, &memory, id, size).await;
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                row.size,
                us(row.p50),
                us(row.p90),
                us(row.p99),
                us(row.mean),
                row.load_stmts,
                row.commit_stmts
            );
            rows.push(row);
        }
        let (small, big) = (&rows[0], &rows[rows.len() - 1]);
        println!();
        println!(
            "ratio {} / {} messages: p50 {:.2}x, mean {:.2}x",
            big.size,
            small.size,
            big.p50.as_secs_f64() / small.p50.as_secs_f64(),
            big.mean.as_secs_f64() / small.mean.as_secs_f64()
        );
    });
}
