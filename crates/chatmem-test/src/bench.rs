//! The flat-cost bench each store crate runs as `benches/turn.rs`: the cost of one turn at
//! growing history sizes.
//!
//! A turn is what an application does per model call: [`ChatMemory::begin`] (the load), then
//! [`Turn::commit_window`](chatmem::Turn::commit_window) of a user + assistant pair, with [`Retention::KeepHistory`] and
//! a 20-message window. A store that reads only the window and writes only the new
//! messages costs the same per turn whatever the history, so the ratio between the largest
//! and the smallest history should stay near 1.
//!
//! [`flat_cost`] seeds one conversation per history size with large [`Store::commit`]
//! batches, measures the turns, clears the conversations and returns a [`FlatCostReport`];
//! [`FlatCostReport::table`] prints it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use chatmem_test::bench::{self, FlatCostConfig};
//! # async fn demo() -> chatmem::Result<()> {
//! let store = Arc::new(chatmem::InMemoryStore::new()); // your store
//! let report = bench::flat_cost(store, &FlatCostConfig::default().turns_from_env()).await?;
//! print!("{}", report.table("chatmem-memory"));
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatmem::store::{Commit, Snapshot};
use chatmem::{ChatMemory, ConversationId, Error, Heuristic, Message, Retention, Store, WindowPolicy};

/// Environment variable that overrides the measured turns per history size (a positive
/// integer), for a quick run; see [`FlatCostConfig::turns_from_env`].
pub const ENV_TURNS: &str = "CHATMEM_BENCH_TURNS";

/// Tokens recorded for each seeded history message (the counter is not run on them).
const HISTORY_TOKENS: u32 = 20;
const SYSTEM_TOKENS: u32 = 12;
const SYSTEM: &str = "You are a helpful after-sales agent.";

/// What [`flat_cost`] measures and how long.
#[derive(Debug, Clone)]
pub struct FlatCostConfig {
    /// History sizes in messages, smallest first; the ratio compares the last with the first.
    pub histories: Vec<u64>,
    /// The window policy's message count (at least 2: a turn commits two messages).
    pub window: usize,
    /// Unmeasured turns per history before the measured ones.
    pub warmup: usize,
    /// Measured turns per history.
    pub turns: usize,
    /// The measured turns of each history are split over this many rounds, and every
    /// round runs all histories in turn.
    pub rounds: usize,
    /// Messages per [`Store::commit`] while seeding a history.
    pub seed_batch: u64,
    /// A store-specific operation count read around each load and each commit, reported as
    /// the most seen per load and per commit.
    pub counter: Option<OpCounter>,
}

impl Default for FlatCostConfig {
    /// Histories of 10, 1,000 and 100,000 messages, a 20-message window, 300 measured turns
    /// per history in 3 rounds after 20 warm-up turns, seeding 10,000 messages per commit.
    fn default() -> Self {
        Self {
            histories: vec![10, 1_000, 100_000],
            window: 20,
            warmup: 20,
            turns: 300,
            rounds: 3,
            seed_batch: 10_000,
            counter: None,
        }
    }
}

impl FlatCostConfig {
    /// This config with `turns` taken from [`ENV_TURNS`] when that holds a positive integer.
    pub fn turns_from_env(mut self) -> Self {
        if let Some(turns) = positive(std::env::var(ENV_TURNS).ok().as_deref()) {
            self.turns = turns;
        }
        self
    }
}

/// The bench both SQL server stores run: [`flat_cost`] over `store` (which seeds its
/// histories 5,000 messages per commit, a SQL server's comfortable batch), printing the
/// table under the name `name`.
///
/// # Panics
/// When the bench fails: there is nothing to report then.
pub async fn sql_server_flat_cost(store: Arc<dyn Store>, name: &str) {
    let config = FlatCostConfig {
        seed_batch: 5_000,
        ..FlatCostConfig::default()
    }
    .turns_from_env();
    let report = flat_cost(store, &config).await.expect("bench");
    print!("{}", report.table(name));
}

/// `value` as a positive integer, if it is one.
fn positive(value: Option<&str>) -> Option<usize> {
    value?.trim().parse().ok().filter(|&n| n > 0)
}

/// The URL of the service a bench needs, from the environment variable `var`, or `None`
/// after printing (to stderr) that the bench is skipped and how to run it (`how`, e.g.
/// "start Redis").
pub fn service_url(var: &str, how: &str) -> Option<String> {
    crate::service_url_for(var, how, "bench")
}

/// Runs a bench's `main` body on a two-worker tokio runtime (the machine the benches were
/// made for has two cores, shared with the database server).
///
/// # Panics
/// When the runtime cannot be built: a bench has nothing to measure then.
pub fn block_on<F: std::future::Future>(bench: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(bench)
}

/// A store-specific running count of operations (statements, round trips) and its column
/// label, e.g. `"stmts"`.
#[derive(Clone)]
pub struct OpCounter {
    label: String,
    read: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl OpCounter {
    /// A counter labelled `label` whose current total `read` returns.
    pub fn new(label: impl Into<String>, read: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Self {
            label: label.into(),
            read: Arc::new(read),
        }
    }

    /// The column label.
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl fmt::Debug for OpCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpCounter")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// What [`flat_cost`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatCostReport {
    /// The window policy's message count.
    pub window: usize,
    /// Unmeasured turns per history.
    pub warmup: usize,
    /// Measured turns per history.
    pub turns: usize,
    /// Rounds the measured turns were split over.
    pub rounds: usize,
    /// The [`OpCounter`] label, when one was given.
    pub counter: Option<String>,
    /// One row per history size, in the configured order.
    pub rows: Vec<HistoryRow>,
}

/// The turn latencies at one history size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRow {
    /// Messages in the history before the first turn.
    pub history: u64,
    /// How long seeding the history took.
    pub build: Duration,
    /// Measured turns.
    pub turns: usize,
    /// Mean turn latency.
    pub mean: Duration,
    /// Median turn latency.
    pub p50: Duration,
    /// 90th percentile turn latency.
    pub p90: Duration,
    /// 95th percentile turn latency.
    pub p95: Duration,
    /// 99th percentile turn latency.
    pub p99: Duration,
    /// The most [`OpCounter`] operations seen in one load, when counted.
    pub ops_per_load: Option<u64>,
    /// The most [`OpCounter`] operations seen in one commit, when counted.
    pub ops_per_commit: Option<u64>,
}

/// Largest history over smallest history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    /// Of the mean latencies.
    pub mean: f64,
    /// Of the median latencies.
    pub p50: f64,
}

impl FlatCostReport {
    /// The last row's latencies over the first's; `None` with fewer than two rows.
    pub fn ratio(&self) -> Option<Ratio> {
        let (small, large) = match self.rows.as_slice() {
            [small, .., large] => (small, large),
            _ => return None,
        };
        Some(Ratio {
            mean: large.mean.as_secs_f64() / small.mean.as_secs_f64(),
            p50: large.p50.as_secs_f64() / small.p50.as_secs_f64(),
        })
    }

    /// The report as a Markdown table under a header naming `store`, with the ratio below.
    pub fn table<'a>(&'a self, store: &'a str) -> Table<'a> {
        Table { report: self, store }
    }
}

/// A [`FlatCostReport`] rendered by [`FlatCostReport::table`].
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    report: &'a FlatCostReport,
    store: &'a str,
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        writeln!(
            f,
            "{}: one turn = ChatMemory::begin + Turn::commit_window(user, assistant), KeepHistory, {}-message window",
            self.store, r.window
        )?;
        writeln!(
            f,
            "{} turns per history after {} warm-up turns, in {} interleaved rounds (each turn adds 2 messages)",
            r.turns, r.warmup, r.rounds
        )?;
        writeln!(f)?;

        let us = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e6);
        let mut header: Vec<String> = [
            "history", "turns", "build s", "mean µs", "p50 µs", "p90 µs", "p95 µs", "p99 µs",
        ]
        .map(String::from)
        .into();
        if let Some(label) = &r.counter {
            header.push(format!("{label}/load"));
            header.push(format!("{label}/commit"));
        }
        let mut cells: Vec<Vec<String>> = vec![header];
        for row in &r.rows {
            let mut line = vec![
                row.history.to_string(),
                row.turns.to_string(),
                format!("{:.2}", row.build.as_secs_f64()),
                us(row.mean),
                us(row.p50),
                us(row.p90),
                us(row.p95),
                us(row.p99),
            ];
            if r.counter.is_some() {
                let count = |c: Option<u64>| c.map_or_else(|| "-".to_owned(), |c| c.to_string());
                line.push(count(row.ops_per_load));
                line.push(count(row.ops_per_commit));
            }
            cells.push(line);
        }
        // Padded so the table reads in a terminal as well as rendered.
        let widths: Vec<usize> = (0..cells[0].len())
            .map(|c| cells.iter().map(|line| line[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (i, line) in cells.iter().enumerate() {
            for (cell, &width) in line.iter().zip(&widths) {
                write!(f, "| {cell:>width$} ")?;
            }
            writeln!(f, "|")?;
            if i == 0 {
                for &width in &widths {
                    write!(f, "|-{:->width$}:", "")?;
                }
                writeln!(f, "|")?;
            }
        }

        if let (Some(ratio), [small, .., large]) = (r.ratio(), r.rows.as_slice()) {
            writeln!(f)?;
            writeln!(
                f,
                "ratio {} / {} messages: mean {:.2}x, p50 {:.2}x",
                large.history, small.history, ratio.mean, ratio.p50
            )?;
        }
        Ok(())
    }
}

/// Seeds one conversation per history size of `config` in `store`, measures `config.turns`
/// turns on each (after `config.warmup` unmeasured ones), then clears the conversations.
///
/// Conversation ids are fresh ([`crate::unique_id`]), so runs may share a server.
///
/// # Errors
/// [`Error::InvalidConfig`] when `config.window` is below 2; the store's error when a
/// seeding commit, a turn or the final clear fails (the conversations seeded so far are
/// then left in the store).
///
/// # Panics
/// When the window after a turn does not hold the new messages or is larger than the
/// window policy allows: the store broke the window contract.
pub async fn flat_cost(store: Arc<dyn Store>, config: &FlatCostConfig) -> chatmem::Result<FlatCostReport> {
    if config.window < 2 {
        return Err(Error::InvalidConfig(format!(
            "flat_cost: a window of {} messages cannot hold a turn",
            config.window
        )));
    }
    let memory = ChatMemory::builder(store.clone())
        .policy(WindowPolicy::try_messages(config.window)?)
        .retention(Retention::KeepHistory)
        // Cheap and deterministic: the bench measures the store, not a tokenizer.
        .counter(Heuristic)
        .build()?;

    // Seed everything first so that the measured rounds can interleave the histories.
    let mut ids = Vec::with_capacity(config.histories.len());
    let mut builds = Vec::with_capacity(config.histories.len());
    for &history in &config.histories {
        let id = crate::unique_id(&format!("bench-{history}"));
        let started = Instant::now();
        seed(store.as_ref(), &id, history, config).await?;
        builds.push(started.elapsed());
        ids.push(id);
    }

    // Round 0 is the warm-up. Every round runs all histories, so background load on the
    // machine (or a server settling after the big seeding writes) hits all sizes alike.
    let rounds = config.rounds.max(1);
    // Capped: `turns` may come from the environment.
    let mut samples: Vec<Vec<Sample>> = vec![Vec::with_capacity(config.turns.min(1 << 16)); ids.len()];
    let mut turn_no = 0;
    for round in 0..=rounds {
        let turns = if round == 0 {
            config.warmup
        } else {
            round_turns(config.turns, rounds, round)
        };
        for (id, samples) in ids.iter().zip(&mut samples) {
            for _ in 0..turns {
                let sample = turn(&memory, id, config, turn_no).await?;
                turn_no += 1;
                if round > 0 {
                    samples.push(sample);
                }
            }
        }
    }

    for id in &ids {
        store
            .clear(id)
            .await
            .map_err(|source| Error::Store { id: id.clone(), source })?;
    }

    let counted = config.counter.is_some();
    let rows = config
        .histories
        .iter()
        .zip(builds)
        .zip(samples)
        .map(|((&history, build), samples)| row(history, build, samples, counted))
        .collect();
    Ok(FlatCostReport {
        window: config.window,
        warmup: config.warmup,
        turns: config.turns,
        rounds,
        counter: config.counter.as_ref().map(|c| c.label.clone()),
        rows,
    })
}

/// The measured turns in `round` (1..=`rounds`): an even split adding up to `turns`.
fn round_turns(turns: usize, rounds: usize, round: usize) -> usize {
    turns * round / rounds - turns * (round - 1) / rounds
}

/// One measured turn.
#[derive(Debug, Clone, Copy)]
struct Sample {
    took: Duration,
    load_ops: u64,
    commit_ops: u64,
}

/// A seeded history message: odd sequences are questions, even ones answers.
fn history_message(seq: u64) -> Message {
    if seq % 2 == 1 {
        Message::user(format!("question {seq}: where is my order LC2026{seq:08}?"))
    } else {
        Message::assistant(format!("answer {seq}: it ships tomorrow from the Hangzhou warehouse."))
    }
}

/// Writes `history` messages to `id` in batches straight through [`Store::commit`], with
/// the window on the last `config.window` (starting on a question).
async fn seed(store: &dyn Store, id: &ConversationId, history: u64, config: &FlatCostConfig) -> chatmem::Result<()> {
    let batch = config.seed_batch.max(1);
    let window = u64::try_from(config.window).unwrap_or(u64::MAX);
    // The conversation as the store has it after each batch: the base of the next commit.
    let mut base = Snapshot::empty();
    while base.next_seq <= history {
        let next = base.next_seq;
        let last = next.saturating_add(batch - 1).min(history);
        let mut commit = Commit::on(&base).retention(Retention::KeepHistory);
        if base.version == 0 {
            commit = commit.system(Message::system(SYSTEM), SYSTEM_TOKENS);
        }
        for seq in next..=last {
            commit = commit.append(history_message(seq), HISTORY_TOKENS);
        }
        // Odd sequences are questions, and a window starts on one.
        let window_start = last.saturating_add(1).saturating_sub(window).max(1) | 1;
        let commit = commit.window_start(window_start.max(base.window_start)).build();
        let store_err = |source| Error::Store { id: id.clone(), source };
        let commit = commit.map_err(store_err)?;
        (base.window_start, base.next_seq) = (commit.window_start(), commit.next_seq());
        base.version = store.commit(id, commit).await.map_err(store_err)?;
        if last == u64::MAX {
            break;
        }
    }
    Ok(())
}

/// Loads `id` and commits a user + assistant pair, timing both (and the counter reads,
/// which are meant to be cheap).
async fn turn<S: Store>(
    memory: &ChatMemory<S>,
    id: &ConversationId,
    config: &FlatCostConfig,
    n: usize,
) -> chatmem::Result<Sample> {
    let ops = || config.counter.as_ref().map_or(0, |c| (c.read)());
    let started = Instant::now();
    let before_load = ops();
    let mut turn = memory.begin(id).await?;
    let before_commit = ops();
    turn.extend([
        Message::user(format!("turn {n}: can I return it?")),
        Message::assistant(format!("turn {n}: yes, within seven days.")),
    ]);
    let after = turn.commit_window().await?;
    let done = ops();
    let took = started.elapsed();
    // The system message may come on top of the policy's window.
    assert!(
        (2..=config.window + 1).contains(&after.len()),
        "the window after a turn holds {} messages, expected 2..={}",
        after.len(),
        config.window + 1
    );
    Ok(Sample {
        took,
        load_ops: before_commit.saturating_sub(before_load),
        commit_ops: done.saturating_sub(before_commit),
    })
}

fn row(history: u64, build: Duration, samples: Vec<Sample>, counted: bool) -> HistoryRow {
    let mut times: Vec<Duration> = samples.iter().map(|s| s.took).collect();
    times.sort_unstable();
    let total: Duration = times.iter().sum();
    let mean = u32::try_from(times.len())
        .ok()
        .and_then(|n| total.checked_div(n))
        .unwrap_or_default();
    let max_ops = |f: fn(&Sample) -> u64| counted.then(|| samples.iter().map(f).max().unwrap_or(0));
    HistoryRow {
        history,
        build,
        turns: times.len(),
        mean,
        p50: percentile(&times, 0.50),
        p90: percentile(&times, 0.90),
        p95: percentile(&times, 0.95),
        p99: percentile(&times, 0.99),
        ops_per_load: max_ops(|s| s.load_ops),
        ops_per_commit: max_ops(|s| s.commit_ops),
    }
}

/// The nearest-rank percentile `p` (0..=1) of ascending `sorted`; zero when empty.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let last = sorted.len().saturating_sub(1);
    let i = (last as f64 * p).round() as usize;
    sorted.get(i.min(last)).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank_and_survive_no_samples() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&times, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&times, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&times, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
        let empty = row(10, Duration::ZERO, Vec::new(), true);
        assert_eq!(
            (empty.turns, empty.mean, empty.ops_per_load),
            (0, Duration::ZERO, Some(0))
        );
    }

    #[test]
    fn only_a_positive_turn_count_overrides() {
        assert_eq!(positive(Some(" 40 ")), Some(40));
        for no in [None, Some(""), Some("0"), Some("-3"), Some("many")] {
            assert_eq!(positive(no), None, "{no:?}");
        }
    }

    #[test]
    fn turns_split_evenly_over_rounds() {
        for (turns, rounds) in [(500, 3), (300, 3), (7, 2), (1, 3)] {
            let split: Vec<usize> = (1..=rounds).map(|round| round_turns(turns, rounds, round)).collect();
            assert_eq!(split.iter().sum::<usize>(), turns);
            assert!(split.iter().max().unwrap_or(&0) - split.iter().min().unwrap_or(&0) <= 1);
        }
    }
}
