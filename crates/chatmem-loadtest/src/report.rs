//! [`LoadReport`]: throughput and latency per operation, errors, and the verification, as a
//! table for people and JSON for tools.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::LoadConfig;
use crate::verify::Verification;

/// One operation's figures over the measured phase (latencies in milliseconds, from sending
/// the request to the last byte of the answer).
///
/// ```
/// let s = chatmem_loadtest::OpStats::default();
/// assert_eq!(s.requests, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpStats {
    /// Requests answered 200 (errors excluded).
    pub requests: u64,
    /// Requests that failed: another status, a transport error or a timeout.
    pub errors: u64,
    /// Successful requests per second of the measured phase.
    pub per_second: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th-percentile latency.
    pub p99_ms: f64,
    /// Slowest request.
    pub max_ms: f64,
}

impl OpStats {
    /// The figures of `latencies` (microseconds) over `seconds`.
    pub(crate) fn new(latencies: &Histogram<u64>, errors: u64, seconds: f64) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        let requests = latencies.len();
        Self {
            requests,
            errors,
            per_second: if seconds > 0.0 { requests as f64 / seconds } else { 0.0 },
            p50_ms: ms(latencies.value_at_quantile(0.50)),
            p99_ms: ms(latencies.value_at_quantile(0.99)),
            max_ms: ms(latencies.max()),
        }
    }
}

/// The result of one load test.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// The store the server used, as given (for the table; printed redacted by the caller
    /// if it holds a password).
    pub store: String,
    /// Connections during the measured phase.
    pub connections: usize,
    /// Conversations the requests were spread over.
    pub conversations: usize,
    /// The share of requests that were window reads.
    pub read_share: f64,
    /// How long the measured phase took, in seconds.
    pub seconds: f64,
    /// `GET /v1/conversations/{id}/messages`.
    pub reads: OpStats,
    /// `POST /v1/conversations/{id}/messages` with a question and its answer.
    pub commits: OpStats,
    /// Errors by kind (`status 503 store_timeout`, `transport timeout`, ...).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Every history read back and checked after the run.
    pub verification: Verification,
}

impl LoadReport {
    pub(crate) fn new(store: &str, config: &LoadConfig, seconds: f64, reads: OpStats, commits: OpStats) -> Self {
        Self {
            store: store.to_owned(),
            connections: config.connections,
            conversations: config.conversations,
            read_share: config.read_share,
            seconds,
            reads,
            commits,
            errors_by_kind: BTreeMap::new(),
            verification: Verification::default(),
        }
    }

    /// All errors during the measured phase.
    pub fn errors(&self) -> u64 {
        self.reads.errors + self.commits.errors
    }

    /// True when no request failed and the histories hold exactly what was acknowledged.
    pub fn is_clean(&self) -> bool {
        self.errors() == 0 && self.verification.is_clean()
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The report as a table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "store {} ({} connections, {} conversations, read share {:.2}, {:.1} s)",
            self.store, self.connections, self.conversations, self.read_share, self.seconds
        );
        let _ = writeln!(
            t,
            "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "op", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors"
        );
        for (name, s) in [("read", &self.reads), ("commit", &self.commits)] {
            let _ = writeln!(
                t,
                "{name:<8} {:>9} {:>9.0} {:>9.2} {:>9.2} {:>9.1} {:>7}",
                s.requests, s.per_second, s.p50_ms, s.p99_ms, s.max_ms, s.errors
            );
        }
        let total = self.reads.requests + self.commits.requests;
        let _ = writeln!(
            t,
            "{:<8} {:>9} {:>9.0} {:>9} {:>9} {:>9} {:>7}",
            "all",
            total,
            total as f64 / self.seconds.max(f64::MIN_POSITIVE),
            "",
            "",
            "",
            self.errors()
        );
        for (kind, n) in &self.errors_by_kind {
            let _ = writeln!(t, "  error {kind}: {n}");
        }
        let v = &self.verification;
        let _ = writeln!(
            t,
            "verified {} histories: {} messages acknowledged, {} stored; lost {}, duplicated {}, split turns {}, unexpected {}, unreadable {}; {} uncertain turns ({} landed)",
            v.conversations,
            v.acknowledged_messages,
            v.stored_messages,
            v.lost,
            v.duplicated,
            v.split_turns,
            v.unexpected,
            v.unreadable,
            v.uncertain_turns,
            v.uncertain_landed
        );
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_come_from_the_histogram() {
        let mut h = Histogram::<u64>::new(3).expect("histogram");
        for us in 1..=1000 {
            h.record(us * 10).expect("record");
        }
        let s = OpStats::new(&h, 2, 2.0);
        assert_eq!((s.requests, s.errors), (1000, 2));
        assert!((s.per_second - 500.0).abs() < 1e-9);
        assert!((s.p50_ms - 5.0).abs() < 0.01, "{s:?}");
        assert!((s.p99_ms - 9.9).abs() < 0.01, "{s:?}");
        assert!((s.max_ms - 10.0).abs() < 0.01, "{s:?}");

        let mut r = LoadReport::new("memory:", &LoadConfig::default(), 2.0, s.clone(), s);
        assert!(!r.is_clean());
        r.reads.errors = 0;
        r.commits.errors = 0;
        assert!(r.is_clean());
        assert_eq!(r.json()["commits"]["requests"], 1000);
        assert!(r.table().contains("commit        1000       500"), "{}", r.table());
    }
}
