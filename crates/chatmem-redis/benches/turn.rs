//! Per-turn latency of a Redis-backed `ChatMemory` (load + commit of a user and an
//! assistant message, `KeepHistory`, 20-message window) as the stored history grows from
//! 10 to 100,000 messages. Needs `CHATMEM_TEST_REDIS_URL`; prints a skip line without it.
//!
//! Run: `CHATMEM_TEST_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p chatmem-redis --bench turn`

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chatmem::{ChatMemory, Commit, ConversationId, Heuristic, Message, Retention, Store, StoredMessage, WindowPolicy};
use chatmem_redis::RedisStore;

const HISTORIES: [u64; 3] = [10, 1_000, 100_000];
const BATCH: u64 = 10_000;
const WINDOW: u64 = 20;
const TURNS: usize = 300;
const ROUNDS: usize = 3;

fn main() {
    let Ok(url) = std::env::var("CHATMEM_TEST_REDIS_URL") else {
        {
            // Written to stderr directly: libtest captures eprintln! output of passing tests.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipping: CHATMEM_TEST_REDIS_URL not set (start Redis and set it to run this bench)"
            );
        }
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(&url));
}

/// Stored messages `from..=to`, alternating user (odd seqs) and assistant.
fn messages(from: u64, to: u64) -> Vec<StoredMessage> {
    (from..=to)
        .map(|seq| {
            let m = if seq % 2 == 1 {
                Message::user(format!("question {seq}: where is my order LC2026{seq:08}?"))
            } else {
                Message::assistant(format!("answer {seq}: it left the warehouse this morning."))
            };
            StoredMessage::new(seq, 16, m)
        })
        .collect()
}

/// Writes `history` messages to `id` in large batches straight through `Store::commit`,
/// leaving the window on the last 20.
async fn build_history(store: &RedisStore, id: &ConversationId, history: u64) {
    let mut version = 0;
    let mut next = 1;
    while next <= history {
        let last = (next + BATCH - 1).min(history);
        // Odd seqs are user messages: the window starts on one.
        let window_start = last.saturating_sub(WINDOW - 1).max(1) | 1;
        version = store
            .commit(
                id,
                Commit {
                    expected_version: version,
                    system: Some(StoredMessage::new(1, 8, Message::system("You answer order questions.")))
                        .filter(|_| version == 0),
                    append: messages(next, last),
                    window_start,
                    retention: Retention::KeepHistory,
                    ttl: None,
                },
            )
            .await
            .expect("building the history");
        next = last + 1;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

async fn run(url: &str) {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let prefix = format!("chatmem-bench-{millis}-{:08x}", fastrand::u32(..));
    let store = RedisStore::builder(url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .expect("connecting to Redis");
    let memory = ChatMemory::builder(store.clone())
        .policy(WindowPolicy::messages(WINDOW as usize).expect("valid policy"))
        .retention(Retention::KeepHistory)
        .counter(Arc::new(Heuristic))
        .build();

    // Build every history first, then measure in interleaved rounds so that background
    // load on the machine (or Redis settling after the big writes) hits all sizes alike.
    let mut ids = Vec::new();
    let mut builds = Vec::new();
    for history in HISTORIES {
        let id = ConversationId::new(format!("bench-{history}")).expect("valid id");
        let built = Instant::now();
        build_history(&store, &id, history).await;
        builds.push(built.elapsed());
        ids.push(id);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(TURNS); HISTORIES.len()];
    for round in 0..ROUNDS + 1 {
        for (i, id) in ids.iter().enumerate() {
            for turn in 0..TURNS / ROUNDS {
                let started = Instant::now();
                let window = memory.load(id).await.expect("load");
                assert!(window.len() <= WINDOW as usize + 1);
                memory
                    .commit(
                        id,
                        window,
                        [
                            Message::user(format!("bench {round}/{turn}: and the second order?")),
                            Message::assistant(format!("bench {round}/{turn}: that one ships tomorrow.")),
                        ],
                    )
                    .await
                    .expect("commit");
                // Round 0 is the warm-up.
                if round > 0 {
                    times[i].push(started.elapsed());
                }
            }
        }
    }

    println!("chatmem-redis per-turn latency: load + commit (user + assistant), KeepHistory, 20-message window");
    println!(
        "{:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "history", "turns", "mean ms", "p50 ms", "p95 ms", "p99 ms", "build s"
    );
    let mut results = Vec::new();
    for ((history, times), build) in HISTORIES.iter().zip(&mut times).zip(&builds) {
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        let p50 = percentile(times, 0.5);
        println!(
            "{:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12.2}",
            history,
            times.len(),
            ms(mean),
            ms(p50),
            ms(percentile(times, 0.95)),
            ms(percentile(times, 0.99)),
            build.as_secs_f64()
        );
        results.push((mean, p50));
    }
    if let (Some(small), Some(large)) = (results.first(), results.last()) {
        println!(
            "ratio 100,000 / 10: mean {:.2}x, p50 {:.2}x",
            large.0.as_secs_f64() / small.0.as_secs_f64(),
            large.1.as_secs_f64() / small.1.as_secs_f64()
        );
    }

    // Clean up: the conversations (and their index entries), then the store's own keys.
    for id in &ids {
        store.clear(id).await.expect("clear");
    }
    let mut conn = redis::Client::open(url)
        .expect("valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection");
    redis::cmd("DEL")
        .arg(format!("{prefix}:schema"))
        .arg(format!("{prefix}:ids"))
        .exec_async(&mut conn)
        .await
        .expect("deleting the bench keys");
}
