//! [`run`]: seed the conversations, load the server for the configured time, then read every
//! history back and check it against the ledger.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chatmem::Message;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::LoadConfig;
use crate::error::LoadError;
use crate::ledger::Ledger;
use crate::marker::Marker;
use crate::report::{LoadReport, OpStats};
use crate::text::{ANSWER_CHARS, USER_CHARS, message_text};
use crate::verify::Verification;

/// How long one request may take before it counts as an error (well above the server's own
/// 10-second store timeout, so a slow store shows as its 503, not as a client timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Histories read (and conversations deleted) at once after the run.
const AFTER_RUN_CONCURRENCY: usize = 32;
/// The largest latency the histograms hold: one hour, in microseconds.
const MAX_MICROS: u64 = 3_600_000_000;

/// Loads the `chatmem serve` at `base_url` (`http://127.0.0.1:PORT`) as `config` says and
/// reports what happened; `store` only labels the report.
///
/// First every conversation gets one turn (not measured), so reads never find an empty
/// conversation. Then `config.connections` tasks, each with its own HTTP connection, loop
/// until the duration is over: pick a conversation at random, then either read its window
/// (`GET …/messages`, the share `read_share`) or commit a turn (`POST …/messages` with a
/// question of about 200 characters and an answer of about 600, Chinese or English, each
/// opening with a marker naming conversation, turn and part). Afterwards every history
/// (`GET …/history`) is checked against what was acknowledged (see [`Verification`]), and
/// the conversations are deleted. The server must keep history
/// (`chatmem serve --retention keep-history`, as [`crate::ServerProcess`] starts it), or
/// evicted messages count as lost.
///
/// # Errors
/// When the settings are invalid, the client cannot be built, or seeding fails; errors under
/// load are counted in the report instead.
pub async fn run(base_url: &str, store: &str, config: &LoadConfig) -> Result<LoadReport, LoadError> {
    config.validate()?;
    let target = Arc::new(Target {
        base: base_url.trim_end_matches('/').to_owned(),
        run: format!("loadtest-{:016x}", fastrand::u64(..)),
    });
    let ledger = Arc::new(Ledger::new(config.conversations));

    let seeded = for_each_conversation(config.conversations, config.connections, {
        let (client, target, ledger) = (client(config.connections)?, target.clone(), ledger.clone());
        move |c| {
            let (client, target, ledger) = (client.clone(), target.clone(), ledger.clone());
            async move { commit_turn(&client, &target, &ledger, c).await }
        }
    })
    .await?;
    if let Some((c, Err(reason))) = seeded.into_iter().find(|(_, r)| r.is_err()) {
        return Err(LoadError::Seed {
            conversation: target.id(c),
            reason,
        });
    }

    let started = Instant::now();
    let deadline = started + config.duration;
    let mut workers = Vec::with_capacity(config.connections);
    for _ in 0..config.connections {
        let worker = Worker {
            client: client(1)?,
            target: target.clone(),
            ledger: ledger.clone(),
            conversations: config.conversations,
            read_share: config.read_share,
        };
        workers.push(tokio::spawn(worker.run(deadline)));
    }
    let mut tally = Tally::new();
    for w in workers {
        tally.merge(w.await.map_err(LoadError::Task)?);
    }
    let seconds = started.elapsed().as_secs_f64();

    let reads = OpStats::new(&tally.reads, tally.read_errors, seconds);
    let commits = OpStats::new(&tally.commits, tally.commit_errors, seconds);
    let mut report = LoadReport::new(store, config, seconds, reads, commits);
    report.errors_by_kind = tally.kinds;
    report.verification = verify(&target, &ledger, config.conversations).await?;
    // Leave the store as it was; a failed delete changes no figure.
    for_each_conversation(config.conversations, AFTER_RUN_CONCURRENCY, {
        let (client, target) = (client(AFTER_RUN_CONCURRENCY)?, target.clone());
        move |c| {
            let (client, url) = (client.clone(), target.conversation_url(c));
            async move { send(client.delete(url)).await.map(drop) }
        }
    })
    .await?;
    Ok(report)
}

/// Where the run's conversations live: ids `<run>-<index>`, unique per run so runs can
/// share a store. An id is one path segment of the server's routes (a `/` in one would be
/// sent as `%2F`); these hold only `a-z`, `0-9` and `-`, which need no encoding.
#[derive(Debug)]
struct Target {
    base: String,
    run: String,
}

impl Target {
    fn id(&self, conversation: usize) -> String {
        format!("{}-{conversation:04}", self.run)
    }

    /// `/v1/conversations/{id}`, which `DELETE` takes.
    fn conversation_url(&self, conversation: usize) -> String {
        format!("{}/v1/conversations/{}", self.base, self.id(conversation))
    }

    /// `/v1/conversations/{id}/{what}` (`messages` or `history`).
    fn url(&self, conversation: usize, what: &str) -> String {
        format!("{}/{what}", self.conversation_url(conversation))
    }
}

/// An HTTP client keeping up to `connections` connections open between requests (the
/// measured phase gives each connection its own client with one).
fn client(connections: usize) -> Result<reqwest::Client, LoadError> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(connections)
        .no_proxy()
        .build()
        .map_err(LoadError::Client)
}

/// Runs `f` for every conversation index, `concurrency` at a time, and returns the results.
async fn for_each_conversation<T, F, Fut>(
    conversations: usize,
    concurrency: usize,
    f: F,
) -> Result<Vec<(usize, T)>, LoadError>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..concurrency.min(conversations))
        .map(|_| {
            let (next, f) = (next.clone(), f.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let c = next.fetch_add(1, Ordering::Relaxed);
                    if c >= conversations {
                        return out;
                    }
                    out.push((c, f(c).await));
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(conversations);
    for t in tasks {
        all.extend(t.await.map_err(LoadError::Task)?);
    }
    Ok(all)
}

/// Sends a request and reads the whole answer; an error is its kind, for counting
/// (`status 503 store_timeout`, `transport timeout`).
async fn send(request: reqwest::RequestBuilder) -> Result<bytes::Bytes, String> {
    let response = request.send().await.map_err(|e| transport(&e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| transport(&e))?;
    if status.is_success() {
        return Ok(body);
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        error: ErrorCode,
    }
    #[derive(Deserialize)]
    struct ErrorCode {
        code: String,
    }
    let code =
        serde_json::from_slice::<ErrorBody>(&body).map_or_else(|_| "(no error body)".to_owned(), |b| b.error.code);
    Err(format!("status {} {code}", status.as_u16()))
}

fn transport(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    format!("transport {kind}")
}

/// The body of `POST …/messages`.
#[derive(Serialize)]
struct PostMessages<'a> {
    messages: &'a [Message],
}

/// The body of a window or history answer (a history page names the next).
#[derive(Deserialize)]
struct Messages {
    messages: Vec<Message>,
    #[serde(default)]
    next_cursor: Option<String>,
}

/// Commits the next turn of `conversation` and records its outcome in the ledger.
async fn commit_turn(
    client: &reqwest::Client,
    target: &Target,
    ledger: &Ledger,
    conversation: usize,
) -> Result<(), String> {
    let turn = ledger.next_turn(conversation);
    let chinese = fastrand::bool();
    let marker = |answer| Marker {
        conversation,
        turn,
        answer,
    };
    let messages = [
        Message::user(message_text(marker(false), USER_CHARS, chinese)),
        Message::assistant(message_text(marker(true), ANSWER_CHARS, chinese)),
    ];
    let result = send(
        client
            .post(target.url(conversation, "messages"))
            .json(&PostMessages { messages: &messages }),
    )
    .await
    .map(drop);
    ledger.record(conversation, turn, result.is_ok());
    result
}

/// The markers of the messages in a window or history answer, `None` for a message without one.
fn markers(body: &[u8]) -> Result<Vec<Option<Marker>>, String> {
    let parsed: Messages = serde_json::from_slice(body).map_err(|_| "answer is not a message list".to_owned())?;
    Ok(parsed
        .messages
        .iter()
        .map(|m| m.text().and_then(|t| Marker::parse(&t)))
        .collect())
}

/// The markers of a whole history, read page by page.
async fn history_markers(client: &reqwest::Client, url: &str) -> Result<Vec<Option<Marker>>, String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        // A cursor is the decimal sequence number the previous page named.
        let page_url = match &cursor {
            Some(c) => format!("{url}?limit=1000&cursor={c}"),
            None => format!("{url}?limit=1000"),
        };
        let body = send(client.get(page_url)).await?;
        let page: Messages = serde_json::from_slice(&body).map_err(|_| "answer is not a message list".to_owned())?;
        out.extend(page.messages.iter().map(|m| m.text().and_then(|t| Marker::parse(&t))));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(out),
        }
    }
}

/// One connection's loop.
struct Worker {
    client: reqwest::Client,
    target: Arc<Target>,
    ledger: Arc<Ledger>,
    conversations: usize,
    read_share: f64,
}

impl Worker {
    async fn run(self, deadline: Instant) -> Tally {
        let mut tally = Tally::new();
        while Instant::now() < deadline {
            let c = fastrand::usize(..self.conversations);
            let started = Instant::now();
            if fastrand::f64() < self.read_share {
                let result = send(self.client.get(self.target.url(c, "messages"))).await;
                let took = started.elapsed();
                // A window must be this conversation's messages, whole turns first to last.
                let checked = result.and_then(|body| match markers(&body)?.as_slice() {
                    [] => Err("window is empty".to_owned()),
                    w if w.iter().all(|m| m.is_some_and(|m| m.conversation == c)) => Ok(()),
                    _ => Err("window holds a message not sent there".to_owned()),
                });
                match checked {
                    Ok(()) => tally.ok(false, took),
                    Err(kind) => tally.error(false, kind),
                }
            } else {
                match commit_turn(&self.client, &self.target, &self.ledger, c).await {
                    Ok(()) => tally.ok(true, started.elapsed()),
                    Err(kind) => tally.error(true, kind),
                }
            }
        }
        tally
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One connection's counts, merged at the end.
struct Tally {
    reads: Histogram<u64>,
    commits: Histogram<u64>,
    read_errors: u64,
    commit_errors: u64,
    kinds: BTreeMap<String, u64>,
}

impl Tally {
    fn new() -> Self {
        // 1 µs to an hour at 3 significant digits; a slower request is recorded as an hour.
        let histogram = || {
            Histogram::<u64>::new_with_bounds(1, MAX_MICROS, 3)
                .unwrap_or_else(|_| unreachable!("these bounds are valid"))
        };
        Self {
            reads: histogram(),
            commits: histogram(),
            read_errors: 0,
            commit_errors: 0,
            kinds: BTreeMap::new(),
        }
    }

    fn ok(&mut self, commit: bool, took: Duration) {
        let h = if commit { &mut self.commits } else { &mut self.reads };
        h.saturating_record(micros(took));
    }

    fn error(&mut self, commit: bool, kind: String) {
        if commit {
            self.commit_errors += 1;
        } else {
            self.read_errors += 1;
        }
        let op = if commit { "commit" } else { "read" };
        *self.kinds.entry(format!("{op}: {kind}")).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.reads.add(&other.reads);
        let _ = self.commits.add(&other.commits);
        self.read_errors += other.read_errors;
        self.commit_errors += other.commit_errors;
        for (k, n) in other.kinds {
            *self.kinds.entry(k).or_default() += n;
        }
    }
}

/// Reads every history back and checks it against the ledger.
async fn verify(target: &Arc<Target>, ledger: &Ledger, conversations: usize) -> Result<Verification, LoadError> {
    let mut histories = for_each_conversation(conversations, AFTER_RUN_CONCURRENCY, {
        let (client, target) = (client(AFTER_RUN_CONCURRENCY)?, target.clone());
        move |c| {
            let (client, url) = (client.clone(), target.url(c, "history"));
            async move { history_markers(&client, &url).await }
        }
    })
    .await?;
    histories.sort_by_key(|(c, _)| *c);
    let mut v = Verification::default();
    for (c, history) in histories {
        let history = history.unwrap_or_else(|_| {
            v.unreadable += 1;
            Vec::new()
        });
        v.check(c, &ledger.get(c), &history);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_keep_their_size_through_a_merge() {
        let (mut a, mut b) = (Tally::new(), Tally::new());
        a.ok(true, Duration::from_millis(5));
        b.ok(true, Duration::from_millis(120));
        b.ok(false, Duration::from_secs(7_200));
        b.error(false, "status 503 store_timeout".into());
        a.merge(b);
        let commits = OpStats::new(&a.commits, a.commit_errors, 1.0);
        assert_eq!(commits.requests, 2);
        assert!((commits.p50_ms - 5.0).abs() < 0.01, "{commits:?}");
        assert!((commits.max_ms - 120.0).abs() < 0.1, "{commits:?}");
        let reads = OpStats::new(&a.reads, a.read_errors, 1.0);
        assert_eq!((reads.requests, reads.errors), (1, 1));
        assert!(
            (reads.max_ms - 3_600_000.0).abs() < 3_600.0,
            "over an hour counts as an hour: {reads:?}"
        );
        assert_eq!(a.kinds.get("read: status 503 store_timeout"), Some(&1));
    }
}
