//! The recall bench each store crate runs as `benches/recall.rs`: what recall costs a turn on
//! that store, at 1,000 and 100,000 indexed messages in one conversation.
//!
//! - **search**: [`Store::search`] for a generated question (a few common words and a rare
//!   one, as users ask), p50 and p95 at each size, and the ratio of the largest to the
//!   smallest (the aim: within 2×);
//! - **commit**: a user + assistant turn (`begin`, then `commit` of the pair) on a conversation
//!   of the same size, with recall (its index entries written in the commit) and without, and
//!   their ratio (the aim: at most 1.3×);
//! - **turn**: a whole turn with recall (`begin`, `recall`, `commit`).
//!
//! Text is generated (seeded, so every store sees the same): a Zipf-like vocabulary of 8,000
//! words, order numbers, and a Chinese phrase now and then.
//!
//! ```no_run
//! use std::sync::Arc;
//! # async fn demo() -> chatmem::Result<()> {
//! let store = Arc::new(chatmem::InMemoryStore::new()); // your store
//! let report = chatmem_test::recall_bench::run(store, &Default::default()).await?;
//! print!("{}", report.table("chatmem-memory"));
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::recall::{SearchQuery, query_terms, search_limit};
use chatmem::store::{Commit, Snapshot};
use chatmem::{ChatMemory, ConversationId, Error, Heuristic, Message, Recall, Retention, Store, WindowPolicy};

/// What [`run`] measures.
#[derive(Debug, Clone)]
pub struct RecallBenchConfig {
    /// Conversation sizes in messages, smallest first.
    pub histories: Vec<u64>,
    /// Measured searches and turns per size (after a tenth as many unmeasured).
    pub samples: usize,
    /// Messages per commit while seeding.
    pub seed_batch: u64,
}

impl Default for RecallBenchConfig {
    /// 1,000 and 100,000 messages, 300 samples, seeded 5,000 messages per commit.
    fn default() -> Self {
        Self {
            histories: vec![1_000, 100_000],
            samples: 300,
            seed_batch: 5_000,
        }
    }
}

impl RecallBenchConfig {
    /// This config with `samples` from [`ENV_TURNS`](crate::bench::ENV_TURNS) when set.
    pub fn samples_from_env(mut self) -> Self {
        if let Some(n) = std::env::var(crate::bench::ENV_TURNS)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&n| n > 0)
        {
            self.samples = n;
        }
        self
    }
}

/// The measurements at one size.
#[derive(Debug, Clone)]
pub struct RecallRow {
    /// Messages in the conversation.
    pub history: u64,
    /// How long seeding it took (indexed).
    pub seed: Duration,
    /// Search p50 and p95.
    pub search: (Duration, Duration),
    /// Hits per search, on average.
    pub hits: f64,
    /// A turn's commit p50 with recall on and off.
    pub commit_on: Duration,
    /// A turn's commit p50 without recall.
    pub commit_off: Duration,
    /// A whole turn with recall (begin, recall, commit), p50.
    pub turn: Duration,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct RecallReport {
    /// One row per size.
    pub rows: Vec<RecallRow>,
    /// Samples per measurement.
    pub samples: usize,
}

impl RecallReport {
    /// The report as a table, under the store's name.
    pub fn table<'a>(&'a self, store: &'a str) -> impl fmt::Display + 'a {
        Table { report: self, store }
    }
}

struct Table<'a> {
    report: &'a RecallReport,
    store: &'a str,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "recall on {} ({} samples per cell)", self.store, self.report.samples)?;
        writeln!(
            f,
            "| messages | seed s | search p50 ms | search p95 ms | hits | commit p50 ms (recall) | commit p50 ms (off) | commit ratio | turn p50 ms |"
        )?;
        writeln!(f, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for r in &self.report.rows {
            writeln!(
                f,
                "| {} | {:.1} | {:.3} | {:.3} | {:.1} | {:.3} | {:.3} | {:.2}× | {:.3} |",
                r.history,
                r.seed.as_secs_f64(),
                ms(r.search.0),
                ms(r.search.1),
                r.hits,
                ms(r.commit_on),
                ms(r.commit_off),
                ms(r.commit_on) / ms(r.commit_off).max(1e-9),
                ms(r.turn),
            )?;
        }
        if let (Some(first), Some(last)) = (self.report.rows.first(), self.report.rows.last()) {
            writeln!(
                f,
                "search p50 at {} / at {}: {:.2}×",
                last.history,
                first.history,
                ms(last.search.0) / ms(first.search.0).max(1e-9)
            )?;
        }
        Ok(())
    }
}

/// A deterministic text generator: Zipf-like word ranks (rank r drawn with weight ~1/r).
struct Words(fastrand::Rng);

impl Words {
    fn word(&mut self) -> String {
        // Inverse transform of a 1/r law over 8,000 ranks: exp(u · ln 8000).
        let rank = (self.0.f64() * 8000f64.ln()).exp() as u64;
        format!("w{rank}")
    }

    fn message(&mut self, seq: u64) -> String {
        let n = self.0.usize(6..30);
        let mut text: Vec<String> = (0..n).map(|_| self.word()).collect();
        if self.0.u8(..10) == 0 {
            text.push(format!("LC2026{seq:08}"));
        }
        if self.0.u8(..10) == 0 {
            text.push("我的订单还没发货".to_string());
        }
        text.join(" ")
    }

    fn question(&mut self, history: u64) -> String {
        let mut q: Vec<String> = (0..self.0.usize(3..7)).map(|_| self.word()).collect();
        q.push(format!("LC2026{:08}", self.0.u64(1..=history)));
        q.join(" ")
    }
}

/// Seeds `history` indexed (or not) messages into `id` straight through [`Store::commit`].
async fn seed(store: &dyn Store, id: &ConversationId, history: u64, batch: u64, index: bool) -> chatmem::Result<()> {
    let mut words = Words(fastrand::Rng::with_seed(history));
    let mut base = Snapshot::empty();
    let store_err = |source| Error::Store { id: id.clone(), source };
    while base.next_seq <= history {
        let last = (base.next_seq + batch.max(1) - 1).min(history);
        let mut commit = Commit::on(&base).retention(Retention::KeepHistory).index(index);
        for seq in base.next_seq..=last {
            let text = words.message(seq);
            commit = commit.append(
                if seq % 2 == 1 {
                    Message::user(text)
                } else {
                    Message::assistant(text)
                },
                20,
            );
        }
        let start = (last + 1).saturating_sub(20).max(base.window_start) | 1;
        let commit = commit.window_start(start.min(last + 1)).build().map_err(store_err)?;
        (base.window_start, base.next_seq) = (commit.window_start(), commit.next_seq());
        base.version = store.commit(id, commit).await.map_err(store_err)?;
    }
    Ok(())
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples
        .get(((samples.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// Runs the bench on `store`; the conversations it makes are cleared at the end.
///
/// # Errors
/// The first store error.
pub async fn run(store: Arc<dyn Store>, config: &RecallBenchConfig) -> chatmem::Result<RecallReport> {
    let memory = |recall: bool| {
        let builder = ChatMemory::builder(store.clone())
            .policy(WindowPolicy::messages(20))
            .retention(Retention::KeepHistory)
            .counter(Heuristic);
        if recall {
            builder.recall(Recall::new(5).expect("5 is a valid k")).build()
        } else {
            builder.build()
        }
    };
    let (on, off) = (memory(true)?, memory(false)?);
    let warmup = (config.samples / 10).max(1);
    let mut rows = Vec::new();
    for &history in &config.histories {
        let id_on = crate::unique_id(&format!("recall-bench-{history}"));
        let id_off = crate::unique_id(&format!("recall-bench-off-{history}"));
        let started = Instant::now();
        seed(store.as_ref(), &id_on, history, config.seed_batch, true).await?;
        let seeded = started.elapsed();
        seed(store.as_ref(), &id_off, history, config.seed_batch, false).await?;
        let mut words = Words(fastrand::Rng::with_seed(history ^ 0x5eed));
        let (mut search, mut commit_on, mut commit_off, mut turn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut hits = 0usize;
        for i in 0..warmup + config.samples {
            let measured = i >= warmup;
            let query = SearchQuery::new(
                query_terms(&words.question(history)),
                history.saturating_sub(20),
                search_limit(5),
            );
            let t = Instant::now();
            let found = store.search(&id_on, &query).await.map_err(|source| Error::Store {
                id: id_on.clone(),
                source,
            })?;
            if measured {
                search.push(t.elapsed());
                hits += found.hits.len();
            }
            for (memory, id, out) in [(&on, &id_on, &mut commit_on), (&off, &id_off, &mut commit_off)] {
                let mut t = memory.begin(id).await?;
                t.push(Message::user(words.message(0)));
                t.push(Message::assistant(words.message(0)));
                let started = Instant::now();
                t.commit().await?;
                if measured {
                    out.push(started.elapsed());
                }
            }
            let started = Instant::now();
            let mut t = on.begin(&id_on).await?;
            t.push(Message::user(words.question(history)));
            t.recall().await?;
            t.push(Message::assistant(words.message(0)));
            t.commit().await?;
            if measured {
                turn.push(started.elapsed());
            }
        }
        for id in [&id_on, &id_off] {
            store
                .clear(id)
                .await
                .map_err(|source| Error::Store { id: id.clone(), source })?;
        }
        rows.push(RecallRow {
            history,
            seed: seeded,
            search: (percentile(&mut search, 0.5), percentile(&mut search, 0.95)),
            hits: hits as f64 / config.samples.max(1) as f64,
            commit_on: percentile(&mut commit_on, 0.5),
            commit_off: percentile(&mut commit_off, 0.5),
            turn: percentile(&mut turn, 0.5),
        });
    }
    Ok(RecallReport {
        rows,
        samples: config.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_bench_runs_on_the_reference_store_and_finds_what_it_asks_for() {
        let store: Arc<dyn Store> = Arc::new(chatmem::InMemoryStore::new());
        let config = RecallBenchConfig {
            histories: vec![200, 2_000],
            samples: 20,
            seed_batch: 500,
        };
        let report = run(store, &config).await.unwrap();
        assert_eq!(report.rows.len(), 2);
        for row in &report.rows {
            assert!(row.hits >= 1.0, "{row:?}");
            assert!(row.search.0 <= row.search.1);
        }
        let table = report.table("memory").to_string();
        assert!(table.contains("| 2000 |"), "{table}");
    }
}
