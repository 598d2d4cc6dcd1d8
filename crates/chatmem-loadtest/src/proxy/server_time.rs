//! [`ServerTime`]: where a call's time goes inside `chatmem serve`, read off its `/metrics`.

use serde::Serialize;

/// What a chatmem server's metrics say about the chat completions it answered over its whole
/// life (both phases, warm-ups included): how many, their mean time to the response head, and
/// the mean of its upstream calls (to their response head). The rest of a call's time is the
/// client's and the loopback's; the difference of the two is memory (load, commit) and the
/// proxying itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerTime {
    /// Chat completions answered.
    pub calls: u64,
    /// Mean time from the request to the response head.
    pub mean_ms: f64,
    /// Mean time of the upstream call within it.
    pub upstream_mean_ms: f64,
}

const COMPLETIONS: &str = "chatmem_http_request_duration_seconds";
const ROUTE: &str = "{route=\"/v1/chat/completions\"}";
const UPSTREAM: &str = "chatmem_upstream_request_duration_seconds";

impl ServerTime {
    /// Reads Prometheus's text format (0.0.4), as `GET /metrics` answers it by default.
    pub fn from_metrics(text: &str) -> Option<Self> {
        let value = |name: String| {
            text.lines().find_map(|line| {
                let (key, value) = line.rsplit_once(' ')?;
                (key == name).then(|| value.parse::<f64>().ok()).flatten()
            })
        };
        let calls = value(format!("{COMPLETIONS}_count{ROUTE}"))?;
        let sum = value(format!("{COMPLETIONS}_sum{ROUTE}"))?;
        let upstream_calls = value(format!("{UPSTREAM}_count"))?;
        let upstream_sum = value(format!("{UPSTREAM}_sum"))?;
        let mean_ms = |sum: f64, n: f64| if n > 0.0 { sum / n * 1000.0 } else { 0.0 };
        Some(Self {
            calls: calls as u64,
            mean_ms: mean_ms(sum, calls),
            upstream_mean_ms: mean_ms(upstream_sum, upstream_calls),
        })
    }

    /// `GET {server_base_url}/metrics`, read.
    ///
    /// # Errors
    /// The transport error, or that the answer holds no chat-completion figures.
    pub async fn fetch(server_base_url: &str) -> Result<Self, String> {
        let url = format!("{}/metrics", server_base_url.trim_end_matches('/'));
        let text = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| e.to_string())?
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        Self::from_metrics(&text).ok_or_else(|| "no chat-completion figures in /metrics".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_come_from_the_sums_and_counts() {
        let text = "# HELP chatmem_http_request_duration_seconds Time to answer a request\n\
            chatmem_http_request_duration_seconds_sum{route=\"/v1/conversations/{id}\"} 9.0\n\
            chatmem_http_request_duration_seconds_count{route=\"/v1/conversations/{id}\"} 3\n\
            chatmem_http_request_duration_seconds_sum{route=\"/v1/chat/completions\"} 2.0\n\
            chatmem_http_request_duration_seconds_count{route=\"/v1/chat/completions\"} 1000\n\
            chatmem_http_request_duration_seconds_bucket{le=\"0.001\",route=\"/v1/chat/completions\"} 10\n\
            chatmem_upstream_request_duration_seconds_sum 0.5\n\
            chatmem_upstream_request_duration_seconds_count 1000\n";
        let t = ServerTime::from_metrics(text).expect("figures");
        assert_eq!(t.calls, 1000);
        assert!((t.mean_ms - 2.0).abs() < 1e-9, "{t:?}");
        assert!((t.upstream_mean_ms - 0.5).abs() < 1e-9, "{t:?}");
        assert_eq!(ServerTime::from_metrics("chatmem_commits_total 3\n"), None);
    }
}
