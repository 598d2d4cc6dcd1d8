//! [`ProxyReport`]: each target's latencies per phase, what it adds to the direct call, and
//! chatmem's added latency as a share of LiteLLM's, as a Markdown table and as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::OpStats;
use crate::proxy::{ProxyConfig, TargetKind};

/// One target's calls in one phase (milliseconds, from sending to the last byte).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Calls answered 200.
    pub calls: u64,
    /// Calls that failed (another status, a transport error).
    pub errors: u64,
    /// Successful calls per second of the target's own blocks.
    pub per_second: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Slowest call.
    pub max_ms: f64,
    /// This p50 less the direct call's (when the run had a direct target).
    pub added_p50_ms: Option<f64>,
    /// This p99 less the direct call's.
    pub added_p99_ms: Option<f64>,
    /// A chatmem target's added p50 divided by LiteLLM's (when the run had LiteLLM).
    pub added_p50_vs_litellm: Option<f64>,
    /// A chatmem target's added p99 divided by LiteLLM's.
    pub added_p99_vs_litellm: Option<f64>,
}

impl Latency {
    /// The figures of `latencies` (microseconds) over `seconds` of calls: the load test's
    /// [`OpStats`], and the mean.
    pub(crate) fn new(latencies: &Histogram<u64>, errors: u64, seconds: f64) -> Self {
        let OpStats {
            requests,
            errors,
            per_second,
            p50_ms,
            p99_ms,
            max_ms,
        } = OpStats::new(latencies, errors, seconds);
        Self {
            calls: requests,
            errors,
            per_second,
            p50_ms,
            p99_ms,
            mean_ms: latencies.mean() / 1000.0,
            max_ms,
            ..Self::default()
        }
    }
}

/// One target's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// Its name (`chatmem (SQLite)`).
    pub name: String,
    /// What it is.
    pub kind: TargetKind,
    /// One keep-alive connection, one call at a time.
    pub sequential: Latency,
    /// `connections` connections, each with one call in flight.
    pub concurrent: Latency,
    /// Failed calls by kind (`status 502`, `transport timeout`), both phases.
    pub errors_by_kind: BTreeMap<String, u64>,
}

/// The result of one proxy benchmark run.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyReport {
    /// The workload.
    pub config: ProxyConfig,
    /// Every target, in the order given.
    pub targets: Vec<TargetReport>,
}

impl ProxyReport {
    /// Fills in each target's added latency (against the first direct target) and chatmem's
    /// ratio to LiteLLM's (the first LiteLLM target).
    pub(crate) fn new(config: ProxyConfig, mut targets: Vec<TargetReport>) -> Self {
        let first = |kind| targets.iter().position(|t| t.kind == kind);
        let (direct, litellm) = (first(TargetKind::Direct), first(TargetKind::LiteLlm));
        let phases: [fn(&mut TargetReport) -> &mut Latency; 2] = [|t| &mut t.sequential, |t| &mut t.concurrent];
        for phase in phases {
            let Some(d) = direct else { break };
            let base = phase(&mut targets[d]).clone();
            for t in &mut targets {
                let l = phase(t);
                l.added_p50_ms = Some(l.p50_ms - base.p50_ms);
                l.added_p99_ms = Some(l.p99_ms - base.p99_ms);
            }
            let Some(lt) = litellm else { continue };
            let theirs = phase(&mut targets[lt]).clone();
            for t in targets.iter_mut().filter(|t| t.kind == TargetKind::Chatmem) {
                let l = phase(t);
                l.added_p50_vs_litellm = ratio(l.added_p50_ms, theirs.added_p50_ms);
                l.added_p99_vs_litellm = ratio(l.added_p99_ms, theirs.added_p99_ms);
            }
        }
        Self { config, targets }
    }

    /// True when no call failed.
    pub fn is_clean(&self) -> bool {
        self.targets
            .iter()
            .all(|t| t.sequential.errors == 0 && t.concurrent.errors == 0)
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Both phases as Markdown tables, then the errors by kind.
    pub fn table(&self) -> String {
        let c = &self.config;
        let mut t = String::new();
        let phases = [
            (
                format!(
                    "sequential: one keep-alive connection per target, {} calls each in {} rounds (after {} warm-up calls)",
                    c.sequential, c.rounds, c.warmup
                ),
                false,
            ),
            (
                format!(
                    "concurrent: {} keep-alive connections per target, one call in flight on each, {} calls each in {} rounds",
                    c.connections, c.concurrent, c.rounds
                ),
                true,
            ),
        ];
        for (title, concurrent) in phases {
            let _ = writeln!(t, "{title}\n");
            let _ = writeln!(
                t,
                "| target | calls | errors | calls/s | p50 | p99 | mean | added p50 | added p99 | added ÷ LiteLLM's (p50, p99) |"
            );
            let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for target in &self.targets {
                let l = if concurrent {
                    &target.concurrent
                } else {
                    &target.sequential
                };
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} | {} |",
                    target.name,
                    l.calls,
                    l.errors,
                    l.per_second,
                    l.p50_ms,
                    l.p99_ms,
                    l.mean_ms,
                    added(l.added_p50_ms, target.kind),
                    added(l.added_p99_ms, target.kind),
                    match (l.added_p50_vs_litellm, l.added_p99_vs_litellm) {
                        (Some(a), Some(b)) => format!("{a:.2}, {b:.2}"),
                        _ => String::new(),
                    }
                );
            }
            t.push('\n');
        }
        for target in &self.targets {
            for (kind, n) in &target.errors_by_kind {
                let _ = writeln!(t, "error {}: {kind}: {n}", target.name);
            }
        }
        t
    }
}

/// `a / b`, when both are known and `b` is above zero (a ratio to nothing says nothing).
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn added(ms: Option<f64>, kind: TargetKind) -> String {
    match ms {
        Some(_) if kind == TargetKind::Direct => "(baseline)".into(),
        Some(ms) => format!("{ms:+.2} ms"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, kind: TargetKind, p50: f64, p99: f64) -> TargetReport {
        let l = Latency {
            calls: 100,
            p50_ms: p50,
            p99_ms: p99,
            ..Latency::default()
        };
        TargetReport {
            name: name.into(),
            kind,
            sequential: l.clone(),
            concurrent: l,
            errors_by_kind: BTreeMap::new(),
        }
    }

    #[test]
    fn added_latency_is_against_the_direct_call_and_compared_with_litellms() {
        let r = ProxyReport::new(
            ProxyConfig::default(),
            vec![
                target("direct (upstream)", TargetKind::Direct, 0.5, 1.0),
                target("chatmem (SQLite)", TargetKind::Chatmem, 1.5, 4.0),
                target("LiteLLM", TargetKind::LiteLlm, 10.5, 21.0),
            ],
        );
        let [direct, chatmem, litellm] = &r.targets[..] else {
            panic!("three targets")
        };
        assert_eq!(direct.sequential.added_p50_ms, Some(0.0));
        assert_eq!(chatmem.concurrent.added_p50_ms, Some(1.0));
        assert_eq!(chatmem.concurrent.added_p99_ms, Some(3.0));
        assert_eq!(litellm.sequential.added_p50_ms, Some(10.0));
        assert_eq!(chatmem.sequential.added_p50_vs_litellm, Some(0.1));
        assert_eq!(chatmem.sequential.added_p99_vs_litellm, Some(0.15));
        assert_eq!(litellm.sequential.added_p50_vs_litellm, None);
        let table = r.table();
        assert!(
            table.contains(
                "| chatmem (SQLite) | 100 | 0 | 0 | 1.50 ms | 4.00 ms | 0.00 ms | +1.00 ms | +3.00 ms | 0.10, 0.15 |"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| direct (upstream) | 100 | 0 | 0 | 0.50 ms | 1.00 ms | 0.00 ms | (baseline) | (baseline) |  |"
            ),
            "{table}"
        );
        assert_eq!(r.json()["targets"][1]["sequential"]["added_p50_vs_litellm"], 0.1);
    }

    #[test]
    fn without_a_direct_target_or_litellm_nothing_is_made_up() {
        let r = ProxyReport::new(
            ProxyConfig::default(),
            vec![target("chatmem (Redis)", TargetKind::Chatmem, 1.0, 2.0)],
        );
        assert_eq!(r.targets[0].sequential.added_p50_ms, None);
        assert_eq!(r.targets[0].sequential.added_p50_vs_litellm, None);
        let r = ProxyReport::new(
            ProxyConfig::default(),
            vec![
                target("direct (upstream)", TargetKind::Direct, 0.5, 1.0),
                target("chatmem (Redis)", TargetKind::Chatmem, 1.0, 2.0),
                target("LiteLLM", TargetKind::LiteLlm, 0.5, 1.0),
            ],
        );
        assert_eq!(r.targets[1].sequential.added_p50_ms, Some(0.5));
        assert_eq!(
            r.targets[1].sequential.added_p50_vs_litellm, None,
            "LiteLLM added nothing"
        );
    }
}
