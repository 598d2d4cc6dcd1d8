//! What embeddings cost a turn on the in-memory store, with an embedding model that takes
//! 500 ms a call: a turn's p50 (begin, the user message, recall, the answer, commit) without
//! embeddings, with them (the question waits up to its query wait), and with a query wait of
//! 0 (the stored messages are still embedded, after each commit); and a commit's p50 alone.
//!
//! Run with `cargo bench -p chatmem --bench embeddings` (`CHATMEM_BENCH_TURNS=50` for a quick
//! run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::{ChatMemory, ConversationId, Embeddings, InMemoryStore, Message, Recall, WindowPolicy};
use chatmem_test::embedders::{Behaviour, ScriptedEmbedder};

const HISTORY: usize = 1_000;
const MODEL_LATENCY: Duration = Duration::from_millis(500);

fn memory(embeddings: Option<Duration>) -> ChatMemory<Arc<InMemoryStore>> {
    let mut builder = ChatMemory::builder(Arc::new(InMemoryStore::new()))
        .policy(WindowPolicy::messages(20))
        .recall(Recall::new(5).expect("k"));
    if let Some(wait) = embeddings {
        let embedder = ScriptedEmbedder::new("slow");
        embedder.set(Behaviour::Slow(MODEL_LATENCY));
        builder = builder.embeddings(
            Embeddings::new(embedder, |f| {
                tokio::spawn(f);
            })
            .query_wait(wait),
        );
    }
    builder.build().expect("memory")
}

fn p50(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// The p50 of a full turn and of a commit alone, in ms.
async fn measure(memory: &ChatMemory<Arc<InMemoryStore>>, turns: usize) -> (f64, f64) {
    let id = ConversationId::new("bench").expect("id");
    for i in 0..HISTORY / 2 {
        memory
            .add(
                &id,
                [
                    Message::user(format!("order LC{i:06} question {i}")),
                    Message::assistant(format!("answer {i}")),
                ],
            )
            .await
            .expect("seed");
    }
    let (mut turn_ms, mut commit_ms) = (Vec::new(), Vec::new());
    for i in 0..turns {
        let started = Instant::now();
        let mut turn = memory.begin(&id).await.expect("begin");
        turn.push(Message::user(format!("can order LC{:06} be refunded?", i * 7 % 500)));
        turn.recall().await.expect("recall");
        turn.push(Message::assistant("yes"));
        turn.commit().await.expect("commit");
        turn_ms.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        memory
            .add(&id, [Message::user(format!("note {i}")), Message::assistant("ok")])
            .await
            .expect("add");
        commit_ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    (p50(turn_ms), p50(commit_ms))
}

fn main() {
    let turns: usize = std::env::var("CHATMEM_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let arms = [
            ("no embeddings", None),
            ("embeddings, query wait 300 ms", Some(Duration::from_millis(300))),
            ("embeddings, query wait 0", Some(Duration::ZERO)),
        ];
        println!(
            "embedding model: {} ms a call; {HISTORY} messages stored; {turns} turns an arm",
            MODEL_LATENCY.as_millis()
        );
        println!("| arm | turn p50 ms | commit p50 ms | turn Δ ms | commit Δ ms |");
        println!("|---|---:|---:|---:|---:|");
        let mut base = None;
        for (name, wait) in arms {
            let memory = memory(wait);
            if let Some(e) = memory.embeddings() {
                e.calibrate().await.expect("calibrated");
            }
            let (turn, commit) = measure(&memory, turns).await;
            let (bt, bc) = *base.get_or_insert((turn, commit));
            println!(
                "| {name} | {turn:.3} | {commit:.3} | {:+.3} | {:+.3} |",
                turn - bt,
                commit - bc
            );
        }
    });
}
