//! Per-turn latency of `ChatMemory` over `PostgresStore`: load, then commit user +
//! assistant (KeepHistory, 20-message window), with 10, 1,000 and 100,000 messages of
//! history. A turn reads only the window and writes only the new messages, so the
//! latency should not grow with the history.
//!
//! `CHATMEM_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p chatmem-postgres`
//! (`CHATMEM_BENCH_TURNS` sets the measured turns per size, default 300). Works in a
//! throwaway schema that it drops at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, Commit, ConversationId, Message, Retention, Store, StoredMessage, WindowPolicy};
use chatmem_postgres::PostgresStore;
use deadpool_postgres::tokio_postgres::{self, NoTls};

const SIZES: [u64; 3] = [10, 1_000, 100_000];
const WINDOW: u64 = 20;
const BATCH: u64 = 5_000;
const WARMUP: usize = 20;

fn main() {
    let Ok(url) = std::env::var("CHATMEM_TEST_PG_URL") else {
        println!("skipping: CHATMEM_TEST_PG_URL not set (start PostgreSQL and set it to run this bench)");
        return;
    };
    let turns = std::env::var("CHATMEM_BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(300usize);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(&url, turns));
}

fn message(seq: u64) -> Message {
    if seq % 2 == 1 {
        Message::user(format!("question {seq}: where is my order LC2026{seq:08}?"))
    } else {
        Message::assistant(format!("answer {seq}: it ships tomorrow from the Hangzhou warehouse."))
    }
}

/// Writes `size` messages in large batches straight through `Store::commit`, with the
/// window on the last 20.
async fn build_history(store: &PostgresStore, id: &ConversationId, size: u64) {
    let mut version = 0;
    let mut next = 1;
    while next <= size {
        let end = (next + BATCH - 1).min(size);
        let append = (next..=end)
            .map(|seq| StoredMessage::new(seq, 20, message(seq)))
            .collect();
        let commit = Commit {
            expected_version: version,
            system: (version == 0)
                .then(|| StoredMessage::new(1, 12, Message::system("You are a helpful after-sales agent."))),
            append,
            window_start: end.saturating_sub(WINDOW - 1).max(1),
            retention: Retention::KeepHistory,
            ttl: None,
        };
        version = store.commit(id, commit).await.expect("building history");
        next = end + 1;
    }
}

struct Stats {
    size: u64,
    mean: Duration,
    p50: Duration,
    p95: Duration,
    p99: Duration,
}

async fn measure(memory: &ChatMemory<Arc<PostgresStore>>, id: &ConversationId, size: u64, turns: usize) -> Stats {
    let mut samples = Vec::with_capacity(turns);
    for turn in 0..WARMUP + turns {
        let start = Instant::now();
        let window = memory.load(id).await.expect("load");
        let after = memory
            .commit(
                id,
                window,
                [
                    Message::user(format!("turn {turn}: can I return it?")),
                    Message::assistant(format!("turn {turn}: yes, within seven days.")),
                ],
            )
            .await
            .expect("commit");
        let took = start.elapsed();
        assert!(after.len() > 2, "the window holds the system message and the turns");
        if turn >= WARMUP {
            samples.push(took);
        }
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        size,
        mean: samples.iter().sum::<Duration>() / samples.len() as u32,
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
    }
}

async fn run(url: &str, turns: usize) {
    let schema = format!("cmbench_{:016x}", fastrand::u64(..));
    let store = Arc::new(
        PostgresStore::builder(url)
            .schema(&schema)
            .pool_size(2)
            .connect()
            .await
            .expect("connect"),
    );
    let memory = ChatMemory::builder(store.clone())
        .policy(WindowPolicy::messages(WINDOW as usize).expect("policy"))
        .retention(Retention::KeepHistory)
        .build();
    let mut results = Vec::new();
    for size in SIZES {
        let id = ConversationId::new(format!("bench-{size}")).expect("id");
        let start = Instant::now();
        build_history(&store, &id, size).await;
        eprintln!("built {size} messages of history in {:?}", start.elapsed());
        results.push(measure(&memory, &id, size, turns).await);
    }

    println!("chatmem-postgres: one turn = ChatMemory::load + ChatMemory::commit(user, assistant)");
    println!("KeepHistory, 20-message window, {turns} turns per size after {WARMUP} warm-up turns");
    println!(
        "{:>9} | {:>9} | {:>9} | {:>9} | {:>9}",
        "history", "mean", "p50", "p95", "p99"
    );
    println!("{:-<9}-+-{:-<9}-+-{:-<9}-+-{:-<9}-+-{:-<9}", "", "", "", "", "");
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    for s in &results {
        println!(
            "{:>9} | {:>9} | {:>9} | {:>9} | {:>9}",
            s.size,
            ms(s.mean),
            ms(s.p50),
            ms(s.p95),
            ms(s.p99)
        );
    }
    let (small, large) = (&results[0], &results[results.len() - 1]);
    println!(
        "ratio 100,000 / 10: mean {:.2}, p50 {:.2}",
        large.mean.as_secs_f64() / small.mean.as_secs_f64(),
        large.p50.as_secs_f64() / small.p50.as_secs_f64()
    );

    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to drop the schema");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("dropping the bench schema");
}
