//! The proxy benchmark: the same chat completions sent straight to a loopback upstream,
//! through `chatmem serve` (which loads and commits memory on every call) and through LiteLLM's
//! proxy (no memory), taking turns in rounds, with each target's latency and what it adds to the
//! direct call. `chatmem-cli`'s `proxy` bench runs it (`cargo bench -p chatmem-cli --bench
//! proxy`); LOADTEST.md has the figures.

mod litellm;
mod report;
mod server_time;
mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::sync::Barrier;

use crate::error::LoadError;
use crate::marker::Marker;
use crate::text::{USER_CHARS, message_text};

pub use self::litellm::{LiteLlmProcess, MASTER_KEY};
pub use self::report::{Latency, ProxyReport, TargetReport};
pub use self::server_time::ServerTime;
pub use self::upstream::{LoopbackUpstream, MODEL};

/// How long one call may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest latency the histograms hold: one minute, in microseconds.
const MAX_MICROS: u64 = 60_000_000;
/// The header that names the conversation for `chatmem serve`.
const CONVERSATION_HEADER: &str = "x-chatmem-conversation";

/// What a target is, for the report's arithmetic: added latency is a target's minus the
/// direct one's, and each target's added latency is compared with LiteLLM's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// The upstream itself, no proxy.
    Direct,
    /// `chatmem serve`: the calls name a conversation, whose memory it loads and commits.
    Chatmem,
    /// LiteLLM's proxy.
    LiteLlm,
}

/// Where one target's chat completions go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The name in the report (`chatmem (SQLite)`).
    pub name: String,
    /// What it is.
    pub kind: TargetKind,
    /// `http://127.0.0.1:PORT/v1/chat/completions`.
    completions: String,
    /// `http://127.0.0.1:PORT/v1/conversations` for chatmem, to delete the run's conversations.
    conversations: Option<String>,
    /// The bearer token every call carries (LiteLLM's master key).
    bearer: Option<String>,
}

impl Target {
    /// The upstream itself, at its base URL (`http://127.0.0.1:PORT/v1`).
    pub fn direct(upstream_base_url: &str) -> Self {
        Self {
            name: "direct (upstream)".into(),
            kind: TargetKind::Direct,
            completions: format!("{}/chat/completions", upstream_base_url.trim_end_matches('/')),
            conversations: None,
            bearer: None,
        }
    }

    /// A `chatmem serve` at `http://127.0.0.1:PORT`.
    pub fn chatmem(name: &str, server_base_url: &str) -> Self {
        let base = server_base_url.trim_end_matches('/');
        Self {
            name: name.into(),
            kind: TargetKind::Chatmem,
            completions: format!("{base}/v1/chat/completions"),
            conversations: Some(format!("{base}/v1/conversations")),
            bearer: None,
        }
    }

    /// LiteLLM's proxy at `http://127.0.0.1:PORT`, called with its master key.
    pub fn litellm(name: &str, proxy_base_url: &str) -> Self {
        Self {
            name: name.into(),
            kind: TargetKind::LiteLlm,
            completions: format!("{}/v1/chat/completions", proxy_base_url.trim_end_matches('/')),
            conversations: None,
            bearer: Some(MASTER_KEY.into()),
        }
    }
}

/// The workload. Every target gets the same calls; the measured ones are split into
/// `rounds`, and in each round every target runs its share in turn (the order rotating), so
/// a slow phase of the machine falls on all targets alike.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyConfig {
    /// Sequential calls per target before the rounds (not measured); they also fill the
    /// window, so every measured call loads a full one.
    pub warmup: usize,
    /// Measured sequential calls per target, on one keep-alive connection.
    pub sequential: usize,
    /// Connections of the concurrent phase, each with one call in flight.
    pub connections: usize,
    /// Measured concurrent calls per target, over all connections.
    pub concurrent: usize,
    /// Rounds each phase is split into.
    pub rounds: usize,
    /// Calls per connection before each target's share of a round (not measured): the target
    /// has just been idle while the others ran.
    pub block_warmup: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            warmup: 200,
            sequential: 2_000,
            connections: 16,
            concurrent: 8_000,
            rounds: 10,
            block_warmup: 5,
        }
    }
}

impl ProxyConfig {
    /// # Errors
    /// [`LoadError::InvalidConfig`] naming the setting that leaves some round or connection
    /// without a measured call.
    pub fn validate(&self) -> Result<(), LoadError> {
        let invalid = |s: &str| Err(LoadError::InvalidConfig(s.into()));
        if self.rounds == 0 {
            return invalid("rounds must be at least 1");
        }
        if self.sequential < self.rounds {
            return invalid("sequential calls must be at least one per round");
        }
        if self.connections == 0 {
            return invalid("connections must be at least 1");
        }
        if self.concurrent < self.rounds * self.connections {
            return invalid("concurrent calls must be at least one per connection and round");
        }
        Ok(())
    }
}

/// The `i`-th of `parts` near-equal shares of `total` (the first ones one larger).
pub(crate) fn share(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

/// The order of the targets in round `round`: rotated by one each round, so no target is
/// always first (just after a warm start) or always last.
pub(crate) fn round_order(targets: usize, round: usize) -> Vec<usize> {
    (0..targets).map(|i| (i + round) % targets).collect()
}

/// Runs the workload against every target, alternating, and reports each target's
/// latencies and what it adds to the direct call.
///
/// Every call is one new user message of about 200 characters
/// (`{"model": MODEL, "messages": [{"role": "user", ...}]}`), the same body for every target;
/// chatmem's calls also name a conversation (one per connection, growing call after call),
/// so chatmem loads its window, sends it upstream with the new message, and commits the turn.
/// Latency is from sending to the last byte of the answer; an answer other than 200 counts
/// as an error, not a latency. Afterwards the run's conversations are deleted from every
/// chatmem target.
///
/// # Errors
/// When the settings are invalid or a client cannot be built; failed calls are counted in
/// the report.
pub async fn run(targets: &[Target], config: &ProxyConfig) -> Result<ProxyReport, LoadError> {
    config.validate()?;
    let run = format!("proxybench-{:016x}", fastrand::u64(..));
    let sequential_id = format!("{run}-s");
    let concurrent_ids: Vec<String> = (0..config.connections).map(|c| format!("{run}-c{c:02}")).collect();
    let sequential_clients = targets.iter().map(|_| client()).collect::<Result<Vec<_>, _>>()?;
    let concurrent_clients = targets
        .iter()
        .map(|_| (0..config.connections).map(|_| client()).collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()?;
    let mut sequential: Vec<Tally> = targets.iter().map(|_| Tally::new()).collect();
    let mut concurrent: Vec<Tally> = targets.iter().map(|_| Tally::new()).collect();

    for (t, target) in targets.iter().enumerate() {
        let conn = Connection::new(&sequential_clients[t], target, &sequential_id, 0);
        conn.calls(config.warmup, None).await;
    }
    for round in 0..config.rounds {
        for t in round_order(targets.len(), round) {
            let conn = Connection::new(&sequential_clients[t], &targets[t], &sequential_id, 0);
            conn.calls(config.block_warmup, None).await;
            let started = Instant::now();
            conn.calls(share(config.sequential, config.rounds, round), Some(&mut sequential[t]))
                .await;
            sequential[t].busy += started.elapsed();
        }
    }
    for round in 0..config.rounds {
        let this_round = share(config.concurrent, config.rounds, round);
        for t in round_order(targets.len(), round) {
            // Every connection warms up, then all start their measured calls together.
            let barrier = Arc::new(Barrier::new(config.connections + 1));
            let mut tasks = Vec::with_capacity(config.connections);
            for (c, client) in concurrent_clients[t].iter().enumerate() {
                let (client, target, id, barrier) = (
                    client.clone(),
                    targets[t].clone(),
                    concurrent_ids[c].clone(),
                    barrier.clone(),
                );
                let (warmup, measured) = (config.block_warmup, share(this_round, config.connections, c));
                tasks.push(tokio::spawn(async move {
                    let conn = Connection::new(&client, &target, &id, c + 1);
                    conn.calls(warmup, None).await;
                    barrier.wait().await;
                    let mut tally = Tally::new();
                    conn.calls(measured, Some(&mut tally)).await;
                    tally
                }));
            }
            barrier.wait().await;
            let started = Instant::now();
            for task in tasks {
                concurrent[t].merge(task.await.map_err(LoadError::Task)?);
            }
            concurrent[t].busy += started.elapsed();
        }
    }

    // Leave the stores as they were; a failed delete changes no figure.
    for (t, target) in targets.iter().enumerate() {
        if let Some(base) = &target.conversations {
            for id in std::iter::once(&sequential_id).chain(&concurrent_ids) {
                let _ = sequential_clients[t].delete(format!("{base}/{id}")).send().await;
            }
        }
    }

    let reports = targets
        .iter()
        .zip(sequential)
        .zip(concurrent)
        .map(|((target, s), c)| {
            let mut errors_by_kind = s.kinds.clone();
            for (k, n) in &c.kinds {
                *errors_by_kind.entry(k.clone()).or_default() += n;
            }
            TargetReport {
                name: target.name.clone(),
                kind: target.kind,
                sequential: s.latency(),
                concurrent: c.latency(),
                errors_by_kind,
            }
        })
        .collect();
    Ok(ProxyReport::new(config.clone(), reports))
}

/// A client keeping one connection open between calls.
fn client() -> Result<reqwest::Client, LoadError> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .map_err(LoadError::Client)
}

/// One connection's calls to one target, in one conversation.
struct Connection<'a> {
    client: &'a reqwest::Client,
    target: &'a Target,
    conversation_id: &'a str,
    conversation: usize,
}

impl<'a> Connection<'a> {
    fn new(client: &'a reqwest::Client, target: &'a Target, conversation_id: &'a str, conversation: usize) -> Self {
        Self {
            client,
            target,
            conversation_id,
            conversation,
        }
    }

    /// Makes `n` calls, recording them in `tally` when given.
    async fn calls(&self, n: usize, mut tally: Option<&mut Tally>) {
        for _ in 0..n {
            let result = self.call().await;
            if let Some(tally) = tally.as_deref_mut() {
                tally.record(result);
            }
        }
    }

    /// One chat completion with a new user message; its latency, or what went wrong.
    async fn call(&self) -> Result<Duration, String> {
        let marker = Marker {
            conversation: self.conversation,
            turn: fastrand::u32(..),
            answer: false,
        };
        let body = serde_json::json!({
            "model": MODEL,
            "messages": [{"role": "user", "content": message_text(marker, USER_CHARS, fastrand::bool())}],
        });
        let mut request = self.client.post(&self.target.completions).json(&body);
        if self.target.kind == TargetKind::Chatmem {
            request = request.header(CONVERSATION_HEADER, self.conversation_id);
        }
        if let Some(token) = &self.target.bearer {
            request = request.bearer_auth(token);
        }
        let started = Instant::now();
        let response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        response.bytes().await.map_err(|e| transport(&e))?;
        let took = started.elapsed();
        if status.is_success() {
            Ok(took)
        } else {
            Err(format!("status {}", status.as_u16()))
        }
    }
}

fn transport(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "request"
    };
    format!("transport {kind}")
}

/// One target's measured calls in one phase.
struct Tally {
    latencies: Histogram<u64>,
    errors: u64,
    kinds: BTreeMap<String, u64>,
    /// Time spent on its measured calls (wall time of its blocks).
    busy: Duration,
}

impl Tally {
    fn new() -> Self {
        Self {
            // 1 µs to a minute at 3 significant digits; a slower call is recorded as a minute.
            latencies: Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .unwrap_or_else(|_| unreachable!("these bounds are valid")),
            errors: 0,
            kinds: BTreeMap::new(),
            busy: Duration::ZERO,
        }
    }

    fn record(&mut self, result: Result<Duration, String>) {
        match result {
            Ok(took) => self
                .latencies
                .saturating_record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX)),
            Err(kind) => {
                self.errors += 1;
                *self.kinds.entry(kind).or_default() += 1;
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latencies.add(&other.latencies);
        self.errors += other.errors;
        for (k, n) in other.kinds {
            *self.kinds.entry(k).or_default() += n;
        }
    }

    fn latency(&self) -> Latency {
        Latency::new(&self.latencies, self.errors, self.busy.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for (total, parts) in [(2_000, 10), (8_000, 16), (17, 5), (5, 5)] {
            let shares: Vec<usize> = (0..parts).map(|i| share(total, parts, i)).collect();
            assert_eq!(shares.iter().sum::<usize>(), total);
            let (min, max) = (shares.iter().min(), shares.iter().max());
            assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{shares:?}");
        }
    }

    #[test]
    fn every_target_runs_once_per_round_and_each_leads_in_turn() {
        for round in 0..7 {
            let mut order = round_order(5, round);
            assert_eq!(order[0], round % 5);
            order.sort_unstable();
            assert_eq!(order, vec![0, 1, 2, 3, 4]);
        }
    }

    #[test]
    fn settings_that_leave_a_round_empty_are_refused() {
        assert!(ProxyConfig::default().validate().is_ok());
        let bad = |f: fn(&mut ProxyConfig)| {
            let mut c = ProxyConfig::default();
            f(&mut c);
            c.validate().is_err()
        };
        assert!(bad(|c| c.rounds = 0));
        assert!(bad(|c| c.sequential = 9));
        assert!(bad(|c| c.connections = 0));
        assert!(bad(|c| c.concurrent = 159));
    }

    #[tokio::test]
    async fn a_run_against_the_upstream_alone_counts_every_call() {
        let upstream = LoopbackUpstream::start().expect("upstream");
        let config = ProxyConfig {
            warmup: 3,
            sequential: 20,
            connections: 2,
            concurrent: 20,
            rounds: 2,
            block_warmup: 1,
        };
        let report = run(&[Target::direct(upstream.base_url())], &config).await.expect("run");
        let direct = &report.targets[0];
        assert_eq!((direct.sequential.calls, direct.sequential.errors), (20, 0));
        assert_eq!((direct.concurrent.calls, direct.concurrent.errors), (20, 0));
        assert_eq!(direct.sequential.added_p50_ms, Some(0.0));
    }
}
